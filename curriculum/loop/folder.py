"""The run folder: its manifest (accepted, refused or extended on resume), its finished stages, and the records the
stage loop reads back.

Layout (``RunConfig.run_dir``)::

    manifest.json            run config, package versions, machine, seeds, git commit, created
    run.yaml                 the run config
    model-init/              the embedded tiny model (model: tiny), created at start
    untrained/               the starting model on the evidence set (validation.mlr, summary.json)
    warm_start/model/        supervised warm start checkpoint (model + tokenizer)
    warm_start/validation.mlr, warm_start/summary.json   the warm-started model on the evidence set
    warm_start/decision.json the engineer's choice of stage 1's config (only with ``engineer.plan_first``)
    stage-01/config.yaml     the stage config trained on
    stage-01/replay.jsonl    the instances the previous decision handed the stage besides its config's (only when
                             there are any: the ``replay`` and ``failures`` engineers'); the stage generates
                             ``samples`` minus their number from its config (:data:`HANDED_FILE`)
    stage-01/model/          the stage's checkpoint (model + tokenizer); stage-01/trainer/ TRL's own checkpoints
    stage-01/validation.mlr  evidence replays;  stage-01/summary.json  their failure summary
    stage-01/decision.json   the engineer's decision record (raw answer, proposal, repairs, final config, diff)
    stage-01/stage.json      the stage record, written last: a stage is complete exactly when this file exists
    metrics.jsonl            one line per completed stage (rewritten atomically)
    final/                   test-set evaluation replays of the last checkpoint;  final/table.json
    final-stage-NN/          after an extension: the final evaluation of the run's earlier last stage
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

from curriculum.config import RunConfig, load_run_config, save_run_config
from curriculum.loop.distributed import is_main_process, wait_for_file
from curriculum.loop.manifest import RUN_ID_CHARS, RunManifest, read_run_id
from curriculum.loop.records import StageRecord, read_record, write_record
from engineer import StageEvidence
from engineer.decision import EngineerDecision
from simulator.atomic import atomic_write
from simulator.errors import ConfigError, short_repr
from simulator.files import MAX_CONFIG_BYTES, read_text_bounded
from simulator.text import counted

Log = Callable[[str], None]

# The run-folder protocol: 2 = three disjoint sets (curriculum.loop.sets): training seeds in their own domain, test and
# evidence instances excluded from training by content, the test set scored last. A folder of protocol 1 (no
# ``protocol`` in its manifest) trained on other instances: it is read by ``report``/``compare`` but not resumed.
RUN_PROTOCOL = 2
HANDED_FILE = "replay.jsonl"
"""In a stage folder: the instances the previous decision handed the stage, as JSON lines (the name is kept for
the run folders written before this constant had its present name)."""


SHARED_FROM_FILE = "shared_from.txt"
CANDIDATES_DIR = "candidates"  # a stage folder's lookahead trials, one folder per candidate config
"""In a stage folder copied from a sibling arm (``train --compare``): the run folder that trained it."""


def read_shared_from(folder: Path) -> str | None:
    """A stage folder's :data:`SHARED_FROM_FILE` note (the run folder that trained the stage), None without one;
    read through :mod:`simulator.files` (a regular file, at most ``MAX_CONFIG_BYTES``, UTF-8): anything else is a
    ConfigError naming the file."""
    path = folder / SHARED_FROM_FILE
    return read_text_bounded(path, MAX_CONFIG_BYTES, "a stage's shared-from note") if path.exists() else None


def new_run_id(config: RunConfig, created: str) -> str:
    """A new run's id: a digest of its run config, the time it was made and a random part (two runs of one config
    made in the same second still differ), :data:`RUN_ID_CHARS` hex digits."""
    import hashlib
    import secrets

    text = json.dumps(config.to_dict(), sort_keys=True, default=str) + created + secrets.token_hex(8)
    return hashlib.sha256(text.encode()).hexdigest()[:RUN_ID_CHARS]


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _versions() -> dict[str, str | None]:
    from importlib import metadata

    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in ("mapf-frozenlake", "numpy", "numba", "torch", "transformers", "trl", "accelerate", "peft", "datasets"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


# Environment variables that change which CPU kernels torch, oneDNN and MKL run (and so a run's per-seed figures:
# AVX-512/AMX and AVX2 kernels round differently), recorded in the manifest when set.
KERNEL_ENV = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR", "OMP_NUM_THREADS")
_CPUINFO = "/proc/cpuinfo"
_CPUINFO_LINES = 400  # the first processor's block is about 30 lines; stop well before a large machine's whole file


def _cpu_facts(path: str = _CPUINFO) -> tuple[str | None, list[str]]:
    """The CPU's model name and its AMX and AVX-512 flags (sorted), from the first processor of ``/proc/cpuinfo``;
    ``(None, [])`` where that file is not readable (not Linux)."""
    model, flags = None, []
    try:
        # procfs reports size 0 for this file, so the size-bounded reader of simulator.files would read nothing;
        # the lines read are bounded instead
        with open(path, encoding="utf-8", errors="replace") as handle:
            for _, line in zip(range(_CPUINFO_LINES), handle):
                key, _, value = line.partition(":")
                if key.strip() == "model name" and model is None:
                    model = value.strip() or None
                elif key.strip() == "flags":
                    flags = sorted(flag for flag in value.split() if flag.startswith(("amx", "avx512")))
                    break
    except OSError:
        return None, []
    return model, flags


def _torch_cpu_capability() -> str | None:
    """The CPU kernels torch dispatches to (``torch.backends.cpu.get_cpu_capability()``: ``AVX512``, ``AVX2``,
    ``DEFAULT``, ...), or None where torch is not installed. Torch is imported for it: a run trains with torch."""
    try:
        import torch
    except (ImportError, OSError):  # not installed, or a broken install (a shared library that does not load)
        return None
    get = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", None)
    return str(get()) if get is not None else None


def _machine() -> dict:
    """What the run ran on, for telling installations apart (no user or host names): the platform, and the facts
    that choose the CPU kernels (the CPU model, its AMX/AVX-512 flags, torch's CPU capability and the
    :data:`KERNEL_ENV` variables that are set)."""
    model, flags = _cpu_facts()
    return {"system": platform.system(), "machine": platform.machine(), "processor": platform.processor() or None,
            "cpus": os.cpu_count(), "cpu_model": model, "cpu_flags": flags,
            "torch_cpu_capability": _torch_cpu_capability(),
            "kernel_env": {name: os.environ[name] for name in KERNEL_ENV if name in os.environ}}


def stage_folder(run_dir: Path, stage: int) -> Path:
    """A run's folder of stage ``stage`` (1-based)."""
    return run_dir / f"stage-{stage:02d}"


def read_decision(path: Path) -> EngineerDecision:
    """A ``decision.json`` the stage loop wrote, read back (a bad one raises ConfigError naming the file and
    field)."""
    return EngineerDecision.from_dict(read_record(path, "engineer's decision", ("config",)), str(path))


def read_summary(path: Path) -> StageEvidence:
    """A ``summary.json`` the stage loop wrote, read back (a bad one raises ConfigError naming the file and key).

    A summary written before the split by optimal makespan existed (a run folder of an older version, or a warm
    start another arm made) gets the split from the ``validation.mlr`` beside it, in memory: the engineer of a
    new arm reads the same evidence as one that validated itself, and the folder is not rewritten."""
    evidence = StageEvidence.from_dict(read_record(path, "validation summary"), str(path))
    replay = path.parent / "validation.mlr"
    if not evidence.failures.by_size_makespan and evidence.failures.episodes and replay.exists():
        from replays.mining import summarize
        from replays.reader import ReplayReader

        with ReplayReader(replay) as reader:
            split = summarize(reader, exemplars_per_category=0).by_size_makespan
        evidence = replace(evidence, failures=replace(evidence.failures, by_size_makespan=split))
    return evidence


# Run-config keys in which a run whose decisions another replays (``replay-decisions``) may differ from it: its place,
# arm, seed, stage count (each decision is read where it is) and engineer, but for ``plan_first`` (both have a plan
# before stage 1, or neither).
_REPLAY_NEUTRAL = ("name", "output_dir", "arm", "seed", "stages")
_REPLAY_NEUTRAL_ENGINEER = ("spec", "options", "context")


def recorded_decision(folder: str | Path, seed: int, stage: int, like: RunConfig) -> tuple[str, EngineerDecision]:
    """The file and the decision that the recorded run in ``folder`` wrote after ``stage`` (0: its plan before stage
    1), for a run of ``like``'s settings that replays it (a relative ``folder`` lies in ``like.output_dir``). Refused
    with one ConfigError naming the file: no run config there, a run of another seed than ``seed``, a run of other
    settings than ``like`` (but for :data:`_REPLAY_NEUTRAL` and the engineer's spec, options and context), no
    decision at that stage yet, or a damaged record."""
    folder = Path(folder)
    if not folder.is_absolute():
        folder = Path(like.output_dir) / folder
    run_yaml = folder / "run.yaml"
    if not run_yaml.is_file():
        raise ConfigError(str(run_yaml), "missing", f"the run config of a recorded run of seed {seed} (the source "
                          "arm's run must exist before a run replays its decisions)")
    source = load_run_config(run_yaml)
    if source.seed != seed:
        raise ConfigError(f"{run_yaml}: seed", source.seed, f"{seed}, the seed whose run this one replays")

    def comparable(run: RunConfig) -> dict:
        data = {key: value for key, value in json.loads(json.dumps(run.to_dict(), default=str)).items()
                if key not in _REPLAY_NEUTRAL}
        data["engineer"] = {key: value for key, value in data["engineer"].items()
                            if key not in _REPLAY_NEUTRAL_ENGINEER}
        return data

    differs = _differences(comparable(source), comparable(like))
    if differs:
        raise ConfigError(str(run_yaml), "a run of other settings", "a run of this run's settings but for its place, "
                          "arm, seed, stages and engineer (plan_first must match)", f"differs in {', '.join(differs[:5])}")
    recorded = RunFolder(source, log=lambda line: None, folder=folder)
    path = recorded.plan_path() if stage == 0 else recorded.stage_dir(stage) / "decision.json"
    if not path.exists():
        when = "before stage 1" if stage == 0 else f"after stage {stage}"
        raise ConfigError(str(path), "missing", f"the decision the run of seed {seed} recorded {when} (its run must "
                          "reach that decision before this one does)")
    return str(path), read_decision(path)


def _differences(recorded, current, prefix: str = "") -> list[str]:
    """Dotted names of the entries in which two run-config documents differ, with both values (``a -> b``)."""
    if isinstance(recorded, dict) and isinstance(current, dict):
        out = []
        for key in dict.fromkeys([*recorded, *current]):
            out += _differences(recorded.get(key), current.get(key), f"{prefix}{key}.")
        return out
    if recorded == current:
        return []
    return [f"{prefix.rstrip('.')}: {short_repr(recorded, 40)} -> {short_repr(current, 40)}"]


class RunFolder:
    """One run's folder: made or accepted (:meth:`start`), its finished stages read back, its records written."""

    def __init__(self, config: RunConfig, log: Log, folder: Path | None = None) -> None:
        self.config = config
        self.dir = config.run_dir if folder is None else folder  # given: a recorded run read where it is now
        self.log = log
        self._run_id: str | None = None

    @property
    def is_main_process(self) -> bool:
        """Under several processes (``accelerate launch``), only the main one generates validation answers, runs
        the engineer, evaluates and writes the run's records; the others take part in training only and read
        the records back (``wait_for_file``)."""
        return is_main_process()

    def stage_dir(self, stage: int) -> Path:
        return stage_folder(self.dir, stage)

    def start_dir(self) -> Path:
        """Where the model stage 1 starts from was validated: ``warm_start/`` with a warm start, else
        ``untrained/`` (the decision made before stage 1 is kept there too)."""
        return self.dir / ("warm_start" if self.config.warm_start.enabled else "untrained")

    def plan_path(self) -> Path:
        """Where the decision made before stage 1 (``engineer.plan_first``) is kept."""
        return self.start_dir() / "decision.json"

    def previous_decision(self, stage: int) -> Path | None:
        """The decision record that chose ``stage``'s config (None: stage 1 without ``plan_first``)."""
        if stage > 1:
            return self.stage_dir(stage - 1) / "decision.json"
        return self.plan_path() if self.config.engineer.plan_first else None

    def completed_stages(self) -> list[StageRecord]:
        """The finished stages, 1.. in order, each with its checkpoint in this folder as it is now (a moved folder
        holds its models; the record names the path it was written under). A stage folder after an unfinished
        or missing stage raises ConfigError: the stages after a gap trained from a model the run no longer has,
        and resuming would train the gap again while reusing their validation and decisions."""
        records = []
        for stage in range(1, self.config.stages + 1):
            path = self.stage_dir(stage) / "stage.json"
            if not path.exists():
                self._refuse_a_gap_after(stage)
                break
            record = self.read_stage(path, stage)
            records.append(replace(record, model=str(self.stage_dir(stage) / "model")))
        return records

    def read_stage(self, path: Path, stage: int) -> StageRecord:
        """The stage record ``path`` of stage ``stage``: one that says it is another stage (a record copied into
        the wrong folder) is refused naming the file."""
        document = read_record(path, "stage record")
        record = StageRecord.from_dict(document, str(path))
        if record.stage != stage:
            raise ConfigError(f"{path}: stage", record.stage, f"{stage}, the stage of the folder it is in")
        recorded, own = read_run_id(document, str(path)), self.run_id
        if recorded and own and recorded != own:
            raise ConfigError(f"{path}: run_id", recorded, f"{own}, the id of the run in {self.dir} (manifest.json): "
                              "a stage record of another run (restore this run's own, or start a new run)")
        return record

    def _refuse_a_gap_after(self, unfinished: int) -> None:
        later = sorted(int(match.group(1)) for match in (re.fullmatch(r"stage-(\d+)", path.name)
                                                         for path in self.dir.glob("stage-*") if path.is_dir())
                       if match and int(match.group(1)) > unfinished)
        if later and later[0] == unfinished + 1 and self._only_trials(self.stage_dir(later[0])):
            later = later[1:]  # the unfinished stage's lookahead decision, trying the next stage: not a gap
        if later:
            missing = self.stage_dir(unfinished)
            what = f"{missing.name}/stage.json" if missing.exists() else f"{missing.name}/"
            raise ConfigError("run folder", str(self.dir), "stage folders 1..N without a gap (restore the missing "
                              "stage, or start a new run)", f"{what} is missing but {self.stage_dir(later[0]).name}/ "
                              "is there")

    @staticmethod
    def _only_trials(folder: Path) -> bool:
        """Whether a stage folder holds nothing but ``candidates/``: the lookahead engineer's trials of that stage,
        trained while the stage before it was still deciding (killed there, that stage has no record yet)."""
        return [path.name for path in folder.iterdir()] == [CANDIDATES_DIR]

    def start(self) -> None:
        """Make the folder and its manifest, or accept the folder as this run's (the same run config, wherever
        the folder is now), extending it when only ``stages`` grew; anything else raises ConfigError."""
        self.dir.mkdir(parents=True, exist_ok=True)
        manifest = self.dir / "manifest.json"
        if not self.is_main_process:
            wait_for_file(manifest)
        if manifest.exists():
            grown = self._recorded_stages(manifest)
            if grown is not None:
                self._extend(grown)
            self.completed_stages()  # a gap in the stages is refused now, before anything is trained
            return
        save_run_config(self.config, self.dir / "run.yaml")
        created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        write_record(manifest, {"protocol": RUN_PROTOCOL, "run_config": self.config.to_dict(), "versions": _versions(),
                                "machine": _machine(), "seed": self.config.seed, "git_commit": _git_commit(),
                                "created": created, "run_id": new_run_id(self.config, created)},
                     "run manifest", RunManifest.from_dict, keys=("run_config",))

    @property
    def run_id(self) -> str | None:
        """The run's id (``manifest.json``'s ``run_id``): what its stage records and trainer checkpoint states carry,
        so one of another run is refused by name. None: no manifest yet, or a folder made before run ids."""
        if self._run_id is None:
            manifest = self.dir / "manifest.json"
            if manifest.exists():
                self._run_id = read_run_id(read_record(manifest, "run manifest", ("run_config",)), str(manifest))
        return self._run_id or None

    def check(self) -> None:
        """Refuse now, reading only, what :meth:`start` would refuse of an existing folder (another protocol,
        another run config, fewer stages than are finished, a gap in the stages); a folder not made yet passes.
        ``train --compare`` checks every arm's folder so, before the first arm trains."""
        manifest = self.dir / "manifest.json"
        if not manifest.exists():
            return
        grown = self._recorded_stages(manifest)
        done = len(self.completed_stages())
        if grown is not None and self.config.stages < max(done, grown):
            raise ConfigError("stages", self.config.stages, f"at least {max(done, grown)}: the run folder "
                              f"{self.dir} was made with {counted(grown, 'stage')} and {done} are finished "
                              "(a run can be extended, not cut)")

    def _recorded_stages(self, manifest: Path) -> int | None:
        """Compare the folder's ``manifest`` with this run's config: None when they are the same run, the
        recorded ``stages`` when only ``stages`` differs (an extension); anything else raises ConfigError."""
        data = read_record(manifest, "run manifest", ("run_config",))
        if data.get("protocol") != RUN_PROTOCOL:
            raise ConfigError("run", str(self.dir), f"a run folder of protocol {RUN_PROTOCOL} (three disjoint "
                              "instance sets); this one was made before it and its stages trained on other "
                              "instances: start a new run (another --name), or read it with mapf-lake report")
        recorded = data["run_config"]
        if not isinstance(recorded, dict):
            raise ConfigError(f"{manifest}: run_config", type(recorded).__name__, "a mapping (the run config)")
        try:  # a run recorded before a field existed has that field's default, which is what it ran with
            recorded = RunConfig.from_dict(recorded).to_dict()
        except ConfigError:
            pass  # compared as written: the mismatch below names the folder
        # Where the folder is (output_dir/name) is not part of the run: a folder resumed by another spelling of
        # its path, or after a move, is the same run.
        placed = {"output_dir": None, "name": None}
        recorded = {**json.loads(json.dumps(recorded, default=str)), **placed}
        current = {**json.loads(json.dumps(self.config.to_dict(), default=str)), **placed}
        if recorded == current:
            return None
        if {**recorded, "stages": current["stages"]} == current:
            return int(recorded["stages"])
        differs = ", ".join(_differences(recorded, current)[:5])
        raise ConfigError("run", str(self.dir), "the same run config as its manifest records: resume the "
                          "folder as it is (--resume RUN, alone or with --set stages=N), or start a new run "
                          "(another name / output_dir)", f"differs in {differs}")

    def _extend(self, recorded_stages: int) -> None:
        """Give a run folder more stages than it was made with (``--resume RUN --set stages=N``, or a comparison
        rerun with a larger ``stages``): the finished stages are kept and the loop continues after them, exactly as
        a run made with N stages would (no engineer sees the stage count). The final evaluation of the earlier last
        stage is kept as ``final-stage-NN/``. Fewer stages than are finished: ConfigError, nothing is touched."""
        if not self.is_main_process:  # the main process extends the folder; the others only train
            return
        done = len(self.completed_stages())
        if self.config.stages < max(done, recorded_stages):
            raise ConfigError("stages", self.config.stages, f"at least {max(done, recorded_stages)}: the run folder "
                              f"{self.dir} was made with {counted(recorded_stages, 'stage')} and {done} are finished "
                              "(a run can be extended, not cut)")
        final, kept = self.dir / "final", self.dir / f"final-stage-{recorded_stages:02d}"
        if final.exists():
            if kept.exists():
                shutil.rmtree(kept)
            final.rename(kept)
        save_run_config(self.config, self.dir / "run.yaml")
        manifest = self.dir / "manifest.json"
        data = read_record(manifest, "run manifest", ("run_config",))
        data["run_config"] = self.config.to_dict()
        data.setdefault("extended", []).append({"from_stages": recorded_stages, "to_stages": self.config.stages,
                                                "git_commit": _git_commit(), "versions": _versions(),
                                                "machine": _machine(), "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        write_record(manifest, data, "run manifest", RunManifest.from_dict, keys=("run_config",))
        self.log(f"{self.config.name}: extended from {recorded_stages} to {counted(self.config.stages, 'stage')}"
                 + (f" (the {recorded_stages}-stage final evaluation kept in {kept.name}/)" if kept.exists() else ""))

    def write_metrics(self) -> None:
        """``metrics.jsonl``: one line per finished stage (rewritten whole, atomically)."""
        lines = []
        for record in self.completed_stages():
            lines.append(json.dumps({"stage": record.stage, **record.scores.to_dict(),
                                     "step_seconds": record.train.step_seconds,
                                     "reward_mean_train": record.train.reward_mean,
                                     "completion_tokens_mean": record.train.completion_tokens_mean}))
        atomic_write(self.dir / "metrics.jsonl", "\n".join(lines) + "\n")


__all__ = ["CANDIDATES_DIR", "HANDED_FILE", "RUN_ID_CHARS", "RUN_PROTOCOL", "SHARED_FROM_FILE", "RunFolder", "new_run_id",
           "read_decision", "read_run_id", "read_shared_from", "read_summary", "recorded_decision", "stage_folder"]
