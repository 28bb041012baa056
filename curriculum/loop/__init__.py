"""The curriculum without a trainer: the public `Curriculum` (`curriculum.py`), its three disjoint sets (`sets.py`),
its typed records and their checked reader (`records.py`), the run folder and its manifest (`folder.py`,
`manifest.py`), the trainer rows (`rows.py`), main-process records under several processes (`distributed.py`) and
the CPU rehearsal of a preset's path (`rehearsal.py`). Nothing here imports `curriculum.training`: `mapf-lake
train`'s run (`curriculum/training/run.py`) is one more user of the curriculum."""
