"""The replay-decisions engineer: writes, at each decision, the config a recorded run of another seed wrote at the same one.

An open-loop control (docs/results/controls/README.md): with ``source`` naming ``band``'s runs (``gap`` with
``remedy="drop"``, ``lengths="frontier"`` and ``engineer.plan_first``), a run gets ``band``'s kind of decisions, made
by the same recipe at the same stages, but read from another seed's evidence, not its own. If it trains as well as
``band``, the gain is the recipe's; if ``band`` leads, reading its own evidence adds that much.

* **Where.** ``source`` is the source run's folder with ``{seed}`` where its seed goes; a relative path lies beside
  this run's own folder (in its ``output_dir``), so the default, ``small-gap-band-s{seed}``, names the ``gap-band``
  arm's runs of ``mapf-lake train --preset small --compare --seeds N``.
* **Which seed.** ``pairing="swap"``: the run of seed ``s`` reads the source run of seed ``s + 1`` when ``s`` is odd and
  of ``s - 1`` when ``s`` is even (601 and 602 read each other, 603 and 604, ...: any run of an even number of seeds
  from an odd one is closed under it). ``pairing="same"``: its own seed's (a check: on one machine the replay then
  trains exactly what the source trained).
* **What.** At the plan before stage 1 (``engineer.plan_first``) the source's plan (``warm_start/decision.json``, or
  ``untrained/`` without a warm start), after stage ``s`` the source's ``stage-SS/decision.json``: its ``config``,
  the seed set to this stage's (the stage loop sets each stage's training seed anyway), so the next stage trains on
  what the source's did. The reason names the file; the rationale says whether the source's stage had trained on the
  same config as this run's (it has unless a replayed config fell back here).

The stage loop reads the source record (:meth:`load_position`, :mod:`engineer.position`) through its checked readers:
no run folder there, a run of another seed or other settings (anything but its place, arm, seed, stage count and
engineer; its ``plan_first`` must match), no decision at that stage yet (the source arm must get there first) or a
damaged record stops the run with one ConfigError line naming the file; nothing falls back to keeping the config. A
source config this run's generator cannot fill is the stage loop's usual fallback (kept, with the reason recorded).
The engineer has no state: a resumed run reads its decisions back. Outside a run there is no source to read, and
``propose`` raises ConfigError.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, replace
from typing import Any

from engineer.context import EngineerContext
from engineer.decision import Decider, EngineerDecision
from engineer.options import DeclaredOptions, choice, python_object
from engineer.position import RunPosition
from simulator.config import StageConfig
from simulator.errors import ConfigError

PAIRINGS = ("swap", "same")
MAX_SOURCE_CHARS = 1000
_SOURCE_ALLOWED = (f"a run folder path of at most {MAX_SOURCE_CHARS} characters with {{seed}} where the source run's "
                   "seed goes (and no other {field}), e.g. small-gap-band-s{seed}")


def source_seed(seed: int, pairing: str) -> int:
    """The seed whose recorded run the run of seed ``seed`` replays: see the module docstring."""
    if pairing == "same":
        return seed
    return seed + 1 if seed % 2 else seed - 1


def _template_fields(text: str) -> list[str] | None:
    """The field names of the format string ``text``; None when it is not one (an unmatched brace)."""
    try:
        return [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]
    except ValueError:
        return None


@dataclass
class ReplayDecisionsEngineer(DeclaredOptions):
    """See the module docstring. Options: ``make_engineer("replay-decisions", source="small-gap-band-s{seed}",
    pairing="swap")``."""

    source: str = "small-gap-band-s{seed}"
    """The source run's folder, ``{seed}`` where its seed goes; relative: beside this run's folder (its output_dir)."""
    pairing: str = choice("swap", PAIRINGS)
    """Whose run seed ``s`` replays: ``swap`` (``s + 1`` for odd ``s``, ``s - 1`` for even) or ``same`` (its own)."""
    name: str = "replay-decisions"
    replayed: Any = python_object()
    """The record this decision replays, ``(file, decision)``, read when the stage loop hands the position over."""

    def __post_init__(self) -> None:
        super().__post_init__()
        fields = _template_fields(self.source) if isinstance(self.source, str) else None
        ok = fields is not None and set(fields) == {"seed"} and len(self.source) <= MAX_SOURCE_CHARS
        if ok:
            try:
                ok = bool(self.source.format(seed=1).strip())
            except (ValueError, IndexError, KeyError):
                ok = False
        if not ok:
            raise ConfigError(f"{self.name}.source", self.source, _SOURCE_ALLOWED)

    def source_folder(self, seed: int) -> str:
        """The source run's folder for the run of seed ``seed``, as ``source`` writes it."""
        return self.source.format(seed=source_seed(seed, self.pairing))

    def load_position(self, position: RunPosition) -> None:
        """Read the record this decision replays (a ConfigError stops the run: see the module docstring)."""
        paired = source_seed(position.run_seed, self.pairing)
        if paired < 0:
            raise ConfigError(f"{self.name}.pairing", self.pairing, f"a pairing that gives seed {position.run_seed} a "
                              f"source seed >= 0 (swap pairs an odd seed with the next one: start the seeds at an odd one)")
        self.replayed = position.recorded(self.source_folder(position.run_seed), paired, position.stage)

    def propose(self, context: EngineerContext, config: StageConfig, seed: int = 0) -> EngineerDecision:
        if self.replayed is None:
            raise ConfigError(self.name, "no source record", "a decision inside a run (mapf-lake train or a "
                              "Curriculum), whose stage loop reads the source run's record at the same stage")
        path, recorded = self.replayed
        decider = Decider(self, context.text, config)
        same = replace(recorded.previous, seed=config.seed) == config
        decider.notes += [
            f"an open-loop control: the config {recorded.engineer or 'the engineer'} recorded in {path} "
            f"({recorded.outcome}: {recorded.reason}); this run's evidence is not read",
            "the source's stage trained on this run's config" if same else
            "the source's stage trained on another config than this run's (a replayed config fell back here)",
        ]
        proposal = replace(recorded.config, seed=config.seed)  # the stage loop seeds each stage itself
        return decider.decide(proposal, f"{self.name}: the config of {path}")


__all__ = ["PAIRINGS", "ReplayDecisionsEngineer", "source_seed"]
