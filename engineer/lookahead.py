"""The lookahead engineer: an engineer with one stage of hindsight, meant as a ceiling for the others.

It is not a rule but a measurement. At each stage boundary it collects candidate configs for the next stage: the
current one (what ``fixed`` keeps) and what every other registered engineer that writes configs proposes from the
same evidence (each a fresh instance with its default options, so a stateful one proposes as on its first stage).
Equal configs are one candidate. The stage loop that owns a trainer (``mapf-lake train``) hands it a *trial*
(:meth:`LookaheadEngineer.load_trial`): train the next stage on a candidate from the current checkpoint, validate it
on the evidence set and return the greedy valid rate. The candidate with the best rate wins (ties: the earlier one,
``fixed``'s first); the decision's ``details["candidates"]`` keeps every candidate's config, who proposed it and its
rate, so a run says which engineers' proposals would have won at which stage. The winner's checkpoint is the next
stage's (the loop copies it instead of training it again), so a run costs about K times a plain one for K distinct
candidates. It never reads the test set: the trial scores on the evidence set, as every engineer's evidence is.

Engineers that hand instances over (``replay``, ``failures``) and the ``llm`` ones are not asked: the trial trains
on configs. Without a trial (a trainer-free curriculum in someone else's training script) it keeps the config and
says why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from engineer.context import EngineerContext
from engineer.decision import Decider, EngineerDecision, read_config
from engineer.options import DeclaredOptions, python_object
from simulator.config import StageConfig
from simulator.documents import check_value, checked_real, read_key
from simulator.errors import ConfigError
from simulator.text import percent


@dataclass(frozen=True)
class Candidate:
    """One candidate of a lookahead decision: its config, the engineers that proposed it (``fixed`` for the
    current config) and its evidence valid rate after the trial stage. A decision's ``details["candidates"]`` holds
    them as :meth:`to_dict` writes them; :func:`decision_candidates` reads them back."""

    config: StageConfig
    proposed_by: tuple[str, ...]
    evidence_valid_rate: float

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config.to_dict(), "proposed_by": list(self.proposed_by),
                "evidence_valid_rate": self.evidence_valid_rate}

    @classmethod
    def from_dict(cls, document: Any, where: str = "candidate") -> "Candidate":
        names = read_key(document, "proposed_by", where, "list")
        for index, name in enumerate(names):
            check_value(name, f"{where}.proposed_by.{index}", "str")
        if not names:
            raise ConfigError(f"{where}.proposed_by", names, "at least one engineer's name")
        config = read_config(document, "config", where)
        rate = checked_real(read_key(document, "evidence_valid_rate", where, "number"),
                            f"{where}.evidence_valid_rate", 0.0, 1.0)
        return cls(config, tuple(names), rate)


def decision_candidates(decision: EngineerDecision, where: str = "decision") -> list[Candidate]:
    """The candidates a lookahead decision tried, in the order tried (``fixed``'s first); empty for a decision
    that tried none (the run's last stage, another engineer's decision)."""
    rows = decision.details.get("candidates")
    if rows is None:
        return []
    check_value(rows, f"{where}.details.candidates", "list")
    return [Candidate.from_dict(row, f"{where}.details.candidates.{index}") for index, row in enumerate(rows)]


def best_candidate(candidates: list[Candidate]) -> Candidate:
    """The winner: the first candidate with the best evidence rate (``max`` keeps the first of equals, so a tie
    keeps ``fixed``'s config, which is tried first)."""
    return max(candidates, key=lambda row: row.evidence_valid_rate)


Trial = Callable[[StageConfig], float]
"""Train the next stage on a config from the current checkpoint and return its evidence valid rate."""
Proposals = Callable[[EngineerContext, StageConfig, int], list[tuple[str, StageConfig]]]
"""Every candidate engineer's ``(name, proposed config)`` from one context (``engineer.engineers.proposals``)."""


@dataclass
class LookaheadEngineer(DeclaredOptions):
    """See the module docstring."""

    name: str = "lookahead"
    trial: Any = python_object()
    """The stage loop's trial (:data:`Trial`); None: no trainer to try candidates with."""
    proposals: Any = python_object()
    """Who proposes the candidates (:data:`Proposals`), handed over with the trial."""

    def load_trial(self, trial: Trial, proposals: Proposals) -> None:
        self.trial, self.proposals = trial, proposals

    def candidates(self, context: EngineerContext, config: StageConfig,
                   seed: int) -> list[tuple[StageConfig, list[str]]]:
        """The distinct candidate configs, each with the engineers that proposed it, ``fixed``'s first."""
        found: list[tuple[StageConfig, list[str]]] = [(config, ["fixed"])]
        for name, proposed in self.proposals(context, config, seed):
            if name == "fixed":
                continue
            for known, names in found:
                if known == proposed:
                    names.append(name)
                    break
            else:
                found.append((proposed, [name]))
        return found

    def propose(self, context: EngineerContext, config: StageConfig, seed: int = 0) -> EngineerDecision:
        decider = Decider(self, context.text, config)
        if self.trial is None or self.proposals is None:
            return decider.keep("no trial stage to run: after the run's last stage, or without a trainer (only "
                                "mapf-lake train's loop gives the lookahead one)", "no trial: kept the config")
        rows: list[Candidate] = []
        for candidate, names in self.candidates(context, config, seed):
            rate = float(self.trial(candidate))
            rows.append(Candidate(candidate, tuple(names), rate))
            decider.notes.append(f"{', '.join(names)}: evidence valid {percent(rate)} after a trial stage")
        best = best_candidate(rows)  # fixed's config is always a candidate
        decision = decider.decide(best.config, f"lookahead: the best of {len(rows)} candidates "
                                               f"({', '.join(best.proposed_by)}, evidence valid "
                                               f"{percent(best.evidence_valid_rate)})")
        return replace(decision, details={**decision.details, "candidates": [row.to_dict() for row in rows]})


__all__ = ["Candidate", "LookaheadEngineer", "Proposals", "Trial", "best_candidate", "decision_candidates"]
