"""The record of one engineer decision: what it was shown, what it answered, what was kept, and why.

Every engineer returns an :class:`EngineerDecision`, accepted or not. A rejected decision carries the previous
config as its ``config`` (the fallback: keep what works) and the reason in ``reason``; ``to_dict()`` is the
JSON-able record the curriculum stores per stage.

A decision may also name explicit training instances for the next stage (``instances``: the ``replay`` engineer's
replayed instances, the ``failures`` engineer's boards cut from failed episodes). A stage config describes a
distribution and cannot hold them, so the stage loop takes them from the decision: the next stage trains on them
plus ``samples - len(instances)`` generated ones (``curriculum.loop.curriculum``). They are recorded whole, as
``LabelledInstance.to_dict`` documents, under ``"instances"`` (absent when there are none, as in every record
written before the field existed); :func:`decision_instances` reads them back.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, overload

from simulator.documents import check_value, read_key
from simulator.config import StageConfig, diff_configs
from simulator.errors import ConfigError
from simulator.generator import LabelledInstance

_MAX_PLAIN_DEPTH = 32  # deeper structures in a recorded proposal are shown as a marker, not walked
_MAX_PLAIN_ITEMS = 256  # entries per mapping or list kept in a recorded proposal
_MAX_PLAIN_TEXT = 2000  # characters per string kept in a recorded proposal


def plain(value: Any, depth: int = 0, breadth: int | None = _MAX_PLAIN_ITEMS) -> Any:
    """``value`` as strict JSON data (what a record may hold), bounded in depth, breadth (entries per mapping or
    list; None: unbounded) and string length.

    A proposal parsed from YAML may hold dates, bytes, sets, NaN or infinite floats, or integers beyond any
    float; they are written as strings (``"nan"``, ``"inf"``, ``repr`` of the rest) so the record stays valid
    JSON and says what the engineer wrote.
    """
    if depth > _MAX_PLAIN_DEPTH:
        return "<nested too deep>"
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if abs(value) < 2**63 else repr(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, str):
        return value if len(value) <= _MAX_PLAIN_TEXT else value[:_MAX_PLAIN_TEXT] + "...(cut)"
    if isinstance(value, Mapping):
        items = list(value.items())[:breadth]
        return {str(key): plain(entry, depth + 1, breadth) for key, entry in items}
    if isinstance(value, (list, tuple)):
        return [plain(entry, depth + 1, breadth) for entry in list(value)[:breadth]]
    shown = repr(value)
    return shown if len(shown) <= _MAX_PLAIN_TEXT else shown[:_MAX_PLAIN_TEXT] + "...(cut)"


@dataclass
class EngineerDecision:
    """One engineer's decision on the next stage's config.

    Invariant: ``config`` is always a valid StageConfig; when ``accepted`` is False it equals ``previous``.
    """

    engineer: str
    """The engineer's name (its spec, e.g. ``"rule"`` or ``"llm:hf:runs/x/checkpoint"``)."""
    accepted: bool
    """True when the engineer's proposal (possibly repaired) became the config; False for the fallback."""
    reason: str
    """Why: ``"accepted"``, ``"accepted after repairs"``, or what made the proposal unusable."""
    raw_answer: str | None
    """The engineer's raw text (cut at the answer limit), or None for engineers that write no text."""
    proposal: dict | None
    """The document parsed from the answer (before repairs), or the config the engineer built; None if none."""
    repairs: list[str]
    """Each repair applied to the proposal, in words (e.g. ``"data ratios summed to 3; divided by 3"``)."""
    config: StageConfig
    """The next stage's config: the (repaired) proposal, or ``previous`` when rejected."""
    previous: StageConfig
    """The config of the stage the evidence came from."""
    diff: list[str]
    """``diff_configs(previous, config)``: one line per change; empty when nothing changed."""
    rationale: str
    """The engineer's stated reasons (the answer's prose, or the rule engineer's explanation)."""
    context_text: str
    """The context the engineer was shown, as text."""
    seconds: float
    """Wall time of the decision, backend call included."""
    details: dict = field(default_factory=dict)
    """Small extra facts, e.g. ``{"prompt_tokens": .., "completion_tokens": .., "answer_chars": ..}``, and a
    stateful engineer's ``state``. The record bounds every entry's breadth except the state's: the state is built
    by the engineer's own code, and cutting it would corrupt it (``replay``'s buffer holds hundreds of instances)."""
    instances: tuple[LabelledInstance, ...] = ()
    """Certified instances the next stage trains on besides the ones its config generates (see the module
    docstring); empty for engineers that only write configs."""

    @property
    def outcome(self) -> str:
        """One word for what happened: ``changed`` (the proposal became a different config), ``kept`` (the
        proposal was taken and equals the previous config) or ``rejected`` (unusable: the previous config is
        kept as the fallback)."""
        return decision_outcome(self.accepted, self.diff)

    def summary(self) -> DecisionSummary:
        """What a stage record keeps of this decision."""
        return DecisionSummary(outcome=self.outcome, engineer=self.engineer, accepted=self.accepted,
                               reason=self.reason, diff=tuple(self.diff), repairs=tuple(self.repairs))

    def to_dict(self) -> dict:
        """The JSON-able record (strict JSON: no NaN; configs as canonical documents)."""
        return {
            "engineer": self.engineer,
            "outcome": self.outcome,
            "accepted": self.accepted,
            "reason": self.reason,
            "raw_answer": self.raw_answer,
            "proposal": plain(self.proposal) if self.proposal is not None else None,
            "repairs": list(self.repairs),
            "config": self.config.to_dict(),
            "previous": self.previous.to_dict(),
            "diff": list(self.diff),
            "rationale": self.rationale,
            "context_text": self.context_text,
            "seconds": self.seconds,
            "details": {str(key): plain(value, 1, None if key == "state" else _MAX_PLAIN_ITEMS)
                        for key, value in list(self.details.items())[:_MAX_PLAIN_ITEMS]},
            **({"instances": [item.to_dict() for item in self.instances]} if self.instances else {}),
        }

    @classmethod
    def from_dict(cls, document: Any, where: str = "decision") -> "EngineerDecision":
        """Read :meth:`to_dict`'s record back (``to_dict(from_dict(d)) == d`` for a record it wrote). Only
        ``config`` is required: a record written before a field existed reads it as empty (``previous``: the
        config itself, ``diff``: recomputed, ``accepted``: from ``outcome``). A field of the wrong type raises
        ConfigError naming ``where.<field>``."""
        config = read_config(document, "config", where)
        previous = read_config(document, "previous", where, optional=True) or config
        assert config is not None and previous is not None  # "config" is required: read_key raised without it
        accepted = read_key(document, "accepted", where, "bool", optional=True)
        if accepted is None:
            accepted = read_key(document, "outcome", where, "str", optional=True) != "rejected"
        recorded = read_key(document, "diff", where, "list", optional=True) is not None
        diff = list(_lines(document, "diff", where)) if recorded else diff_configs(previous, config)
        repairs = _lines(document, "repairs", where)
        return cls(
            engineer=read_key(document, "engineer", where, "str", optional=True) or "",
            accepted=accepted,
            reason=read_key(document, "reason", where, "str", optional=True) or "",
            raw_answer=read_key(document, "raw_answer", where, "str", optional=True),
            proposal=document.get("proposal"),
            repairs=list(repairs),
            config=config,
            previous=previous,
            diff=diff,
            rationale=read_key(document, "rationale", where, "str", optional=True) or "",
            context_text=read_key(document, "context_text", where, "str", optional=True) or "",
            seconds=float(read_key(document, "seconds", where, "number", optional=True) or 0.0),
            details=dict(read_key(document, "details", where, "mapping", optional=True) or {}),
            instances=tuple(decision_instances(document, where)),
        )

    def render(self, show_context: bool = False) -> str:
        """Plain text for people: the proposal, the repairs, the diff and the decision."""
        lines = [f"engineer: {self.engineer}"]
        if show_context:
            lines += ["context:", self.context_text.rstrip(), ""]
        if self.raw_answer is not None:
            answer = self.raw_answer.strip()
            lines += ["answer:", answer if len(answer) <= 4000 else answer[:4000] + "\n... (cut for display)"]
        if self.proposal is not None:
            shown = json.dumps(plain(self.proposal))
            lines += ["proposal:", shown if len(shown) <= 4000 else shown[:4000] + " ... (cut for display)"]
        if self.rationale:
            lines += ["rationale:", self.rationale.strip()]
        if self.repairs:
            lines += ["repairs:"] + [f"  - {repair}" for repair in self.repairs]
        lines += ["diff:"] + ([f"  {change}" for change in self.diff] or ["  (no change)"])
        if self.instances:
            lines.append(f"instances: {len(self.instances)} for the next stage to train on besides its config's")
        verdict = {"changed": "changed the config", "kept": "kept the config (nothing to change)",
                   "rejected": "rejected, kept the previous config"}[self.outcome]
        lines.append(f"decision: {verdict} ({self.reason}) in {self.seconds:.2f} s")
        return "\n".join(lines) + "\n"


DECISION_OUTCOMES = ("changed", "kept", "rejected")


@dataclass(frozen=True)
class DecisionSummary:
    """What a stage record keeps of an engineer's decision (:meth:`EngineerDecision.summary`): one outcome and what
    it changed; the whole decision stays in the stage's ``decision.json``."""

    outcome: str
    """``changed`` (a new config), ``kept`` (nothing to change) or ``rejected`` (its proposal failed; the
    previous config stands)."""
    engineer: str | None = None
    accepted: bool | None = None
    reason: str = ""
    diff: tuple[str, ...] = ()
    """One readable line per changed field (``sizes.6.data_ratio: 0.25 -> 0.14``)."""
    repairs: tuple[str, ...] = ()
    """What was repaired in the engineer's proposal to make it a valid config."""

    def __post_init__(self) -> None:
        if self.outcome not in DECISION_OUTCOMES:
            raise ConfigError("decision.outcome", self.outcome, f"one of {', '.join(DECISION_OUTCOMES)}")

    def to_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "engineer": self.engineer, "accepted": self.accepted, "reason": self.reason,
                "diff": list(self.diff), "repairs": list(self.repairs)}

    @classmethod
    def from_dict(cls, document: Any, where: str = "decision") -> "DecisionSummary":
        """From :meth:`to_dict`'s document or a whole ``decision.json`` (the fields it shares); a record written
        before ``outcome`` existed reads it from ``accepted`` and ``diff``. A field of the wrong type raises
        ConfigError naming ``where.<field>``."""
        accepted = read_key(document, "accepted", where, "bool", optional=True)
        diff, repairs = (_lines(document, name, where) for name in ("diff", "repairs"))
        outcome = read_key(document, "outcome", where, "str", optional=True) or decision_outcome(accepted, diff)
        if outcome not in DECISION_OUTCOMES:
            raise ConfigError(f"{where}.outcome", outcome, f"one of {', '.join(DECISION_OUTCOMES)}")
        return cls(outcome=outcome, engineer=read_key(document, "engineer", where, "str", optional=True),
                   accepted=accepted, reason=read_key(document, "reason", where, "str", optional=True) or "",
                   diff=diff, repairs=repairs)


def _lines(document: Any, name: str, where: str) -> tuple[str, ...]:
    """``document[name]``, a list of text lines (empty when missing or null)."""
    lines = read_key(document, name, where, "list", optional=True) or []
    for index, line in enumerate(lines):
        check_value(line, f"{where}.{name}[{index}]", "str")
    return tuple(lines)


def decision_outcome(accepted: bool | None, diff: Sequence[str]) -> str:
    """``changed``, ``kept`` or ``rejected`` (see :attr:`EngineerDecision.outcome`), also for records written
    before the field existed (from their ``accepted`` and ``diff``)."""
    if not accepted:
        return "rejected"
    return "changed" if diff else "kept"


def make_decision(
    engineer: str,
    previous: StageConfig,
    config: StageConfig | None,
    reason: str,
    *,
    raw_answer: str | None = None,
    proposal: dict | None = None,
    repairs: list[str] | None = None,
    rationale: str = "",
    context_text: str = "",
    seconds: float = 0.0,
    details: dict | None = None,
    instances: tuple[LabelledInstance, ...] | list[LabelledInstance] = (),
) -> EngineerDecision:
    """A decision: accepted with ``config``, or (``config`` None) the fallback that keeps ``previous`` (and no
    ``instances``: a rejected decision changes nothing)."""
    accepted = config is not None
    final = config if config is not None else previous
    return EngineerDecision(
        engineer=engineer,
        accepted=accepted,
        reason=reason,
        raw_answer=raw_answer,
        proposal=proposal,
        repairs=list(repairs or []),
        config=final,
        previous=previous,
        diff=diff_configs(previous, final),
        rationale=rationale,
        context_text=context_text,
        seconds=seconds,
        details=dict(details or {}),
        instances=tuple(instances) if accepted else (),
    )


@overload
def read_config(document: Any, key: str, where: str, optional: Literal[False] = False) -> StageConfig: ...
@overload
def read_config(document: Any, key: str, where: str, optional: bool) -> StageConfig | None: ...
def read_config(document: Any, key: str, where: str, optional: bool = False) -> StageConfig | None:
    """``document[key]``, a stage config document, as a StageConfig (None when ``optional`` and absent); its
    errors name their field under ``where.key``."""
    value = read_key(document, key, where, "mapping", optional=optional)
    if value is None:
        return None
    try:
        return StageConfig.from_dict(value)
    except ConfigError as error:
        raise ConfigError(f"{where}.{key}.{error.field}", error.value, error.allowed) from None


class Decider:
    """The decisions of one ``propose`` call, built alike for every rule-based engineer: the call is timed from
    the decider's making, ``notes`` collects the rationale's lines, and a stateful engineer's ``state()`` goes into
    the decision's details (the stage loop hands it back through ``load_state``)."""

    def __init__(self, engineer: Any, context_text: str, config: StageConfig) -> None:
        self.engineer, self.context_text, self.config = engineer, context_text, config
        self.notes: list[str] = []
        """The rationale, a line each."""
        self.started = time.perf_counter()

    def decide(self, proposal: StageConfig | None, reason: str,
               instances: tuple[LabelledInstance, ...] | list[LabelledInstance] = ()) -> EngineerDecision:
        """The decision for ``proposal`` (None: the fallback that keeps the config), with the notes so far."""
        state = getattr(self.engineer, "state", None)
        return make_decision(self.engineer.name, self.config, proposal, reason,
                             proposal=proposal.to_dict() if proposal is not None else None,
                             rationale="\n".join(self.notes), context_text=self.context_text,
                             seconds=time.perf_counter() - self.started,
                             details={"state": state()} if callable(state) else None, instances=instances)

    def keep(self, note: str, reason: str = "nothing to change") -> EngineerDecision:
        """The decision that keeps the config, ``note`` added to the rationale and the reason ``NAME: reason``."""
        self.notes.append(note)
        return self.decide(self.config, f"{self.engineer.name}: {reason}")

    def without_behavior(self) -> EngineerDecision:
        """The decision of an engineer that reads the behavior section when the context has none."""
        return self.keep("kept the config: no evidence of behavior",
                         "no behavior section in the context, nothing to act on")


def decision_instances(document: Any, where: str = "decision") -> list[LabelledInstance]:
    """The ``instances`` of a decision record (:meth:`EngineerDecision.to_dict`), read back; [] when it has none.
    A malformed entry raises ConfigError naming ``where.instances[i]``."""
    entries = document.get("instances") if isinstance(document, Mapping) else None
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise ConfigError(f"{where}.instances", type(entries).__name__, "a list of instance records")
    out = []
    for index, entry in enumerate(entries):
        try:
            out.append(LabelledInstance.from_dict(entry))
        except ConfigError as error:
            raise ConfigError(f"{where}.instances[{index}]", error.value, error.allowed, error.field) from None
    return out


__all__ = ["DECISION_OUTCOMES", "Decider", "DecisionSummary", "EngineerDecision", "decision_instances", "decision_outcome",
           "make_decision", "plain"]
