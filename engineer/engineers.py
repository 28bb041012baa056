"""Engineers, looked up by name: ``fixed``, ``random``, ``rule``, ``learnability``, ``bandit``, ``mutate``,
``progress``, ``gap``, ``window``, ``target``, ``replay``, ``failures``, ``replay-decisions``, ``first-only``,
``llm:BACKEND_SPEC``.

Every engineer has a ``name`` and ``propose(context, config, seed=0) -> EngineerDecision``; the decision's
``config`` is always a valid StageConfig (the previous one when a proposal is rejected). ``make_engineer(spec,
**options)`` builds one from a spec; options are the engineer's fields (e.g. ``make_engineer("rule", low=0.1)``,
``make_engineer("llm:hf:PATH", timeout_s=60, temperature=0.0)``); an unknown spec or option raises ConfigError.

* ``fixed``: never changes the config (the fixed-environment baseline).
* ``random``: samples a valid config (the paper's "GRPO (random)" baseline); see :class:`RandomEngineer`.
* ``rule``: the transparent rule-based engineer of :mod:`engineer.rule`.
* ``learnability``: weights sizes by ``p(1 - p)`` of their success rate (:mod:`engineer.learnability`).
* ``bandit``: a non-stationary bandit over sizes valued by the stage's mean absolute GRPO advantage
  (:mod:`engineer.bandit`); its state is in each decision's ``details`` and continues through ``load_state``.
* ``progress``: weights sizes by their measured learning progress, the change of the log-odds of their sampled
  valid rate between sampling rounds and stages (:mod:`engineer.progress`); stateful like ``bandit``.
* ``gap``: while the policy fails the instances that need a wait, the smallest size becomes a lesson in waiting on
  open maps, or (``remedy="drop"``) those instances leave the training; ``weigh="yield"`` also shares the data by
  1 / each size's sampled valid rate (:mod:`engineer.gap`).
* ``mutate``: sizes in the learnable band get one seeded small edit: more holes, more waits, or weight to the
  next side up (:mod:`engineer.mutate`).
* ``window``: each size trains inside a window of optimal makespans whose top rises when the evidence solves the
  top level 90% of the time over 8+ episodes, the lower bound following (RLVE; :mod:`engineer.window`).
* ``target``: each size's target makespan moves by ``eta * tanh(alpha * (R - beta))`` with the stage's sampled valid
  rate ``R``, and the next stage trains on the makespans nearest it (AdaRFT; :mod:`engineer.target`); stateful.
* ``replay``: the next stage replays instances it trained on, drawn from a buffer by learning potential and
  staleness (PLR; :mod:`engineer.replay`); stateful, and hands the stage loop explicit instances.
* ``failures``: the next stage also trains on the boards where the evidence's failed plans broke, re-certified by
  the solver, never a test or evidence instance (MAPF-GPT-DDG; :mod:`engineer.failure_cuts`).
* ``replay-decisions``: an open-loop control that writes, at each decision, the config a recorded run of another
  seed wrote at the same one (:mod:`engineer.replay_decisions`).
* ``first-only``: an open-loop control: the ``gap`` engineer makes the run's first decision, every later one keeps
  it (:mod:`engineer.first_only`).
* ``llm:BACKEND_SPEC``: a language model through a policy backend (:mod:`engineer.llm`).

``replay`` and ``failures`` need more than the context: they have ``load_material(StageMaterial)``
(:mod:`engineer.material`), which the stage loop calls before each proposal; the open-loop controls have
``load_position(RunPosition)`` (:mod:`engineer.position`): which decision of the run it is, and a reader of other runs'
records.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from engineer.bandit import BanditEngineer
from engineer.context import EngineerContext
from engineer.decision import EngineerDecision, make_decision
from engineer.failure_cuts import FailuresEngineer
from engineer.first_only import FirstOnlyEngineer
from engineer.gap import GapEngineer
from engineer.learnability import LearnabilityEngineer
from engineer.llm import LLMEngineer
from engineer.lookahead import LookaheadEngineer, Proposals, Trial
from engineer.material import StageMaterial
from engineer.mutate import MutateEngineer
from engineer.options import DeclaredOptions, integer, number, option_names
from engineer.position import RunPosition
from engineer.progress import ProgressEngineer
from engineer.replay import ReplayEngineer
from engineer.replay_decisions import ReplayDecisionsEngineer
from engineer.rule import RuleEngineer, hole_ratio_cap, rounded_shares
from engineer.target import TargetEngineer
from engineer.window import WindowEngineer
from simulator.config import MAX_HOLE_RATIO, MAX_SIZE, MAX_STAGE_AGENTS, MIN_SIZE, SizeSpec, StageConfig
from simulator.documents import is_python_int
from simulator.errors import ConfigError


class Engineer(Protocol):
    name: str

    def propose(self, context: EngineerContext, config: StageConfig, seed: int = 0) -> EngineerDecision: ...


# What an engineer may take from the stage loop besides the evidence, each a method the loop calls before
# ``propose`` when the engineer has it (``isinstance(engineer, Stateful)``, ...).
@runtime_checkable
class Stateful(Protocol):
    """Continues from its previous decision's recorded ``details["state"]`` (None: its first decision)."""

    def load_state(self, state: dict | None) -> None: ...


@runtime_checkable
class TakesTrial(Protocol):
    """Tries candidate configs with the loop's own trainer (``engineer.lookahead.Trial``) before it decides."""

    def load_trial(self, trial: Trial, proposals: Proposals) -> None: ...


@runtime_checkable
class ReadsMaterial(Protocol):
    """Reads the instances the stage trained on and their outcomes (``engineer.material.StageMaterial``)."""

    def load_material(self, material: StageMaterial) -> None: ...


@runtime_checkable
class TakesPosition(Protocol):
    """Decides by where the run is (an open-loop control: ``engineer.position.RunPosition``)."""

    def load_position(self, position: RunPosition) -> None: ...


@dataclass
class FixedEngineer:
    """Never changes the config: every stage trains on the first stage's distribution."""

    name: str = "fixed"

    def propose(self, context: EngineerContext, config: StageConfig, seed: int = 0) -> EngineerDecision:
        return make_decision(
            self.name, config, config, "fixed: the config never changes", proposal=config.to_dict(),
            rationale="the fixed-environment baseline keeps the config", context_text=context.text,
        )


@dataclass
class RandomEngineer(DeclaredOptions):
    """Samples a valid config, ignoring the evidence (the "GRPO (random)" baseline). Same seed, same config.

    It draws 1..``max_sizes`` distinct sides from ``sides``, data ratios from a flat Dirichlet, each hole ratio
    uniformly in [0, ``max_hole_ratio``] (capped so enough cells stay free for the agents) and each wait ratio
    uniformly in [0, 1] (0 with a single agent). ``agents``: None keeps the previous agent range; ``(low, high)``
    draws the count uniformly from ``low..high``. ``samples``, ``seed``, ``slip`` and ``horizon`` are kept.
    Ratios are rounded to 4 decimals.
    """

    sides: tuple[int, ...] = (3, 4, 5, 6, 7, 8, 9, 10)
    """The sides a config's sizes are drawn from (each 3..10)."""
    max_sizes: int = integer(4, 1)
    """Most sizes in one config."""
    max_hole_ratio: float = number(0.5, 0, MAX_HOLE_RATIO)
    """Most hole ratio drawn (capped so that the agents still fit)."""
    agents: tuple[int, int] | None = None
    """None: the previous agent range; a count or ``[low, high]``: the count drawn from ``low..high``."""
    name: str = "random"

    def __post_init__(self) -> None:
        self.sides = tuple(self.sides)
        if not self.sides or any(not is_python_int(s) or not MIN_SIZE <= s <= MAX_SIZE
                                 for s in self.sides):
            raise ConfigError("random.sides", self.sides, f"a non-empty list of sides {MIN_SIZE}..{MAX_SIZE}")
        super().__post_init__()
        if isinstance(self.agents, int) and not isinstance(self.agents, bool):
            self.agents = (self.agents, self.agents)  # one count: every proposal uses it
        if self.agents is not None:
            if not isinstance(self.agents, (list, tuple)):
                raise ConfigError("random.agents", self.agents, f"None, a count, or [low, high] with 1 <= low <= "
                                                                f"high <= {MAX_STAGE_AGENTS}")
            agents = tuple(self.agents)
            if len(agents) != 2 or not all(isinstance(k, int) and 1 <= k <= MAX_STAGE_AGENTS for k in agents) or \
                    agents[0] > agents[1]:
                raise ConfigError("random.agents", self.agents, f"None or [low, high] with 1 <= low <= high <= "
                                                                f"{MAX_STAGE_AGENTS}")
            self.agents = agents

    def propose(self, context: EngineerContext, config: StageConfig, seed: int = 0) -> EngineerDecision:
        started = time.perf_counter()
        rng = np.random.default_rng([seed % (2**63), 0x5EED])
        if self.agents is None:
            agents_min, agents_max = config.agents_min, config.agents_max
        else:
            agents_min = agents_max = int(rng.integers(self.agents[0], self.agents[1] + 1))
        usable = [side for side in self.sides if side * side >= agents_max]
        if not usable:
            return make_decision(
                self.name, config, None, f"rejected: no side in {self.sides} fits {agents_max} agents",
                context_text=context.text, seconds=time.perf_counter() - started,
            )
        count = int(rng.integers(1, min(self.max_sizes, len(usable)) + 1))
        chosen = sorted(int(side) for side in rng.choice(usable, size=count, replace=False))
        shares = rounded_shares(dict(zip(chosen, rng.dirichlet(np.ones(count)).tolist())))
        sizes = {}
        for side in chosen:
            cap = min(self.max_hole_ratio, hole_ratio_cap(side, agents_max))
            hole_ratio = math.floor(float(rng.uniform(0.0, cap)) * 10**4) / 10**4
            wait_ratio = round(float(rng.uniform(0.0, 1.0)), 4) if agents_max >= 2 else 0.0
            sizes[side] = SizeSpec(shares[side], hole_ratio, wait_ratio)
        proposal = dataclasses.replace(config, agents_min=agents_min, agents_max=agents_max, sizes=sizes)
        return make_decision(
            self.name, config, proposal, "random: a sampled config", proposal=proposal.to_dict(),
            rationale=f"sampled with seed {seed}, ignoring the evidence", context_text=context.text,
            seconds=time.perf_counter() - started,
        )


@dataclass(frozen=True)
class EngineerKind:
    """A registry entry: how to build an engineer from options (and, for a kind that takes a target, the part of
    the spec after ``KIND:``)."""

    build: Callable[..., Engineer]
    target: str | None = None
    """None for a plain engineer (its spec is its name); else how the part after ``KIND:`` is written, e.g.
    ``BACKEND_SPEC``."""
    examples: str = ""
    """Example specs, shown in the error for a bad spec."""
    compare: str | None = ""
    """The spec ``train --compare`` runs for it by default: "" for the registry name, None for no default arm."""
    control: bool = False
    """An open-loop control (it decides by the stage, not the evidence): no default arm (``compare`` None), never
    one of the lookahead's candidates, and run only by a run's stage loop (``load_position``)."""

    @property
    def takes_target(self) -> bool:
        return self.target is not None


# The registry: a new engineer is one module and one entry here. The help texts, the config checks' messages,
# ``train --compare``'s default arms and the parametrized tests are derived from it.
ENGINEERS: dict[str, EngineerKind] = {
    "fixed": EngineerKind(FixedEngineer),
    "random": EngineerKind(RandomEngineer),
    "rule": EngineerKind(RuleEngineer),
    "learnability": EngineerKind(LearnabilityEngineer),
    "bandit": EngineerKind(BanditEngineer),
    "mutate": EngineerKind(MutateEngineer),
    "progress": EngineerKind(ProgressEngineer),
    "gap": EngineerKind(GapEngineer),
    "window": EngineerKind(WindowEngineer),
    "target": EngineerKind(TargetEngineer),
    "replay": EngineerKind(ReplayEngineer),
    "failures": EngineerKind(FailuresEngineer),
    # a measurement, not a default arm: it trains every candidate (train --compare --arm lookahead=engineer.spec=lookahead)
    "lookahead": EngineerKind(LookaheadEngineer, compare=None),
    # open-loop controls of an engineer's reading (docs/results/controls/README.md; arms in curriculum.commands.CONTROL_ARMS)
    "replay-decisions": EngineerKind(ReplayDecisionsEngineer, compare=None, control=True),
    "first-only": EngineerKind(FirstOnlyEngineer, compare=None, control=True),
    "llm": EngineerKind(LLMEngineer, "BACKEND_SPEC", "llm:hf:PATH, llm:vllm:PATH, llm:openai:MODEL", "llm:self"),
}


def candidate_engineers() -> list[str]:
    """The registered engineers whose proposals the ``lookahead`` engineer tries: every one that writes configs
    from the evidence only (not ``llm``, not those that hand instances over, not ``lookahead``, not the open-loop
    controls), in registry order."""
    return [name for name, kind in ENGINEERS.items() if not kind.takes_target and name != "lookahead"
            and not kind.control and not (isinstance(kind.build, type) and issubclass(kind.build, ReadsMaterial))]


def proposals(context: EngineerContext, config: StageConfig, seed: int) -> list[tuple[str, StageConfig]]:
    """What each of :func:`candidate_engineers` proposes from ``context`` (a fresh engineer with its default options,
    as on its first stage): ``(name, config)`` in registry order."""
    out = []
    for name in candidate_engineers():
        engineer = make_engineer(name)
        if isinstance(engineer, Stateful):
            engineer.load_state(None)
        out.append((name, engineer.propose(context, config, seed=seed).config))
    return out


def engineer_forms() -> list[str]:
    """Each registered engineer's spec form: ``fixed``, ..., ``llm:BACKEND_SPEC``."""
    return [name if kind.target is None else f"{name}:{kind.target}" for name, kind in ENGINEERS.items()]


def engineer_names(*extra_forms: str) -> str:
    """The registry's spec forms as help and error messages list them, ``extra_forms`` (e.g. ``llm:self``)
    before the last, which is joined by "or": ``fixed, random, ..., failures or llm:BACKEND_SPEC``."""
    forms = engineer_forms()
    forms = forms[:-1] + list(extra_forms) + forms[-1:]
    return f"{', '.join(forms[:-1])} or {forms[-1]}"


def compare_specs() -> tuple[str, ...]:
    """The specs ``train --compare`` runs by default, one per registered engineer, in registry order."""
    return tuple(kind.compare or name for name, kind in ENGINEERS.items() if kind.compare is not None)


def engineer_summary(name: str) -> str:
    """What the registered engineer ``name`` does, in a sentence: its module's first line after "The NAME
    engineer:", or for one defined here its class docstring's first sentence."""
    build = ENGINEERS[name].build
    module = sys.modules[build.__module__]  # the class's module, imported with it
    if module.__name__ != __name__ and module.__doc__:
        first = module.__doc__.strip().splitlines()[0]
        text = first.partition(": ")[2] or first
    else:
        text = (build.__doc__ or "").strip().split(". ")[0].split("\n")[0].rstrip(".") + "."
    text = text.replace("``", "")
    return text[:1].upper() + text[1:]


ENGINEER_FORMS = ", ".join(form if not kind.examples else f"{form} ({kind.examples})"
                           for form, kind in zip(engineer_forms(), ENGINEERS.values()))


def make_engineer(spec: str, **options: Any) -> Engineer:
    """The engineer for ``spec`` (see the module docstring), with ``options`` as its fields."""
    if not isinstance(spec, str):
        raise ConfigError("engineer", spec, ENGINEER_FORMS)
    kind_name, colon, target = spec.strip().partition(":")
    kind = ENGINEERS.get(kind_name)
    if kind is None or (kind.takes_target and not target.strip()) or (not kind.takes_target and colon):
        raise ConfigError("engineer", spec, ENGINEER_FORMS)
    allowed = option_names(kind.build)  # type: ignore[arg-type]  # every build is a dataclass
    for option in options:
        if option not in allowed:
            raise ConfigError(f"{kind_name}.{option}", options[option],
                              f"an option of the {kind_name} engineer: {', '.join(allowed)}")
    return kind.build(target.strip(), **options) if kind.takes_target else kind.build(**options)


__all__ = ["ENGINEERS", "Engineer", "EngineerKind", "FixedEngineer", "RandomEngineer", "candidate_engineers",
           "compare_specs", "engineer_names", "proposals",
           "engineer_summary", "make_engineer"]
