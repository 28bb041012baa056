"""What a run folder says, one module per job: reading it (`load.py`), the run report (`text.py`), plots
(`plots.py`), what a run was made on (`installation.py`), the comparison of runs and of arms over seeds
(`compare.py`) and its statistics (`stats.py`: paired intervals, Holm); `report.py` re-exports the names."""
