"""Paper-style evaluation: a policy over a benchmark suite, one replay file per cell, resumable.

``evaluate(policy, suite, out_dir)`` runs every (agents x size) cell of the suite whose replay file is not in
``out_dir`` yet (a complete file is the record that the cell is done: files are written atomically), and
returns the table: rows = agent counts, columns = map sizes, cells = valid% / optimal%, plus the mean over
sizes, and the failure breakdown over all cells.
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


def evaluate(policy, suite: str, out_dir: str | Path, seed: int = 0, run_id: str = "eval",
             progress: Callable[[int, int], None] | None = None) -> EvalTable:
    """Evaluate ``policy`` (see ``policy.policies``) on every cell of ``suite``; see the module docstring.

    ``progress(done, total)`` is called with instances finished (cells reused count at once).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cells = suite_cells(suite)
    total = sum(cell.count for cell in cells)
    table = EvalTable(suite, policy.descriptor)
    failures = {name: 0 for name in C.FAILURE_NAMES if name != "none"}
    done = 0
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
                                      extra={"suite": suite, "agents": cell.agents, "size": cell.size})
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
