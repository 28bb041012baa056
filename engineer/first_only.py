"""The first-only engineer: the gap engineer makes the run's first decision, and every later decision keeps that config.

An open-loop control (docs/results/controls/README.md): it asks whether ``band`` (``gap`` with ``remedy="drop"``,
``lengths="frontier"`` and ``engineer.plan_first``) gains by reading the evidence at every boundary, or by the
config its plan writes before stage 1 alone. With ``engineer.plan_first`` the first decision is the plan before
stage 1, read from the warm start's validation exactly as ``gap`` reads it (a fresh ``gap`` with this engineer's
options, which are ``gap``'s, :class:`~engineer.gap.GapOptions`); without it, the decision after stage 1. Every later
decision keeps the config, whatever the evidence says, so the run trains that one config to the end.

It knows which decision is the first from the stage loop (:meth:`load_position`, :mod:`engineer.position`); outside a
run nothing says so, and ``propose`` raises ConfigError. It has no state: a resumed run reads its decisions back.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from engineer.context import EngineerContext
from engineer.decision import Decider, EngineerDecision
from engineer.gap import GapEngineer, GapOptions
from engineer.options import python_object
from engineer.position import RunPosition
from simulator.config import StageConfig
from simulator.errors import ConfigError


@dataclass
class FirstOnlyEngineer(GapOptions):
    """See the module docstring. Options: the gap engineer's (``make_engineer("first-only", remedy="drop",
    lengths="frontier")``)."""

    name: str = "first-only"
    position: Any = python_object()
    """Where in the run this decision is (:class:`~engineer.position.RunPosition`), handed over by the stage loop."""

    def load_position(self, position: RunPosition) -> None:
        self.position = position

    def propose(self, context: EngineerContext, config: StageConfig, seed: int = 0) -> EngineerDecision:
        if self.position is None:
            raise ConfigError(self.name, "no run position", "a decision inside a run (mapf-lake train or a "
                              "Curriculum): it keeps every config after the run's first decision, so it must know "
                              "which decision is the first")
        if not self.position.first:
            return Decider(self, context.text, config).keep(
                f"{self.position.when}: the config of the run's first decision is kept (an open-loop control: "
                "the evidence is not read)", "keeps the first decision's config")
        gap = GapEngineer(**self.gap_options())
        decision = gap.propose(context, config, seed=seed)
        return replace(decision, engineer=self.name, reason=f"{self.name} ({self.position.when}, the gap engineer "
                       f"decides; later decisions keep it): {decision.reason}")


__all__ = ["FirstOnlyEngineer"]
