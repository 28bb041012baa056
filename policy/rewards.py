"""Rewards for GRPO, as pure functions with TRL's signature ``(prompts, completions, **columns) -> list[float]``.

The dataset rows carry the instance in three columns (see :func:`reward_columns`): ``instance`` (a compact JSON
string of ``{grid, starts, goals}``), ``optimal_makespan`` and ``horizon``. Every completion is parsed, then all
parsed plans of the batch are judged in one call of the batched plan judge; nothing loops over steps in Python.

Components (each a list of floats, one per completion):

==================  =======  ==================================================================================
``format``          {0, 1}   the answer parsed: every agent exactly once, only actions, within the horizon
``valid``           {0, 1}   the plan is valid: no failure and every agent ends on its goal
``optimal``         {0, 1}   valid and its makespan equals the instance's optimal makespan
``progress``        [0, 1]   share of agents on their goal when judging stopped (0 on a parse error)
``default``         [0, 1.6] ``1.0 * valid + 0.5 * optimal + 0.1 * format``: garbage earns exactly 0
==================  =======  ==================================================================================

Look them up by name in ``REWARDS``; :func:`reward_breakdown` returns every component at once (for replays).
:class:`StageReward` is a weighted sum of components as one reward function that also records each GRPO group's
signal (reward, zero variance, mean absolute advantage) per map size, for the engineer.
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from typing import Any, Callable, Sequence

import numpy as np
from numpy.typing import ArrayLike

from policy.parsing import line_action_spans, parse_plan
from policy.signal import SignalFigures, TrainingSignal
from simulator import constants as C
from simulator.errors import ConfigError
from simulator.judge import is_optimal, judge_plans
from simulator.types import Instance

DEFAULT_WEIGHTS = {"valid": 1.0, "optimal": 0.5, "format": 0.1}
_INSTANCE_CACHE: "OrderedDict[str, Instance]" = OrderedDict()
_CACHE_SIZE = 8192


def reward_columns(instance: Instance, optimal_makespan: int, horizon: int) -> dict[str, Any]:
    """The dataset columns a reward needs for one row."""
    return {
        "instance": json.dumps(instance.to_dict(), separators=(",", ":")),
        "optimal_makespan": int(optimal_makespan),
        "horizon": int(horizon),
    }


def _instance(text: str) -> Instance:
    """Instances repeat ``num_generations`` times in a GRPO batch: decode and validate each once."""
    cached = _INSTANCE_CACHE.get(text)
    if cached is None:
        cached = Instance.from_dict(json.loads(text))
        _INSTANCE_CACHE[text] = cached
        if len(_INSTANCE_CACHE) > _CACHE_SIZE:
            _INSTANCE_CACHE.popitem(last=False)
    return cached


def completion_text(completion: object) -> str:
    """TRL passes strings (standard datasets) or message lists (conversational ones)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    return ""


def components(parsed: ArrayLike, valid: ArrayLike, optimal: ArrayLike, agents_on_goal: ArrayLike,
               n_agents: ArrayLike) -> dict[str, np.ndarray]:
    """The reward components of judged answers, one float array each (the one scoring rule: the GRPO reward and
    the validation episodes' rewards both come from here). ``parsed``, ``valid``, ``optimal``: ``(B,) bool``;
    ``agents_on_goal``, ``n_agents``: ``(B,) int``. ``progress`` is 0 for an answer that did not parse."""
    parsed = np.asarray(parsed, bool)
    out = {"format": parsed.astype(np.float64),
           "valid": (parsed & np.asarray(valid, bool)).astype(np.float64),
           "optimal": (parsed & np.asarray(optimal, bool)).astype(np.float64),
           "progress": np.where(parsed, np.asarray(agents_on_goal, np.float64) / np.maximum(np.asarray(n_agents), 1), 0.0)}
    out["default"] = sum(weight * out[name] for name, weight in DEFAULT_WEIGHTS.items())
    return out


def reward_breakdown(completions: Sequence[Any], instance: Sequence[str], optimal_makespan: Sequence[int],
                     horizon: Sequence[int]) -> dict[str, Any]:
    """Every component for every completion (see the module docstring), as float arrays; also ``failure``
    (``simulator.constants`` failure codes, ``PARSE_ERROR`` for an answer that did not parse), ``makespan`` and
    ``sum_of_costs`` (as judged; -1 without a parsed plan), ``fail_step`` and ``fail_agent`` (as judged; -1 without a
    parsed plan or a failure) and ``parse_error`` (the reasons)."""
    n = len(completions)
    instances = [_instance(text) for text in instance]
    parsed = [parse_plan(completion_text(c), inst.n_agents, int(h)) for c, inst, h in zip(completions, instances, horizon)]
    ok = np.array([p.ok for p in parsed], bool)
    out: dict[str, Any] = {name: np.zeros(n, np.float64) for name in ("format", "valid", "optimal", "progress")}
    out["format"][ok] = 1.0
    out["failure"] = np.full(n, C.PARSE_ERROR, np.int8)  # codes of C.FAILURE_NAMES
    out["makespan"] = np.full(n, -1, np.int32)  # -1: the answer did not parse
    out["sum_of_costs"] = np.full(n, -1, np.int32)
    out["fail_step"] = np.full(n, -1, np.int32)
    out["fail_agent"] = np.full(n, -1, np.int32)
    where = np.flatnonzero(ok)
    valid, optimal, on_goal = np.zeros(n, bool), np.zeros(n, bool), np.zeros(n, np.int64)
    if where.size:
        result = judge_plans([instances[i] for i in where], [plan for i in where for plan in [parsed[i].plan]
                                                            if plan is not None])  # where: the parsed ones
        valid[where] = result.valid
        optimal[where] = is_optimal(result.valid, result.makespan, np.asarray(optimal_makespan)[where])
        on_goal[where] = result.agents_on_goal
        out["failure"][where] = result.failure
        out["makespan"][where] = result.makespan
        out["sum_of_costs"][where] = result.sum_of_costs
        out["fail_step"][where] = result.fail_step
        out["fail_agent"][where] = result.fail_agent
    out.update(components(ok, valid, optimal, on_goal, np.array([inst.n_agents for inst in instances], np.int64)))
    out["parse_error"] = [p.error for p in parsed]  # reasons, for replays
    return out


# Failures that happen at one step, and whose fault the judge pins on the agent it reports (a hole, a move off the
# grid) or on the moves of that step (a conflict takes two agents; the judge reports one of them).
_ONE_AGENT_FAILURES = (C.FELL_IN_HOLE, C.ILLEGAL_MOVE)
_ONE_STEP_FAILURES = (C.VERTEX_CONFLICT, C.EDGE_CONFLICT)


def failure_spans(completions: Sequence[Any], instance: Sequence[str], optimal_makespan: Sequence[int],
                  horizon: Sequence[int]) -> list[list[tuple[int, int]] | None]:
    """Where each answer went wrong: the ``(start, end)`` character spans, in the completion's text, of the moves
    that made it fail, or None where no move is to blame alone.

    A plan that walks into a hole or off the grid at step ``t`` failed by its reported agent's move ``t``; a vertex
    or edge conflict at step ``t``, by every action of step ``t`` (a wait too; an agent whose plan has ended writes
    none). Valid plans, answers that did not parse, plans that end with an agent off its goal (no one step is at
    fault), and moves whose tokens cannot be found (an agent line that is not a plain action list,
    ``policy.parsing.line_action_spans``; the last line listing an agent's actions is its answer) give None. GRPO's
    failure credit puts a failed answer's negative advantage on these spans only (``training.failure_credit``)."""
    judged = reward_breakdown(completions, instance, optimal_makespan, horizon)
    out: list[list[tuple[int, int]] | None] = []
    for b, completion in enumerate(completions):
        failure, step, agent = int(judged["failure"][b]), int(judged["fail_step"][b]), int(judged["fail_agent"][b])
        if failure not in _ONE_AGENT_FAILURES + _ONE_STEP_FAILURES or step < 1:
            out.append(None)
            continue
        moves: dict[int, list[tuple[int, int]]] = {}
        offset = 0
        for line in completion_text(completion).split("\n"):
            found = line_action_spans(line)
            if found is not None:
                moves[found[0]] = [(offset + start, offset + end) for start, end in found[1]]
            offset += len(line) + 1
        blamed = [agent] if failure in _ONE_AGENT_FAILURES else sorted(moves)
        spans = [moves[a][step - 1] for a in blamed if a in moves and step <= len(moves[a])]
        out.append(spans or None)
    return out


def _component(name: str) -> Callable[..., list[float]]:
    def reward(prompts: object = None, completions: Sequence[Any] = (), instance: Sequence[str] = (),
               optimal_makespan: Sequence[int] = (), horizon: Sequence[int] = (), **_columns: object) -> list[float]:
        values: list[float] = reward_breakdown(completions, instance, optimal_makespan, horizon)[name].tolist()
        return values

    reward.__name__ = f"mapf_{name}_reward"
    reward.__doc__ = f"The ``{name}`` component (see ``policy.rewards``), TRL reward-function signature."
    return reward


REWARDS: dict[str, Callable[..., list[float]]] = {
    name: _component(name) for name in ("default", "format", "valid", "optimal", "progress")
}
mapf_reward = REWARDS["default"]


def group_key(inst: Instance) -> tuple[int, int]:
    """(agents, map side) of an instance: the key a training signal is tallied under."""
    return inst.n_agents, max(inst.height, inst.width)


_TALLY_NAMES = ("groups", "reward", "valid", "zero_variance", "abs_advantage")  # a StageReward tally's counts


class StageReward:
    """The weighted sum of reward components as one TRL reward function, recording what each group taught.

    ``weights`` maps component names (``REWARDS``) to weights; a call returns ``sum(weight * component)`` per
    completion, as TRL would sum them given the components separately (one judge pass instead of one per
    component). TRL scores a generation batch in groups of ``generations`` consecutive completions of one prompt;
    each call also computes each group's advantages the way TRL's GRPO does (``scale_rewards``: ``group`` divides
    by the group's std, Bessel-corrected, plus 1e-4; ``batch`` by the batch's; ``none`` only centres) and adds
    them to per-size tallies. :meth:`signal` returns them: the trainer's own training signal per map size and per
    agents x size, for the engineer.
    """

    __name__ = "mapf_stage_reward"

    def __init__(self, weights: dict[str, float], generations: int, scale_rewards: str = "group") -> None:
        unknown = [name for name in weights if name not in REWARDS]
        if unknown or not weights:
            raise ValueError(f"reward weights {weights!r}: names among {sorted(REWARDS)}")
        if scale_rewards not in ("group", "batch", "none"):
            raise ValueError(f"scale_rewards {scale_rewards!r}: group, batch or none")
        self.weights = dict(weights)
        self.generations = int(generations)
        self.scale_rewards = scale_rewards
        self._tallies: dict[tuple[int, int], dict[str, float]] = {}

    def __call__(self, prompts: object = None, completions: Sequence[Any] = (), instance: Sequence[str] = (),
                 optimal_makespan: Sequence[int] = (), horizon: Sequence[int] = (), **_columns: object) -> list[float]:
        parts = reward_breakdown(completions, instance, optimal_makespan, horizon)
        total = np.zeros(len(completions), np.float64)
        for name, weight in self.weights.items():
            total += weight * parts[name]
        self._record(list(instance), total, parts["valid"])
        return total.tolist()

    def _record(self, instance: list[str], total: np.ndarray, valid: np.ndarray) -> None:
        g = self.generations
        if g < 2 or total.size % g or any(len(set(instance[i:i + g])) != 1 for i in range(0, total.size, g)):
            return  # not TRL's grouped layout (a direct call): there are no groups to learn from
        self.record_groups([group_key(_instance(instance[start])) for start in range(0, total.size, g)], total, valid)

    def record_groups(self, keys: Sequence[tuple[int, int]], total: np.ndarray, valid: np.ndarray) -> None:
        """Tally groups of ``generations`` consecutive samples: ``keys`` holds each group's (agents, map side),
        ``total`` and ``valid`` each sample's reward and validity. The trainers that sample groups without TRL's
        reward call (rejection-sampling rounds) record their groups here too."""
        g = self.generations
        total = np.asarray(total, np.float64)
        valid = np.asarray(valid, np.float64)
        if g < 2 or total.size != len(keys) * g or valid.size != total.size:
            raise ValueError(f"record_groups: {len(keys)} groups of {g} need {len(keys) * g} samples, "
                             f"got {total.size} rewards and {valid.size} validities")
        grouped = total.reshape(-1, g)
        centred = grouped - grouped.mean(axis=1, keepdims=True)
        group_std = grouped.std(axis=1, ddof=1)
        if self.scale_rewards == "group":
            advantages = centred / (group_std[:, None] + 1e-4)
        elif self.scale_rewards == "batch":
            advantages = centred / (total.std(ddof=1) + 1e-4)
        else:
            advantages = centred
        for row, key in enumerate(keys):
            tally = self._tallies.setdefault((int(key[0]), int(key[1])), {"groups": 0, "reward": 0.0, "valid": 0.0, "zero_variance": 0,
                                                   "abs_advantage": 0.0})
            tally["groups"] += 1
            tally["reward"] += float(grouped[row].mean())
            tally["valid"] += float(valid[row * g:(row + 1) * g].mean())
            tally["zero_variance"] += int(np.isclose(group_std[row], 0.0, atol=1e-8, rtol=0.0))
            tally["abs_advantage"] += float(np.abs(advantages[row]).mean())

    def state(self) -> dict[str, dict[str, float]]:
        """The tallies as JSON (saved beside each trainer checkpoint, so a resumed stage keeps its counts)."""
        return {f"{agents}x{side}": dict(tally) for (agents, side), tally in sorted(self._tallies.items())}

    def load_state(self, state: dict[str, dict[str, float]]) -> None:
        """Continue from :meth:`state`'s document (read back from a checkpoint's file): keys ``AGENTSxSIDE``
        (positive integers), each tally the five counts :meth:`record_groups` keeps, finite, ``groups >= 1`` (a
        tally exists once a group was recorded),
        ``valid`` and ``zero_variance`` in ``[0, groups]``, ``abs_advantage >= 0``. Anything else is a ConfigError
        naming ``reward state.KEY[.NAME]``, the value and what is allowed; nothing is loaded then."""
        if not isinstance(state, dict):
            raise ConfigError("reward state", state, "a mapping of AGENTSxSIDE to tallies (StageReward.state)")
        tallies: dict[tuple[int, int], dict[str, float]] = {}
        for key, tally in state.items():
            agents, _, side = str(key).partition("x")
            if not all(part.isascii() and part.isdigit() and len(part) <= 4 and int(part) > 0
                       for part in (agents, side)):
                raise ConfigError("reward state", key, "keys AGENTSxSIDE of positive integers, e.g. 2x6")
            where = f"reward state.{key}"
            if not isinstance(tally, dict) or set(tally) != set(_TALLY_NAMES):
                raise ConfigError(where, tally, f"a mapping with exactly {', '.join(_TALLY_NAMES)}")
            for name in _TALLY_NAMES:
                value = tally[name]
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                    raise ConfigError(f"{where}.{name}", value, "a finite number")
            groups = tally["groups"]
            if groups != int(groups):
                raise ConfigError(f"{where}.groups", groups, "a whole number of groups")
            for name, low, high in (("groups", 1, math.inf), ("valid", 0, groups), ("zero_variance", 0, groups),
                                    ("abs_advantage", 0, math.inf)):
                if not low <= tally[name] <= high:
                    raise ConfigError(f"{where}.{name}", tally[name], f"a number in [{low}, {high:g}]")
            tallies[(int(agents), int(side))] = {name: float(tally[name]) for name in _TALLY_NAMES}
        self._tallies = tallies

    def signal(self, trainer: str = "grpo") -> TrainingSignal:
        """The tallies as the stage's :class:`~policy.signal.TrainingSignal` (``trainer``: whose groups, see
        :data:`~policy.signal.SIGNAL_TRAINERS`): per map side and per agents x side, ``groups``, ``reward_mean``,
        ``valid_rate`` (of the sampled completions), ``zero_variance_share`` and ``abs_advantage_mean`` (mean over
        the groups of their completions' mean absolute advantage)."""
        def figures(tallies: list[dict[str, float]]) -> SignalFigures:
            groups = sum(t["groups"] for t in tallies)
            return SignalFigures(groups=int(groups),
                                 reward_mean=sum(t["reward"] for t in tallies) / groups,
                                 valid_rate=sum(t["valid"] for t in tallies) / groups,
                                 zero_variance_share=sum(t["zero_variance"] for t in tallies) / groups,
                                 abs_advantage_mean=sum(t["abs_advantage"] for t in tallies) / groups)

        sides = sorted({side for _, side in self._tallies})
        return TrainingSignal(
            by_size={side: figures([t for (_, s), t in self._tallies.items() if s == side]) for side in sides},
            by_agents_size={key: figures([t]) for key, t in sorted(self._tallies.items())},
            trainer=trainer)
