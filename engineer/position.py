"""Where in a run a decision is asked for: what the stage loop hands an engineer that decides by the stage rather than by
the evidence (the open-loop controls, :mod:`engineer.replay_decisions` and :mod:`engineer.first_only`).

An engineer with ``load_position(position)`` gets a :class:`RunPosition` before each ``propose`` call of a run
(:meth:`curriculum.loop.curriculum.Curriculum.decide`); a ConfigError it raises there stops the run with one line
(a missing or foreign source record), where one raised in ``propose`` would only keep the config. Outside a run
(``mapf-lake engineer``, the lookahead's candidates) nothing hands a position over, and those engineers say so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engineer.decision import EngineerDecision

RecordedDecision = Callable[[str, int, int], tuple[str, EngineerDecision]]
"""``recorded(folder, seed, stage)``: the file and the decision the run in ``folder`` (a relative path lies beside
this run's own folder) recorded after ``stage`` (0: its plan before stage 1). The run must be of seed ``seed`` and of
this run's settings apart from its place, arm, seed, stage count and engineer (spec, options, context; ``plan_first``
must match); anything else (no run there, another seed or setting, no decision at that stage, a damaged record)
raises ConfigError naming the file."""


@dataclass(frozen=True)
class RunPosition:
    """One decision's place in its run."""

    stage: int
    """0: the plan before stage 1 (``engineer.plan_first``); ``s``: the decision after stage ``s``."""
    run_seed: int
    """The run's seed (``RunConfig.seed``)."""
    plan_first: bool
    """Whether the run's first decision is the plan before stage 1 (else the one after stage 1)."""
    recorded: RecordedDecision
    """Reads another run's recorded decisions (see :data:`RecordedDecision`)."""

    @property
    def first(self) -> bool:
        """Whether this is the run's first decision."""
        return self.stage == (0 if self.plan_first else 1)

    @property
    def when(self) -> str:
        """The decision's place in words: ``before stage 1`` or ``after stage 3``."""
        return "before stage 1" if self.stage == 0 else f"after stage {self.stage}"


__all__ = ["RecordedDecision", "RunPosition"]
