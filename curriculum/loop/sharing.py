"""What compared arms of one seed share instead of training again (``mapf-lake train --compare``): the warm start,
and any stage an earlier arm trained with the same settings, warm start and chain of stage configs."""

from __future__ import annotations

import shutil
from pathlib import Path

from curriculum.config import RunConfig
from curriculum.loop.folder import HANDED_FILE, SHARED_FROM_FILE, stage_folder
from curriculum.loop.records import OUTCOMES_FILE
from simulator.atomic import atomic_folder, atomic_write
from simulator.config import StageConfig, format_config_text
from simulator.files import MAX_CONFIG_BYTES, MAX_INSTANCES_BYTES, read_bytes_bounded, read_text_bounded

# Run-config keys that cannot change what a stage trains on: the engineer acts only after a stage is validated,
# and what it decides is compared stage by stage (the stage configs themselves).
_STAGE_NEUTRAL = ("name", "arm", "engineer")
_SHARED_PARTS = ("config.yaml", "model", "validation.mlr", "summary.json", OUTCOMES_FILE)
# (outcomes.json: only a rejection-sampling stage has it)


def share_stage(source: RunConfig, target: RunConfig, stage: int, config: StageConfig, given: bytes = b"") -> bool:
    """Copy ``source``'s finished stage ``stage`` (its config, trained model and validation) into ``target``'s run
    folder when training it again would repeat the same experiment: the runs differ only in the engineer (and
    name/arm, and ``initial_config`` where it is not the warm start's data), so they share the warm start and
    seeds, and every stage so far trained on the same stage config and handed instances (``replay.jsonl``) in both,
    ``config`` and ``given`` (``target``'s next stage, seed set, and the bytes of its handed instances, empty for
    none) included. Compared arms whose engineers agree (``rule``
    keeping a config ``fixed`` keeps, an ``llm:`` engineer falling back) then pay for a stage once per seed; stage
    1 is always shared. The engineer's decision is not copied: ``target`` makes its own. Returns whether anything
    was shared (False when the settings or any stage config differ, or ``source``'s stage is not finished)."""
    def neutral(run: RunConfig) -> dict:
        data = {key: value for key, value in run.to_dict().items() if key not in _STAGE_NEUTRAL}
        # ``initial_config`` reaches training only through stage 1's config (compared below, so a stage 1 an
        # engineer planned into a sibling's config is shared) and, without a warm-start config of its own,
        # through the warm start's data: that is what is compared
        initial = data.pop("initial_config")
        if run.warm_start.enabled and not data["warm_start"]["config"]:
            data["warm_start"]["config"] = initial
        return data

    src, dst = stage_folder(source.run_dir, stage), stage_folder(target.run_dir, stage)
    if neutral(source) != neutral(target) or not (src / "stage.json").exists() or (dst / "model").exists():
        return False
    if not (src / "config.yaml").exists() or _text(src / "config.yaml") != format_config_text(config, "yaml"):
        return False
    if handed_bytes(src) != given:
        return False
    for earlier in range(1, stage):  # the same chain of stage configs: the same checkpoint this stage starts from
        mine = stage_folder(target.run_dir, earlier) / "config.yaml"
        theirs = stage_folder(source.run_dir, earlier) / "config.yaml"
        if not (mine.exists() and theirs.exists()) or _text(mine) != _text(theirs):
            return False
        if handed_bytes(mine.parent) != handed_bytes(theirs.parent):
            return False
    dst.mkdir(parents=True, exist_ok=True)
    for part in _SHARED_PARTS:
        if (dst / part).exists() or not (src / part).exists():
            continue
        if (src / part).is_dir():
            with atomic_folder(dst / part) as building:
                shutil.copytree(src / part, building, dirs_exist_ok=True)
        else:
            atomic_write(dst / part, read_bytes_bounded(src / part, MAX_INSTANCES_BYTES, f"a sibling arm's {part}"))
    origin = src / SHARED_FROM_FILE  # a copy of a copy names the run that trained (and timed) the stage
    atomic_write(dst / SHARED_FROM_FILE, _text(origin) if origin.exists() else str(source.run_dir))
    return True


def handed_bytes(folder: Path) -> bytes:
    """The bytes of a stage folder's ``replay.jsonl`` (the instances handed to it), empty without one."""
    path = folder / HANDED_FILE
    return read_bytes_bounded(path, MAX_INSTANCES_BYTES, "a stage's handed-over instances") if path.exists() else b""


def _text(path: Path) -> str:
    """A stage folder's small text record (a config, a shared-from note): a regular file, bounded."""
    return read_text_bounded(path, MAX_CONFIG_BYTES, "a stage folder's record")


def share_warm_start(source: Path, target: Path) -> None:
    """Copy a finished warm start (and the untrained baseline) into another run folder of the same settings, so
    compared runs start from the same checkpoint and the budget goes to the stages. The plan before stage 1
    (``decision.json``, ``engineer.plan_first``) is not copied: each arm's engineer makes its own."""
    for part in ("model-init", "untrained", "warm_start"):
        src = source / part
        dst = target / part
        if src.exists() and not dst.exists():
            # Copied under a temporary name and renamed: a kill mid-copy must not leave a model folder with its
            # config but no weights (or a warm start marked done without its checkpoint) for the resume to trust.
            with atomic_folder(dst) as building:
                shutil.copytree(src, building, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("trainer", "decision.json"))


__all__ = ["handed_bytes", "share_stage", "share_warm_start"]
