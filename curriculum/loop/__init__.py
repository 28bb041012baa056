"""The stage loop: the resumable run (`run.py`), its three disjoint sets (`sets.py`), its typed records and their
checked reader (`records.py`), main-process records under several processes (`distributed.py`) and the CPU rehearsal
of a preset's path (`rehearsal.py`)."""
