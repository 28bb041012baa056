"""The trainers a stage calls (`trainers.py`: the supervised warm start, GRPO, rejection sampling), each returning a
typed `curriculum.loop.records.TrainingReport`."""
