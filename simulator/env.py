"""Step-by-step environment over one instance: manual play, the multi-turn LLM mode, MARL users.

A thin wrapper around ``kernels.step_batch`` (a batch of one); it holds no rule of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

import numpy as np
import numpy.typing as npt

from simulator import constants as C
from simulator.documents import is_integer, is_real
from simulator.errors import ConfigError
from simulator.judge import pack_instances
from simulator.rules import initial_status
from simulator.step import BatchState, check_actions, step_batch
from simulator.types import EnvState, Instance

if TYPE_CHECKING:
    from render.env_frames import HumanWindow


class StepResult(NamedTuple):
    observation: dict[str, Any]  # see MapfEnv
    events: npt.NDArray[np.int8]  # (K,) event flags of this step
    rewards: npt.NDArray[np.float32]  # (K,)
    terminated: bool
    truncated: bool
    info: dict[str, Any]


def check_slip(slip: object, name: str = "slip") -> float:
    """``slip`` as a float if it is a probability in [0, 1]; else ConfigError naming ``name``. (Compared before the
    conversion: ``float(10**400)`` raises OverflowError.)"""
    if not is_real(slip) or not 0.0 <= slip <= 1.0:
        raise ConfigError(name, slip, "a probability in [0, 1]")
    return float(slip)


def default_horizon(instance: Instance) -> int:
    """Steps allowed when none is given: four times the map's perimeter half (``4 * (H + W)``)."""
    return 4 * (instance.height + instance.width)


class MapfEnv:
    """One MAPF-FrozenLake instance, played a joint step at a time.

    Description:
        K agents on an H x W frozen lake must each reach their own goal without falling into a hole,
        stepping off the grid or colliding (rules: ``simulator.rules``).

    Action space:
        A joint action: ``(K,)`` integers in ``0..4`` (wait, up, down, left, right). Actions of agents already
        on their goal or fallen are ignored.

    Observation:
        A dict of copies: ``positions (K, 2) int32``, ``status (K,) int8`` (``constants.STATUS_NAMES``),
        ``goals (K, 2) int32``, ``grid (H, W) int8``, ``t`` (steps taken).

    Rewards:
        Per agent, ``+1`` on the step it arrives on its goal, ``-1`` on a step where it takes part in a failure
        (illegal move, hole, vertex or edge conflict), else ``0``.

    Episode end:
        ``terminated`` when every agent is on its goal, or on any failure (an illegal move only when
        ``illegal_move_ends_episode``; otherwise the agent stays put, as in Gymnasium's FrozenLake).
        ``truncated`` when ``horizon`` steps were taken without termination. Stepping a finished episode raises
        :class:`ConfigError`; call :meth:`reset`.

    Args:
        instance: the instance to play.
        horizon: step limit (default ``default_horizon``), 1..4096.
        slip: probability that a move slips sideways (FrozenLake's slippery ice), in [0, 1]. Draws come from
            ``numpy.random.default_rng(seed)`` given to :meth:`reset`.
        illegal_move_ends_episode: whether an off-grid move fails the episode (the judge's rule) or only
            leaves the agent in place.
        render_mode: None or ``"ansi"`` (:meth:`render` returns the board as text), ``"rgb_array"`` (the last
            step drawn as ``(H, W, 3) uint8`` with its failure markers) or ``"human"`` (the same in a pygame
            window). The drawing lives in ``render.env_frames``; this module imports it only when asked.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "rgb_array", "human"], "render_fps": 4}

    def __init__(
        self,
        instance: Instance,
        *,
        horizon: int | None = None,
        slip: float = 0.0,
        illegal_move_ends_episode: bool = True,
        render_mode: str | None = None,
    ) -> None:
        if not isinstance(instance, Instance):
            raise ConfigError("instance", type(instance).__name__, "a simulator.types.Instance")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError("render_mode", render_mode, f"None or one of {self.metadata['render_modes']}")
        self.render_mode = render_mode
        # (state before the last step, its joint action), for the drawn frames
        self._last: tuple[EnvState, npt.NDArray[np.int8]] | None = None
        self._window: HumanWindow | None = None
        horizon = default_horizon(instance) if horizon is None else horizon
        if not is_integer(horizon) or not 1 <= horizon <= C.MAX_PLAN_LENGTH:
            raise ConfigError("horizon", horizon, f"an integer in 1..{C.MAX_PLAN_LENGTH}")
        check_slip(slip)
        self.instance = instance
        self.horizon = int(horizon)
        self.slip = float(slip)
        self.illegal_move_ends_episode = bool(illegal_move_ends_episode)
        self._packed = pack_instances([instance])
        self._failure_mask = C.EV_FAILURE_MASK if illegal_move_ends_episode else C.EV_FAILURE_MASK & ~C.EV_ILLEGAL
        self._rng = np.random.default_rng(0)
        self._state: EnvState | None = None
        self._done = True

    @property
    def n_agents(self) -> int:
        return self.instance.n_agents

    @property
    def state(self) -> EnvState:
        """A copy of the current state (for undo: hand it back to :meth:`set_state`)."""
        return self._current_state().copy()

    def _current_state(self) -> EnvState:
        if self._state is None:
            raise ConfigError("env", "not reset", "call reset() before reading the state")
        return self._state

    @property
    def done(self) -> bool:
        return self._done

    def set_state(self, state: EnvState) -> None:
        """Restore a state taken from :attr:`state` (undo). The slip random stream is not rewound."""
        self._state = state.copy()
        self._done = self._is_terminal(self._state) or self._state.t >= self.horizon

    def _observation(self) -> dict[str, Any]:
        state = self._current_state()
        return {
            "positions": state.pos.copy(),
            "status": state.status.copy(),
            "goals": self.instance.goals.copy(),
            "grid": self.instance.grid.copy(),
            "t": state.t,
        }

    def _is_terminal(self, state: EnvState) -> bool:
        return bool((state.status == C.ON_GOAL).all() or (state.events & self._failure_mask).any())

    def reset(self, seed: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """Put every agent on its start; returns ``(observation, info)``."""
        if seed is not None and (not is_integer(seed) or seed < 0):
            raise ConfigError("seed", seed, "a non-negative integer or None")
        self._rng = np.random.default_rng(seed)
        status = initial_status(self.instance)
        arrival = np.where(status == C.ON_GOAL, 0, -1).astype(np.int32)
        self._state = EnvState(self.instance.starts.copy(), status, arrival, 0, np.zeros(self.n_agents, np.int8))
        self._done = bool((status == C.ON_GOAL).all())
        self._last = None
        return self._observation(), {"horizon": self.horizon, "slip": self.slip}

    def render(self) -> str | npt.NDArray[np.uint8] | None:
        """See ``render_mode`` in the class docstring (no mode: the board as text, like ``"ansi"``)."""
        state = self.state
        if self.render_mode in (None, "ansi"):
            from simulator.text import render_state

            return render_state(self.instance, state.pos, state.status)
        from render.env_frames import HumanWindow, env_scene, rgb_frame

        before, actions = self._last if self._last is not None else (None, None)
        scene = env_scene(self.instance, before, state, actions, state.t)
        if self.render_mode == "rgb_array":
            return rgb_frame(scene)
        if self._window is None:
            self._window = HumanWindow()
        self._window.show(scene)
        return None

    def close(self) -> None:
        """Close the ``human`` window, if one is open."""
        if self._window is not None:
            self._window.close()
            self._window = None

    def step(self, joint_action: npt.ArrayLike) -> StepResult:
        """Apply one joint action (``(K,)`` codes) to every agent at once."""
        if self._state is None or self._done:
            raise ConfigError("env.step", "episode finished" if self._state else "not reset", "call reset() first")
        actions = check_actions(joint_action, (self.n_agents,), "joint_action")
        state = self._state
        self._last = (state.copy(), np.asarray(actions, np.int8).copy())
        batch = BatchState(state.pos[None].copy(), state.status[None].copy(), np.zeros((1, self.n_agents), np.int8))
        draws = self._rng.random((1, self.n_agents)) if self.slip > 0.0 else None
        step_batch(self._packed, batch, actions[None], self.slip, draws)
        events = batch.events[0].copy()
        state.t += 1
        state.pos = batch.pos[0].copy()
        state.status = batch.status[0].copy()
        state.events = events
        state.arrival[(events & C.EV_GOAL) != 0] = state.t
        rewards = np.zeros(self.n_agents, np.float32)
        rewards[(events & C.EV_GOAL) != 0] = 1.0
        rewards[(events & C.EV_FAILURE_MASK) != 0] = -1.0
        terminated = self._is_terminal(state)
        truncated = not terminated and state.t >= self.horizon
        self._done = terminated or truncated
        info: dict[str, Any] = {
            "event_names": [
                [name for flag, name in C.EVENT_NAMES.items() if int(ev) & flag] for ev in events
            ],
            "arrival": state.arrival.copy(),
        }
        return StepResult(self._observation(), events, rewards, terminated, truncated, info)
