"""The failures engineer: new training instances cut from the evidence set's failed episodes.

After MAPF-GPT-DDG (Andreychuk, Yakovlev, Panov and Skrynnik, 2025, "Advancing Learnable Multi-Agent Pathfinding
Solvers with Active Fine-Tuning"): run the current policy, find the state where its solution degrades, run the
expert solver from that state and train on what the expert does there (delta data generation). Our episodes are
whole joint plans, and a failed one has a point where the plan breaks: a step whose move is illegal, falls into a
hole or collides, or the end of a plan that leaves agents off their goals. The board there is the state to learn
from:

* a step failure at step ``t`` (1..T): the agents' positions before that step (``positions[t - 1]``), the board the
  failing move was chosen on;
* ``goal_not_reached``: the positions where the plan ended (``positions[T]``);
* parse errors (no board) and valid episodes are skipped.

Each board becomes an instance: the same map and goals, the agents' positions there as starts, certified by the
optimal solver and labelled as the generator labels its own (:func:`simulator.generator.label_instance`). Skipped
are boards of a size the config does not train on or with an agent count outside its range, boards where every
agent already stands on its goal, unsolvable boards and those over the solver's budget, duplicates, and any whose
content is protected (``StageMaterial.protected``: the run's test and evidence instances; a board cut before the
first step is the evidence instance itself).

At most ``round(share * samples)`` instances (and ``samples - 1``): the failed episodes are taken in a seeded order
(the stage's seed) until that many are certified. They are the decision's ``instances``: the next stage trains on
them plus ``samples - n`` generated from the config (``curriculum.loop.curriculum``), which this engineer keeps as it is. Each
decision cuts from the latest evidence only; nothing carries over (no state).

The boards come from the evidence set the engineers read, so after a stage trained on them that set is less
independent of training than under the other engineers: the instances differ by content (the test set's protection
is unchanged), but the maps and goals are the evidence's. Without material (``mapf-lake engineer`` on replays alone)
nothing is cut.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np

from engineer.context import EngineerContext
from engineer.decision import Decider, EngineerDecision
from engineer.material import ReadsMaterial
from engineer.options import DeclaredOptions, number
from replays.types import Episode
from simulator import constants as C
from simulator.config import StageConfig
from simulator.errors import ConfigError
from simulator.generator import LabelledInstance, label_instance
from simulator.text import counted
from simulator.types import Instance

_SHOWN = 5  # cut instances described one by one in the rationale; the rest are counted


def failing_board(episode: Episode) -> tuple[Instance, int] | None:
    """The board a failed episode broke on and its step (the positions after that many steps), or None for a valid
    episode, a parse error, or a failing step that does not fit the recorded trace."""
    outcome = episode.outcome
    if outcome.valid or outcome.failure in (C.NO_FAILURE, C.PARSE_ERROR):
        return None
    positions = np.asarray(episode.positions)
    steps = len(positions) - 1
    if outcome.failure == C.GOAL_NOT_REACHED:
        step = steps
    elif 1 <= outcome.fail_step <= steps:
        step = outcome.fail_step - 1
    else:
        return None
    try:
        return Instance(episode.instance.grid, positions[step], episode.instance.goals), step
    except ConfigError:  # a damaged trace (two agents on a cell, one in a hole): no board to learn from
        return None


@dataclass
class FailuresEngineer(ReadsMaterial, DeclaredOptions):
    """See the module docstring. Options: ``make_engineer("failures", share=0.25)``."""

    share: float = number(0.25, 0.0, 0.9)
    """Most of the next stage's samples that are cut from failures, in [0, 0.9]."""
    name: str = "failures"

    def propose(self, context: EngineerContext, config: StageConfig, seed: int = 0) -> EngineerDecision:
        """Cut, certify and pick the failing boards (see the module docstring)."""
        decider = Decider(self, context.text, config)
        notes = decider.notes
        cut: list[LabelledInstance] = []

        def decide(reason: str) -> EngineerDecision:
            return decider.decide(config, reason, cut)

        if self.material is None:
            notes.append("no stage material (the stage loop hands over the evidence's episodes): nothing to cut")
            return decide("failures: nothing to cut")
        wanted = min(int(math.floor(self.share * config.samples + 0.5)), config.samples - 1)
        failed = [episode for episode in self.material.evidence if not episode.outcome.valid]
        if wanted <= 0 or not failed:
            notes.append(f"no failed episode among {len(self.material.evidence)} of the evidence" if not failed
                         else f"share {self.share:g} of {config.samples} samples is 0")
            return decide("failures: nothing to cut")
        order = np.random.default_rng([seed % (2**63), 0xDD6]).permutation(len(failed))
        protected, taken = self.material.protected, set()
        skipped: Counter[str] = Counter()
        shown: list[str] = []
        sizes, agents = set(config.used_sizes()), set(config.agent_counts())
        for position in order.tolist():
            if len(cut) >= wanted:
                break
            episode = failed[position]
            found = failing_board(episode)
            if found is None:
                skipped["no board (parse error or damaged trace)"] += 1
                continue
            board, step = found
            side = int(episode.labels.size) if episode.labels is not None else max(board.height, board.width)
            key = board.content_key()
            if side not in sizes or board.n_agents not in agents:
                skipped["a size or agent count the config does not train on"] += 1
            elif np.array_equal(board.starts, board.goals):
                skipped["every agent already on its goal"] += 1
            elif key in protected:
                skipped["protected (a test or evidence instance)"] += 1
            elif key in taken:
                skipped["the same board twice"] += 1
            else:
                labelled, status, _ = label_instance(board, size=side, seed=0, index=len(cut))
                if labelled is None:
                    skipped[f"solver: {status}"] += 1
                    continue
                taken.add(key)
                cut.append(labelled)
                if len(shown) < _SHOWN:
                    shown.append(f"  {side}x{side}, {C.FAILURE_NAMES[episode.outcome.failure]}: the board after "
                                 f"{counted(step, 'step')}, {counted(board.n_agents, 'agent')}, optimal makespan "
                                 f"{labelled.optimal_makespan}")
        kinds = Counter(C.FAILURE_NAMES[episode.outcome.failure] for episode in failed)
        notes.append(f"{len(failed)} of {len(self.material.evidence)} evidence episodes failed ("
                     + ", ".join(f"{name} {count}" for name, count in kinds.most_common()) + f"); cut and certified "
                     f"{len(cut)} boards (at most {wanted}: share {self.share:g} of {config.samples} samples)")
        if skipped:
            notes.append("skipped: " + ", ".join(f"{reason} {count}" for reason, count in skipped.most_common()))
        notes += shown
        if len(cut) > len(shown):
            notes.append(f"  ... and {len(cut) - len(shown)} more")
        return decide(f"failures: {counted(len(cut), 'instance')} cut from failed episodes" if cut else "failures: nothing to cut")


__all__ = ["FailuresEngineer", "failing_board"]
