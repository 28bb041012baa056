"""``mapf-lake train``'s run (`run.py`: the curriculum plus the project's trainers) and the trainer jobs a stage
calls, one module each, each returning a typed `curriculum.loop.records.TrainingReport`:
`sft.py` (the supervised warm start), `grpo.py` (a GRPO stage and its trainer subclasses), `rft.py` (a
rejection-sampling fine-tuning stage); `trainers.py` looks a stage's job up by `training.trainer`. What they share
is in `common.py` (quiet libraries, checkpoint marks, TRL arguments, progress line, datasets) and `callbacks.py`
(the TrainerCallbacks a GRPO stage saves its tallies and weight average with)."""

import os

# Set here, before any trainer module loads tokenizers or the hub client: the package is imported first whichever
# of its modules a caller names.
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
