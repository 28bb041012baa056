"""The multi-turn mode as an OpenEnv environment (the ``openenv-core`` package; extra: ``openenv``).

:class:`MapfOpenEnv` is an ``openenv.core.env_server.Environment`` over exported records (``policy.score``):
``reset()`` starts an episode on one record and returns its first prompt, ``step(MapfAction(message=...))`` plays
the model's answer for one turn and returns the env's next text, with ``done`` and, on the last turn, the
episode's default reward (``policy.multiturn``: every rule stays in ``simulator.env``). Serve it as OpenEnv does::

    from openenv.core.env_server import create_app
    from policy.openenv_env import MapfAction, MapfObservation, MapfOpenEnv, load_records

    records = load_records("train.jsonl")          # mapf-lake export --layout records
    app = create_app(lambda: MapfOpenEnv(records, style="compact"), MapfAction, MapfObservation)

(OpenEnv's HTTP ``/reset`` and ``/step`` make a new env per request; a whole episode is played over its
WebSocket session or in process.) ``reset(index=i)`` picks record ``i``; otherwise ``seed`` picks
``records[seed % len(records)]`` and no seed the next record in turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

try:
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, Observation, State
except ImportError as error:  # the adapter is an optional extra; say how to get it
    raise ImportError(f"the OpenEnv adapter needs openenv-core: pip install 'mapf-frozenlake[openenv]' ({error})") from None

from pydantic import Field

from policy.multiturn import TextGame, get_turn_style
from policy.score import check_record
from simulator import constants as C
from simulator.documents import is_python_int
from simulator.env import check_slip
from simulator.errors import ConfigError
from simulator.types import Instance


class MapfAction(Action):
    """The model's answer for one turn: one joint action (``UD``, ``<answer>R W</answer>``, ``A0 U`` lines)."""

    message: str = Field(..., description="the model's text for this turn")


class MapfObservation(Observation):
    """The env's text: the first prompt on reset (chat messages for chat styles), the next board after a step."""

    prompt: str | list[dict[str, Any]] = Field(default="", description="what the model reads next ('' once done)")
    outcome: Optional[dict[str, Any]] = Field(default=None,
                                              description="the episode's outcome (policy.multiturn), when done")


class MapfState(State):
    """Where the episode is: the record, the turns taken, the agents' positions."""

    record_id: Optional[str] = None
    turns: int = 0
    positions: list[Any] = Field(default_factory=list)  # (K, 2) row, column pairs


def load_records(path: str | Path) -> list[dict[str, Any]]:
    """The records of a ``--layout records`` JSON-lines export, each checked."""
    from simulator.files import MAX_INSTANCES_BYTES, read_text_bounded

    lines = read_text_bounded(path, MAX_INSTANCES_BYTES, "a records export (JSON lines)").splitlines()
    return [dict(check_record(line, f"{path}:{number}")) for number, line in enumerate(lines, 1) if line.strip()]


class MapfOpenEnv(Environment):
    """MAPF-FrozenLake, one joint action per step, as an OpenEnv environment (module docstring).

    Args:
        records: exported records (``policy.score``) to play.
        style: a turn style (``policy.multiturn.TURN_STYLES``).
        max_turns: turn limit per episode (default: the record's horizon).
        slip: slippery ice.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True  # every instance holds its own game

    def __init__(self, records: Sequence[Any], *, style: str = "natural", max_turns: int | None = None,
                 slip: float = 0.0) -> None:
        super().__init__()
        get_turn_style(style)
        if not records:
            raise ConfigError("records", len(records), "at least one record")
        self.records = [check_record(record, f"records[{i}]") for i, record in enumerate(records)]
        if max_turns is not None and (
            not is_python_int(max_turns) or not 1 <= max_turns <= C.MAX_PLAN_LENGTH
        ):
            raise ConfigError("max_turns", max_turns, f"None or an integer in 1..{C.MAX_PLAN_LENGTH}")
        self.style = style
        self.max_turns = max_turns
        self.slip = check_slip(slip)  # checked here, not at the first reset
        self._next = 0
        self._game: TextGame | None = None
        self._state = MapfState()

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, index: Optional[int] = None,
              **_kwargs: Any) -> MapfObservation:
        if seed is not None and (not is_python_int(seed) or seed < 0):
            raise ConfigError("seed", seed, "a non-negative integer or None")
        if index is None:
            index = seed % len(self.records) if seed is not None else self._next
            self._next = (index + 1) % len(self.records)
        if not is_python_int(index) or not 0 <= index < len(self.records):
            raise ConfigError("index", index, f"a record index in 0..{len(self.records) - 1}")
        record = self.records[index]
        instance = Instance.from_dict(record["instance"])
        self._game = TextGame(instance, self.style, optimal_makespan=int(record["labels"]["optimal_makespan"]),
                              max_turns=self.max_turns or int(record["horizon"]), slip=self.slip)
        prompt = self._game.reset(seed)
        self._state = MapfState(episode_id=episode_id, step_count=0, record_id=record.get("id"), turns=0,
                                positions=instance.starts.tolist())
        return MapfObservation(prompt=prompt, done=False, reward=None)

    def step(self, action: MapfAction, timeout_s: Optional[float] = None, **_kwargs: Any) -> MapfObservation:
        if self._game is None:
            raise ConfigError("env.step", "not reset", "call reset() first")
        message = action.message if isinstance(action, MapfAction) else action
        result = self._game.step(message)
        state = self._game.env.state
        self._state = MapfState(episode_id=self._state.episode_id, step_count=self._game.turns,
                                record_id=self._state.record_id, turns=self._game.turns, positions=state.pos.tolist())
        return MapfObservation(prompt=result.observation, done=result.done, reward=result.reward,
                               outcome=result.info.get("outcome"),
                               metadata={"actions": result.info["actions"], "parse_error": result.info["parse_error"]})

    @property
    def state(self) -> MapfState:
        return self._state


__all__ = ["MapfAction", "MapfObservation", "MapfOpenEnv", "MapfState", "load_records"]
