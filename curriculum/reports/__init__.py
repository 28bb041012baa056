"""What a run folder says: the report, plots and the comparison of arms (`report.py`) and its statistics (`stats.py`:
paired intervals, Holm)."""
