"""The replay types callers build and get back: :class:`Episode`, :class:`InstanceLabels`, :class:`Outcome`,
:class:`ReplayHeader`, and :class:`LazyEpisode` (an episode whose arrays a codec decodes on first access).

Their bytes are the codecs' business (``replays.codec_v1``, looked up in ``replays.registry``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from typing import Any

import numpy as np

from replays.container import FORMAT_VERSION
from replays.errors import RecordError, ReplayError
from simulator.types import Instance, InstanceLabels, Judgement, JointPlan

__all__ = ["Episode", "InstanceLabels", "LazyEpisode", "Outcome", "ReplayHeader"]


@dataclass(frozen=True)
class Outcome(Judgement):
    """The verdict on one episode: ``simulator.types.Judgement``'s fields (their meanings there), with
    ``failure`` = ``PARSE_ERROR`` when the completion did not parse (``fail_step`` 0, nothing run), and
    ``optimal``: valid and the makespan equals the instance's optimal makespan (keyword-only)."""

    optimal: bool = field(kw_only=True)

    @classmethod
    def from_judgement(cls, judgement: Any, optimal_makespan: int | None = None) -> "Outcome":
        """The outcome of a ``simulator.types.Judgement``; ``optimal`` needs the instance's optimal makespan."""
        from simulator.judge import is_optimal

        valid, makespan = bool(judgement.valid), int(judgement.makespan)
        return cls(valid, int(judgement.failure), int(judgement.fail_step), int(judgement.fail_agent), makespan,
                   int(judgement.sum_of_costs), int(judgement.agents_on_goal),
                   optimal=is_optimal(valid, makespan, optimal_makespan))


@dataclass(eq=False)
class Episode:
    """One recorded episode: the instance, what the policy answered, what happened, how it was scored.

    Fields:
        instance: the map, starts and goals (K agents).
        labels: the generator's labels, or None (hand-made instances, play mode).
        plan: the parsed joint plan, or None (the completion did not parse, or there was no joint plan).
        parse_error: why parsing failed, or None.
        positions: ``(T+1, K, 2) int32`` (row, col) after each step; row 0 = ``instance.starts``; T = steps run.
        events: ``(T, K) int8`` event flags of each step (``constants.EV_*`` bits).
        outcome: the verdict.
        reward, reward_components: the scalar reward and its named parts.
        prompt, completion: the text sent and the raw model text (optional; can be large).
        prompt_tokens, completion_tokens: token counts.
        timings: named durations in seconds, e.g. ``{"generate_s": 1.2, "judge_s": 0.001}``.
        slip: the slip probability the episode ran under.
        extra: small free-form metadata; plain msgpack values (dict with str keys, list, str, bytes, int,
            float, bool, None); tuples are refused rather than silently turned into lists.

    Equality compares every field, arrays by shape and value (not dtype). Construction does not validate (the
    writer does, naming the file and episode); arrays may be any integer dtype, the reader returns the dtypes
    above.
    """

    instance: Instance
    labels: InstanceLabels | None
    plan: JointPlan | None
    parse_error: str | None
    positions: np.ndarray  # (T+1, K, 2) int32
    events: np.ndarray  # (T, K) int8
    outcome: Outcome
    reward: float = 0.0
    reward_components: dict[str, float] = field(default_factory=dict)
    prompt: str | None = None
    completion: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    slip: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def n_steps(self) -> int:
        """T, the steps actually run."""
        return int(np.shape(self.positions)[0]) - 1

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Episode):
            return NotImplemented
        for name in _EPISODE_FIELDS:
            mine, theirs = getattr(self, name), getattr(other, name)
            if name in ("positions", "events"):
                if not np.array_equal(np.asarray(mine), np.asarray(theirs)):
                    return False
            elif mine != theirs:
                return False
        return True

    # No __hash__: a class that defines __eq__ gets __hash__ = None (mutable, compared by value).

    def materialized(self) -> "Episode":
        """A plain :class:`Episode` with every field decoded (a copy of the references, not of the arrays)."""
        return Episode(**{name: getattr(self, name) for name in _EPISODE_FIELDS})


_EPISODE_FIELDS = tuple(f.name for f in fields(Episode))


class LazyEpisode(Episode):
    """An :class:`Episode` read from a file whose arrays are decoded on first access.

    ``instance``, ``plan``, ``positions`` and ``events`` are decoded (and their content checked) the first time
    they are read; a record that breaks the spec then raises :class:`ReplayError` naming the file and episode.
    Everything else was decoded and checked when the record was read. Pickling and ``copy`` give a plain
    :class:`Episode`.
    """

    def __getattr__(self, name: str) -> Any:
        # Only called when normal lookup fails: the lazy fields not decoded yet (other names fall through).
        state = self.__dict__
        decoder = state.get("_decoders", _NO_DECODERS).get(name)
        if decoder is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        try:
            value = decoder(state["_record"])
        except RecordError as exc:
            path, index = state["_where"]
            raise ReplayError(path, index, f"{name}: {exc}") from None
        state[name] = value
        if all(lazy in state for lazy in state["_decoders"]):
            del state["_record"], state["_decoders"]  # everything decoded: the raw record is no longer needed
        return value

    def __reduce__(self) -> Any:
        return (_plain_episode, (self.materialized().__dict__,))


_NO_DECODERS: dict[str, Any] = {}


def _plain_episode(state: dict[str, Any]) -> Episode:
    return Episode(**state)


@dataclass
class ReplayHeader:
    """What a replay file holds, once per file.

    Fields:
        format_version: the file's format version (``FORMAT_VERSION`` when written by this code).
        producer_version: what wrote it, e.g. ``"mapf-frozenlake 0.1.0"``.
        run_id: the run this file belongs to.
        stage: the curriculum stage (0-based).
        split: one of ``SPLITS``: ``"train" | "validation" | "eval" | "play" | "rollout"``.
        policy: the policy descriptor, e.g. ``{"name": ..., "spec": ..., "prompt_style": ...}``.
        stage_config: ``simulator.config.StageConfig.to_dict()``, or None.
        created: ISO 8601 UTC time of writing.
        extra: small free-form metadata (same rules as ``Episode.extra``).
    """

    format_version: int
    producer_version: str
    run_id: str
    stage: int
    split: str
    policy: dict[str, Any]
    stage_config: dict[str, Any] | None
    created: str
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def new(
        cls,
        run_id: str,
        stage: int,
        split: str,
        policy: dict[str, Any],
        stage_config: dict[str, Any] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> "ReplayHeader":
        """A header for a file written now, by this package, in the current format version."""
        return cls(
            format_version=FORMAT_VERSION,
            producer_version=producer_version(),
            run_id=run_id,
            stage=stage,
            split=split,
            policy=policy,
            stage_config=stage_config,
            created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            extra={} if extra is None else extra,
        )


def producer_version() -> str:
    """``"mapf-frozenlake <version>"`` from the installed package metadata (``"unknown"`` when not installed)."""
    from importlib import metadata

    try:
        return f"mapf-frozenlake {metadata.version('mapf-frozenlake')}"
    except metadata.PackageNotFoundError:
        return "mapf-frozenlake unknown"
