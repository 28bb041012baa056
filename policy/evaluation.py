"""Paper-style evaluation: a policy over a benchmark suite, one replay file per cell, resumable.

``evaluate(policy, suite, out_dir)`` runs every (agents x size) cell of the suite whose replay file is not in
``out_dir`` yet (a complete file is the record that the cell is done: files are written atomically), and
returns the table: rows = agent counts, columns = map sizes, cells = valid% / optimal%, plus the mean over
sizes, the worst cells' mean (``cvar10_valid``, see :class:`EvalTable`) and the failure breakdown over all cells.
A file is reused only when its header records this policy descriptor (prompt style and decoding included), seed
and set; a folder holding another run's cells is refused with a ConfigError before anything is run.

The set is a named suite, or an :class:`EvalSet`: a user's own instances (:func:`instances_set`, JSON lines as
``mapf-lake gen --out`` writes them) or a stage config generated on the spot (:func:`config_set`); their
instances are grouped into cells by (agent count, ``size`` label). Each cell's replay header records which set
in its ``extra``: ``suite`` (the name), ``instances`` (``{"path", "sha256"}`` of the file; reuse compares the
sha256 only, so a moved file is the same set) or ``config`` (the stage config document, seed included).
"""

from __future__ import annotations

import re
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from policy.rewards import components
from policy.rollout import judge_episodes
from replays.errors import ReplayError
from replays.mining import summarize
from replays.reader import ReplayReader
from replays.types import Episode, ReplayHeader
from replays.writer import ReplayWriter
from simulator import constants as C
from simulator.documents import checked_int, checked_real, read_key
from simulator.errors import ConfigError, short_repr
from simulator.generator import LabelledInstance, generate, read_jsonl_digest
from simulator.suites import SuiteCell, generate_cell, suite_cells
from simulator.tables import format_rate_table
from simulator.text import counted, percent

if TYPE_CHECKING:
    from policy.policies import Answers, Policy
    from simulator.config import StageConfig

CVAR_PERCENT = 10  # the share of cells, worst first, that cvar10_valid averages (an integer: exact ceilings)


def cell_file(out_dir: Path, agents: int, size: int) -> Path:
    return out_dir / f"cell-{agents}x{size}.mlr"


@dataclass(frozen=True)
class EvalCell:
    """One (agents, size) cell of an evaluation set.

    Fields:
        agents, size: the cell's agent count and size label (its row and column in the table).
        count: its number of instances.
        stage_config: recorded in its replay header: the suite cell's or the ``--config`` stage config document;
            None for a user's instance file.
        load: gives the cell's instances (a suite cell generates them when called).
    """

    agents: int
    size: int
    count: int
    stage_config: dict[str, Any] | None
    load: Callable[[], list[LabelledInstance]]


@dataclass(frozen=True)
class InstanceFile:
    """A user's instance file an evaluation set was read from."""

    path: str
    sha256: str
    """Of the file's bytes: a cell file is reused only for the same file."""


@dataclass(frozen=True)
class EvalSet:
    """What an evaluation runs on: a suite, a user's instance file, or a stage config (exactly one is set).

    Fields:
        name: shown in the table's title and as ``EvalTable.suite``: the suite's name, ``instances:FILE`` or
            ``config:FILE``.
        cells: in table order (agents, then size).
    """

    name: str
    cells: tuple[EvalCell, ...]
    suite: str | None = None
    instances: InstanceFile | None = None
    config: dict[str, Any] | None = None
    """The stage config document the cells were generated from."""

    @property
    def record(self) -> dict[str, Any]:
        """Written into every cell's replay header ``extra``: ``{"suite": name}``, ``{"instances": {"path",
        "sha256"}}`` or ``{"config": document}``."""
        if self.instances is not None:
            return {"instances": {"path": self.instances.path, "sha256": self.instances.sha256}}
        return {"config": self.config} if self.config is not None else {"suite": self.suite}

    def identity(self) -> dict[str, Any]:
        """What a cell file must have recorded to be reused for this set (see ``_recorded_run``)."""
        return {"suite": self.suite, "instances": self.instances.sha256 if self.instances is not None else None,
                "config": self.config}


def suite_set(name: str) -> EvalSet:
    """A benchmark suite (``simulator.suites``) as an evaluation set; each cell is generated when it runs."""
    cells = tuple(EvalCell(cell.agents, cell.size, cell.count, cell.config().to_dict(), _generating(cell))
                  for cell in suite_cells(name))
    return EvalSet(name, cells, suite=name)


def _generating(cell: SuiteCell) -> Callable[[], list[LabelledInstance]]:
    """A suite cell's loader: generates the cell's instances when called."""
    return lambda: generate_cell(cell).instances


def _holding(members: list[LabelledInstance]) -> Callable[[], list[LabelledInstance]]:
    """A loader of instances already in memory."""
    return lambda: members


def _grouped(items: list[LabelledInstance], stage_config: dict[str, Any] | None) -> tuple[EvalCell, ...]:
    groups: dict[tuple[int, int], list[LabelledInstance]] = {}
    for item in items:
        groups.setdefault((item.instance.n_agents, item.size), []).append(item)
    return tuple(EvalCell(agents, size, len(members), stage_config, _holding(members))
                 for (agents, size), members in sorted(groups.items()))


def instances_set(path: str | Path) -> EvalSet:
    """A user's own instances: a JSON-lines file as ``mapf-lake gen --out`` writes it
    (``simulator.generator.read_jsonl``), grouped into cells by (agent count, size); the header records the
    file's path and sha256."""
    path = Path(path)
    # certified as read, before any policy answers: a wrong label or plan is refused naming its line
    items, digest = read_jsonl_digest(path, "--instances", certify=True)
    if not items:
        raise ConfigError("--instances", str(path), "a file with at least one instance (gen --out writes them)")
    return EvalSet(f"instances:{path}", _grouped(items, None), instances=InstanceFile(str(path), digest))


def config_set(config: StageConfig, seed: int | None = None, source: str = "config",
               progress: Callable[[int], None] | None = None) -> EvalSet:
    """A stage config's instances, generated now (``seed`` overrides the config's, as ``gen --seed`` does), grouped
    into cells by (agent count, size); the header records the config document with the seed used."""
    from simulator.config import StageConfig

    if not isinstance(config, StageConfig):
        raise ConfigError("config", type(config).__name__, "a simulator.config.StageConfig")
    if seed is not None:
        config = StageConfig.from_dict({**config.to_dict(), "seed": seed})
    document = config.to_dict()
    items = generate(config, progress=progress).instances
    return EvalSet(f"config:{source}", _grouped(items, document), config=document)


@dataclass
class EvalTable:
    """valid/optimal rates per (agents, size), failure counts, and where the replays are.

    ``cvar10_valid()``: the mean valid rate of the worst cells, the tail the mean hides. Rule: sort the cells by
    valid rate ascending and average the first ``ceil(CVAR_PERCENT / 100 * n_cells)`` of them (at least one cell;
    every cell counts once, whatever its number of episodes; ties do not change the mean). None without cells.
    """

    suite: str
    policy: dict[str, Any]
    rates: dict[tuple[int, int], tuple[float, float, int]] = field(default_factory=dict)  # (valid, optimal, n)
    failures: dict[str, int] = field(default_factory=dict)
    reused_cells: int = 0
    files: list[str] = field(default_factory=list)
    source: dict[str, Any] = field(default_factory=dict)  # the set's header record (EvalSet.record)

    def sizes(self) -> list[int]:
        return sorted({size for _, size in self.rates})

    def agents(self) -> list[int]:
        return sorted({agents for agents, _ in self.rates})

    def mean(self, agents: int) -> tuple[float, float]:
        cells = [self.rates[(agents, s)] for s in self.sizes() if (agents, s) in self.rates]
        return float(np.mean([c[0] for c in cells])), float(np.mean([c[1] for c in cells]))

    def cvar_cells(self) -> int:
        """How many cells ``cvar10_valid`` averages: ``ceil(CVAR_PERCENT / 100 * n_cells)``, 0 without cells."""
        return -(-len(self.rates) * CVAR_PERCENT // 100)  # a ceiling in integers: 0.1 * 30 is 3.0000000000000004

    def cvar10_valid(self) -> float | None:
        """The mean valid rate of the worst ``cvar_cells()`` cells (see the class docstring)."""
        worst = sorted(valid for valid, _, _ in self.rates.values())[: self.cvar_cells()]
        return float(np.mean(worst)) if worst else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "policy": self.policy,
            "cells": {f"{a}x{s}": {"valid_rate": v, "optimal_rate": o, "episodes": n}
                      for (a, s), (v, o, n) in sorted(self.rates.items())},
            "mean": {str(a): dict(zip(("valid_rate", "optimal_rate"), self.mean(a))) for a in self.agents()},
            "cvar10_valid": self.cvar10_valid(),
            "cvar10_cells": self.cvar_cells(),
            "failures": self.failures,
            "reused_cells": self.reused_cells,
            "source": self.source,
        }

    def only(self, agents: Collection[int]) -> "EvalTable":
        """The table of the cells with these agent counts (a run's trained counts, or one row of ``compare``)."""
        return EvalTable(self.suite, self.policy, {key: rates for key, rates in self.rates.items() if key[0] in agents})

    @classmethod
    def from_dict(cls, data: Any, where: str = "") -> "EvalTable":
        """Read :meth:`to_dict`'s document (a run's ``final/table.json``), checked: a cell name that is not
        ``"<agents>x<side>"``, a rate outside [0, 1] or a field of the wrong kind raises ConfigError naming it
        under ``where``; at least one cell. ``mean`` and the ``cvar10`` figures are derived from the cells, so only
        checked for shape; a missing ``policy``, ``failures`` or ``source`` reads as empty."""
        cells = read_cells(data, where, non_empty=True)
        rates = {key: (_share(cell, "valid_rate", at), _share(cell, "optimal_rate", at),
                       checked_int(read_key(cell, "episodes", at, "int", optional=True) or 0, f"{at}.episodes", 0,
                                   10**12))
                 for key, (cell, at) in cells.items()}
        mean_at = _at(where, "mean")
        for name, mean in (read_key(data, "mean", where, "mapping", optional=True) or {}).items():
            if not isinstance(name, str) or not _AGENTS_KEY.fullmatch(name):
                raise ConfigError(f"{mean_at}.{short_repr(name, 40)}", name, "an agent count (\"2\")")
            for rate in ("valid_rate", "optimal_rate"):
                _share(mean, rate, f"{mean_at}.{name}")
        failures = read_key(data, "failures", where, "mapping", optional=True) or {}
        return cls(suite=read_key(data, "suite", where, "str"),
                   policy=dict(read_key(data, "policy", where, "mapping", optional=True) or {}), rates=rates,
                   failures={str(name): checked_int(count, f"{_at(where, 'failures')}.{short_repr(name, 40)}", 0,
                                                    10**12) for name, count in failures.items()},
                   reused_cells=checked_int(read_key(data, "reused_cells", where, "int", optional=True) or 0,
                                            _at(where, "reused_cells"), 0, 10**6),
                   source=dict(read_key(data, "source", where, "mapping", optional=True) or {}))

    def render(self) -> str:
        rows = [(f"{a:>6} ", {s: (v, o) for (agents, s), (v, o, _) in self.rates.items() if agents == a}, self.mean(a))
                for a in self.agents()]
        lines = [format_rate_table(f"{self.policy.get('spec', '?')} on {self.suite}: valid% / optimal%", "agents ",
                                   rows, self.sizes())]
        worst_valid = self.cvar10_valid()  # None exactly when there are no cells
        if worst_valid is not None:
            lines.append(f"worst {CVAR_PERCENT}% of cells (cvar10_valid, the {self.cvar_cells()} of "
                         f"{len(self.rates)} cells with the lowest valid rate): valid {percent(worst_valid)}")
        total = sum(v[2] for v in self.rates.values())
        failed = {name: n for name, n in self.failures.items() if n}
        lines.append(f"failures over {counted(total, 'episode')}: " + (
            ", ".join(f"{name} {n} ({percent(n / total)})" for name, n in failed.items()) if failed else "none"))
        return "\n".join(lines)


MAX_SAMPLES_K = 1024  # samples per instance of a sampled pass@1 (the bound of a run config's validation.sampled_k)
_CELL_KEY = re.compile(r"[1-9][0-9]{0,2}x[1-9][0-9]{0,3}")  # a test-set cell: "<agents>x<side>", e.g. "2x6"
_AGENTS_KEY = re.compile(r"[1-9][0-9]{0,2}")


def _at(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _share(cell: Any, key: str, where: str) -> float:
    """``cell[key]``, a share: a finite number in [0, 1] (a rate of 7 would print as 700%, NaN as nan)."""
    return checked_real(read_key(cell, key, where, "number"), f"{where}.{key}", 0.0, 1.0)


def read_cells(data: Any, where: str, non_empty: bool) -> dict[tuple[int, int], tuple[Any, str]]:
    """``data["cells"]``, ``{"<agents>x<side>": cell}``, as ``{(agents, side): (cell, its dotted name)}``; at least
    one cell when ``non_empty``. A bad name raises ConfigError naming it."""
    at = _at(where, "cells")
    cells = read_key(data, "cells", where, "mapping")
    if non_empty and not cells:
        raise ConfigError(at, cells, "at least one cell \"<agents>x<side>\" (the final evaluation's cells)")
    out = {}
    for name, cell in cells.items():
        if not isinstance(name, str) or not _CELL_KEY.fullmatch(name):
            raise ConfigError(f"{at}.{short_repr(name, 40)}", name, "a cell name \"<agents>x<side>\" like \"2x6\"")
        agents, side = name.split("x")
        out[int(agents), int(side)] = (cell, f"{at}.{name}")
    return out


@dataclass(frozen=True)
class SampledCell:
    """One test cell's sampled pass@1."""

    valid_rate: float
    optimal_rate: float | None = None
    samples: int | None = None
    """Answers sampled in the cell (its instances x k); None in records written before it was kept."""


@dataclass(frozen=True)
class SampledPass1:
    """Sampled pass@1 on a test set (a run's ``final/sampled.json``): ``k`` samples of every instance at
    ``temperature``, the share valid (and optimal) overall and per cell ``(agents, side)``."""

    k: int
    cells: Mapping[tuple[int, int], SampledCell]
    suite: str | None = None
    temperature: float | None = None
    valid_rate: float | None = None
    optimal_rate: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"suite": self.suite, "k": self.k, "temperature": self.temperature, "valid_rate": self.valid_rate,
                "optimal_rate": self.optimal_rate,
                "cells": {f"{a}x{s}": {"valid_rate": cell.valid_rate, "optimal_rate": cell.optimal_rate,
                                       "samples": cell.samples} for (a, s), cell in self.cells.items()}}

    @classmethod
    def from_dict(cls, data: Any, where: str = "") -> "SampledPass1":
        """Read :meth:`to_dict`'s document, checked (``k`` 1..``MAX_SAMPLES_K``, rates in [0, 1]); a field
        missing from an older record reads as None."""
        def share(cell: Any, key: str, at: str) -> float | None:
            return _share(cell, key, at) if read_key(cell, key, at, "number", optional=True) is not None else None

        cells = {key: SampledCell(_share(cell, "valid_rate", at), share(cell, "optimal_rate", at),
                                  checked_int(cell["samples"], f"{at}.samples", 0, 10**12)
                                  if read_key(cell, "samples", at, "int", optional=True) is not None else None)
                 for key, (cell, at) in read_cells(data, where, non_empty=False).items()}
        temperature = read_key(data, "temperature", where, "number", optional=True)
        return cls(k=checked_int(read_key(data, "k", where, "int"), _at(where, "k"), 1, MAX_SAMPLES_K), cells=cells,
                   suite=read_key(data, "suite", where, "str", optional=True),
                   temperature=checked_real(temperature, _at(where, "temperature"), 0.0, 100.0)
                   if temperature is not None else None,
                   valid_rate=share(data, "valid_rate", where), optimal_rate=share(data, "optimal_rate", where))


def _read_cell(path: Path) -> list[Episode] | None:
    try:
        with ReplayReader(path) as reader:
            return list(reader)
    except ReplayError:
        return None  # a damaged record of a finished cell: run the cell again


def _read_header(path: Path) -> ReplayHeader | None:
    try:
        with ReplayReader(path) as reader:  # opening reads the header and the index, no episode
            return reader.header
    except ReplayError:
        return None  # damaged: the cell is run again, whoever wrote it


def _recorded_run(header: ReplayHeader) -> dict[str, Any]:
    """What a cell file was made by: the policy descriptor (decoding included), the sampling seed, the set (a
    suite's name, an instance file's sha256 or a stage config document) and the cell's stage config."""
    instances = header.extra.get("instances")
    return {"policy": header.policy, "seed": header.extra.get("seed"), "suite": header.extra.get("suite"),
            "instances": instances.get("sha256") if isinstance(instances, dict) else instances,
            "config": header.extra.get("config"), "cell": header.stage_config}


def _check_same_run(path: Path, out_dir: Path, recorded: dict[str, Any], current: dict[str, Any],
                    ignored: tuple[str, ...] = ()) -> None:
    """A cell file is reused only for the run that made it; another policy, decoding, seed or suite in the same
    folder would print that run's numbers under this run's name. ``ignored``: policy descriptor keys not compared."""
    if ignored and isinstance(recorded["policy"], dict):  # _recorded_run always holds it
        recorded = {**recorded, "policy": {k: v for k, v in recorded["policy"].items() if k not in ignored}}
        current = {**current, "policy": {k: v for k, v in current["policy"].items() if k not in ignored}}
    differs = [name for name in current if recorded.get(name) != current[name]]
    if not differs:
        return
    parts = []
    for name in differs:
        was, now = recorded.get(name), current[name]
        if name == "policy" and isinstance(was, dict):
            keys = [key for key in dict.fromkeys([*was, *now]) if was.get(key) != now.get(key)]
            parts.append("policy " + ", ".join(f"{key} {was.get(key)!r} (now {now.get(key)!r})" for key in keys))
        else:
            parts.append(f"{name} {was!r} (now {now!r})")
    raise ConfigError("--out", str(out_dir), "a new folder, or one holding replays of this same policy, decoding, "
                      "seed and suite, instance file or config (pick another --out)",
                      f"{path.name} was written with " + "; ".join(parts))


def _check_folder(out_dir: Path, cells: Sequence[EvalCell], current: dict[str, Any], ignored: tuple[str, ...]) -> None:
    """Every cell file already in ``out_dir`` (of this suite's cells or not) must come from this same run; checked
    before any cell is run, so a refusal changes nothing."""
    configs = {cell_file(out_dir, cell.agents, cell.size).name: cell.stage_config for cell in cells}
    for path in sorted(out_dir.glob("cell-*.mlr")):
        header = _read_header(path)
        if header is not None:
            expected = {**current, "cell": configs[path.name]} if path.name in configs else current
            _check_same_run(path, out_dir, _recorded_run(header), expected, ignored)


def evaluate(policy: Policy, suite: str | EvalSet, out_dir: str | Path, seed: int = 0, run_id: str = "eval",
             progress: Callable[[int, int], None] | None = None,
             ignored_policy_keys: tuple[str, ...] = ()) -> EvalTable:
    """Evaluate ``policy`` (see ``policy.policies``) on every cell of ``suite`` (a suite's name or an
    :class:`EvalSet`); see the module docstring.

    ``ignored_policy_keys``: descriptor keys not compared when reusing a cell (a run's final evaluation ignores
    ``spec``, whose checkpoint path moves with the run folder).

    ``progress(done, total)`` is called with instances finished (cells reused count at once).
    """
    eval_set = suite_set(suite) if isinstance(suite, str) else suite
    if not isinstance(eval_set, EvalSet):
        raise ConfigError("suite", type(suite).__name__, "a suite's name or a policy.evaluation.EvalSet")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cells = eval_set.cells
    total = sum(cell.count for cell in cells)
    table = EvalTable(eval_set.name, policy.descriptor, source=eval_set.record)
    failures = {name: 0 for name in C.FAILURE_NAMES if name != "none"}
    done = 0
    _check_folder(out_dir, cells, {"policy": policy.descriptor, "seed": seed, **eval_set.identity()},
                  ignored_policy_keys)
    for cell in cells:
        path = cell_file(out_dir, cell.agents, cell.size)
        episodes = _read_cell(path) if path.exists() else None
        if episodes is not None and len(episodes) == cell.count:
            table.reused_cells += 1
        else:
            header = ReplayHeader.new(run_id=run_id, stage=0, split="eval", policy=policy.descriptor,
                                      stage_config=cell.stage_config,
                                      extra={**eval_set.record, "agents": cell.agents, "size": cell.size,
                                             "seed": seed})
            episodes = answer_and_record(policy, cell.load(), path, header, seed).episodes
        summary = summarize(episodes, exemplars_per_category=0)
        table.rates[(cell.agents, cell.size)] = (summary.valid_rate, summary.optimal_rate, summary.episodes)
        for name, count in summary.failures.items():
            failures[name] += count
        table.files.append(str(path))
        done += cell.count
        if progress:
            progress(done, total)
    table.failures = failures
    return table


@dataclass(frozen=True)
class Recorded:
    """What :func:`answer_and_record` did: the episodes it wrote and where the time went."""

    episodes: list[Episode]
    answer_seconds: float
    """The policy answering (the model generating)."""
    record_seconds: float
    """Parsing was the policy's; this is judging, rewards and writing the replay file."""


def answer_and_record(policy: Policy, items: Sequence[LabelledInstance], path: Path, header: ReplayHeader,
                      seed: int) -> Recorded:
    """The one routine from answers to a replay file, for evaluation cells and the stage loop's validation alike:
    ``policy`` answers ``items`` (``seed``), every plan is judged in one batch, each episode gets its reward and
    token counts, and the episodes are written to ``path`` under ``header``."""
    started = time.perf_counter()
    answers = policy.answer(items, seed=seed)
    answered = time.perf_counter()
    episodes = judge_episodes(items, answers.plans, answers.parse_errors, answers.completions, answers.prompts)
    attach_rewards(episodes, items, answers)
    with ReplayWriter(path, header) as writer:
        writer.write_all(episodes)
    return Recorded(episodes, answered - started, time.perf_counter() - answered)


def attach_rewards(episodes: Sequence[Episode], items: Sequence[LabelledInstance], answers: Answers) -> None:
    """Fill each episode's reward, components, token counts and answer time from ``answers``. The components come
    from the episodes' own verdicts (``policy.rewards.components``: the GRPO reward's rule), not from a second
    parse and judge."""
    rewards = components([ep.plan is not None for ep in episodes], [ep.outcome.valid for ep in episodes],
                         [ep.outcome.optimal for ep in episodes], [ep.outcome.agents_on_goal for ep in episodes],
                         [ep.instance.n_agents for ep in episodes])
    for i, episode in enumerate(episodes):
        episode.reward = float(rewards["default"][i])
        episode.reward_components = {name: float(rewards[name][i]) for name in ("format", "valid", "optimal", "progress")}
        episode.prompt_tokens = answers.prompt_tokens[i]
        episode.completion_tokens = answers.completion_tokens[i]
        episode.timings = {**episode.timings, "answer_s": answers.seconds_per_answer}
