"""Paper-style evaluation: a policy over a benchmark suite, one replay file per cell, resumable.

``evaluate(policy, suite, out_dir)`` runs every (agents x size) cell of the suite whose replay file is not in
``out_dir`` yet (a complete file is the record that the cell is done: files are written atomically), and
returns the table: rows = agent counts, columns = map sizes, cells = valid% / optimal%, plus the mean over
sizes, and the failure breakdown over all cells. A file is reused only when its header records this policy
descriptor (prompt style and decoding included), seed and suite; a folder holding another run's cells is refused
with a ConfigError before anything is run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from policy.rewards import components
from policy.rollout import judge_episodes
from replays.errors import ReplayError
from replays.mining import summarize
from replays.reader import ReplayReader
from replays.types import ReplayHeader
from replays.writer import ReplayWriter
from simulator import constants as C
from simulator.errors import ConfigError
from simulator.suites import generate_cell, suite_cells
from simulator.tables import format_rate_table


def cell_file(out_dir: Path, agents: int, size: int) -> Path:
    return out_dir / f"cell-{agents}x{size}.mlr"


@dataclass
class EvalTable:
    """valid/optimal rates per (agents, size), failure counts, and where the replays are."""

    suite: str
    policy: dict
    rates: dict[tuple[int, int], tuple[float, float, int]] = field(default_factory=dict)  # (valid, optimal, n)
    failures: dict[str, int] = field(default_factory=dict)
    reused_cells: int = 0
    files: list[str] = field(default_factory=list)

    def sizes(self) -> list[int]:
        return sorted({size for _, size in self.rates})

    def agents(self) -> list[int]:
        return sorted({agents for agents, _ in self.rates})

    def mean(self, agents: int) -> tuple[float, float]:
        cells = [self.rates[(agents, s)] for s in self.sizes() if (agents, s) in self.rates]
        return float(np.mean([c[0] for c in cells])), float(np.mean([c[1] for c in cells]))

    def to_dict(self) -> dict:
        return {
            "suite": self.suite,
            "policy": self.policy,
            "cells": {f"{a}x{s}": {"valid_rate": v, "optimal_rate": o, "episodes": n}
                      for (a, s), (v, o, n) in sorted(self.rates.items())},
            "mean": {str(a): dict(zip(("valid_rate", "optimal_rate"), self.mean(a))) for a in self.agents()},
            "failures": self.failures,
            "reused_cells": self.reused_cells,
        }

    def render(self) -> str:
        rows = [(f"{a:>6} ", {s: (v, o) for (agents, s), (v, o, _) in self.rates.items() if agents == a}, self.mean(a))
                for a in self.agents()]
        lines = [format_rate_table(f"{self.policy.get('spec', '?')} on {self.suite}: valid% / optimal%", "agents ",
                                   rows, self.sizes())]
        total = sum(v[2] for v in self.rates.values())
        failed = {name: n for name, n in self.failures.items() if n}
        lines.append(f"failures over {total} episodes: " + (
            ", ".join(f"{name} {n} ({100 * n / total:.1f}%)" for name, n in failed.items()) if failed else "none"))
        return "\n".join(lines)


def _read_cell(path: Path):
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


def _recorded_run(header: ReplayHeader) -> dict:
    """What a cell file was made by: the policy descriptor (decoding included), the sampling seed and the suite."""
    return {"policy": header.policy, "seed": header.extra.get("seed"), "suite": header.extra.get("suite"),
            "cell": header.stage_config}


def _check_same_run(path: Path, out_dir: Path, recorded: dict, current: dict, ignored: tuple[str, ...] = ()) -> None:
    """A cell file is reused only for the run that made it; another policy, decoding, seed or suite in the same
    folder would print that run's numbers under this run's name. ``ignored``: policy descriptor keys not compared."""
    if ignored and isinstance(recorded.get("policy"), dict):
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
                      "seed and suite (pick another --out)",
                      f"{path.name} was written with " + "; ".join(parts))


def _check_folder(out_dir: Path, cells, current: dict, ignored: tuple[str, ...]) -> None:
    """Every cell file already in ``out_dir`` (of this suite's cells or not) must come from this same run; checked
    before any cell is run, so a refusal changes nothing."""
    configs = {cell_file(out_dir, cell.agents, cell.size).name: cell.config().to_dict() for cell in cells}
    for path in sorted(out_dir.glob("cell-*.mlr")):
        header = _read_header(path)
        if header is not None:
            expected = {**current, "cell": configs[path.name]} if path.name in configs else current
            _check_same_run(path, out_dir, _recorded_run(header), expected, ignored)


def evaluate(policy, suite: str, out_dir: str | Path, seed: int = 0, run_id: str = "eval",
             progress: Callable[[int, int], None] | None = None,
             ignored_policy_keys: tuple[str, ...] = ()) -> EvalTable:
    """Evaluate ``policy`` (see ``policy.policies``) on every cell of ``suite``; see the module docstring.

    ``ignored_policy_keys``: descriptor keys not compared when reusing a cell (a run's final evaluation ignores
    ``spec``, whose checkpoint path moves with the run folder).

    ``progress(done, total)`` is called with instances finished (cells reused count at once).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cells = suite_cells(suite)
    total = sum(cell.count for cell in cells)
    table = EvalTable(suite, policy.descriptor)
    failures = {name: 0 for name in C.FAILURE_NAMES if name != "none"}
    done = 0
    _check_folder(out_dir, cells, {"policy": policy.descriptor, "seed": seed, "suite": suite}, ignored_policy_keys)
    for cell in cells:
        path = cell_file(out_dir, cell.agents, cell.size)
        episodes = _read_cell(path) if path.exists() else None
        if episodes is not None and len(episodes) == cell.count:
            table.reused_cells += 1
        else:
            items = generate_cell(cell).instances
            answers = policy.answer(items, seed=seed)
            episodes = judge_episodes(items, answers.plans, answers.parse_errors, answers.completions, answers.prompts)
            attach_rewards(episodes, items, answers)
            header = ReplayHeader.new(run_id=run_id, stage=0, split="eval", policy=policy.descriptor,
                                      stage_config=cell.config().to_dict(),
                                      extra={"suite": suite, "agents": cell.agents, "size": cell.size, "seed": seed})
            with ReplayWriter(path, header) as writer:
                writer.write_all(episodes)
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


def attach_rewards(episodes, items, answers) -> None:
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
