"""A PettingZoo-style parallel adapter over :class:`simulator.env.MapfEnv`: dicts keyed by agent name.

Agent names are ``agent_0 .. agent_{K-1}``. Each observation is a dict with

* ``observation``: ``(4, H, W) int8`` planes: holes, this agent, this agent's goal, the other agents on the board;
* ``action_mask``: ``(5,) int8``, 1 for actions that stay on the grid (an agent on its goal may only wait).

Rewards follow ``MapfEnv``. An agent leaves ``agents`` after the step on which it is terminated (arrived or the
episode ended) or truncated. ``observation_space`` / ``action_space`` need gymnasium (a ``dev`` extra) and say so
when it is missing. No rule lives here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Iterable

import numpy as np
import numpy.typing as npt

from simulator import constants as C
from simulator.env import MapfEnv
from simulator.errors import ConfigError
from simulator.types import Instance

if TYPE_CHECKING:
    from gymnasium import spaces

# One agent's observation: {"observation": (4, H, W) int8 planes, "action_mask": (5,) int8}.
AgentObservation = dict[str, npt.NDArray[np.int8]]


class ParallelMapfEnv:
    """PettingZoo ``ParallelEnv`` interface over one instance; keyword arguments go to :class:`MapfEnv`."""

    metadata: ClassVar[dict[str, Any]] = {"name": "mapf_frozenlake_v1", "render_modes": ["ansi", "rgb_array", "human"],
                "is_parallelizable": True, "render_fps": 4}

    def __init__(self, instance: Instance, render_mode: str | None = None, **env_kwargs: Any) -> None:
        self.env = MapfEnv(instance, render_mode=render_mode, **env_kwargs)
        self.possible_agents = [f"agent_{k}" for k in range(instance.n_agents)]
        self.agents: list[str] = []
        self.render_mode = render_mode
        self._spaces: tuple[spaces.Dict, spaces.Discrete] | None = None

    # --- spaces (gymnasium only when asked for) --------------------------------------------------------
    def _make_spaces(self) -> tuple[spaces.Dict, spaces.Discrete]:
        if self._spaces is None:
            try:
                from gymnasium import spaces
            except ImportError as exc:  # pragma: no cover - depends on the environment
                raise ImportError(
                    "observation_space/action_space need gymnasium: pip install 'mapf-frozenlake[dev]'"
                ) from exc
            h, w = self.env.instance.grid.shape
            obs = spaces.Dict(
                {
                    "observation": spaces.Box(0, 1, shape=(4, h, w), dtype=np.int8),
                    "action_mask": spaces.Box(0, 1, shape=(C.N_ACTIONS,), dtype=np.int8),
                }
            )
            self._spaces = (obs, spaces.Discrete(C.N_ACTIONS))
        return self._spaces

    def observation_space(self, agent: str) -> spaces.Dict:
        return self._make_spaces()[0]

    def action_space(self, agent: str) -> spaces.Discrete:
        return self._make_spaces()[1]

    # --- observations ----------------------------------------------------------------------------------
    def _agent_observation(self, k: int) -> AgentObservation:
        state = self.env.state
        instance = self.env.instance
        h, w = instance.grid.shape
        planes = np.zeros((4, h, w), dtype=np.int8)
        planes[0] = instance.grid == C.HOLE
        r, c = state.pos[k]
        planes[1, r, c] = 1
        gr, gc = instance.goals[k]
        planes[2, gr, gc] = 1
        for j in range(instance.n_agents):
            if j != k and state.status[j] in (C.MOVING, C.ON_GOAL):
                planes[3, state.pos[j][0], state.pos[j][1]] = 1
        mask = np.zeros(C.N_ACTIONS, dtype=np.int8)
        mask[C.WAIT] = 1
        if state.status[k] == C.MOVING:
            for action in (C.UP, C.DOWN, C.LEFT, C.RIGHT):
                nr, nc = r + C.ACTION_DELTAS[action][0], c + C.ACTION_DELTAS[action][1]
                mask[action] = int(0 <= nr < h and 0 <= nc < w)
        return {"observation": planes, "action_mask": mask}

    def _observations(self, names: Iterable[str]) -> dict[str, AgentObservation]:
        return {name: self._agent_observation(self.possible_agents.index(name)) for name in names}

    # --- API -------------------------------------------------------------------------------------------
    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, AgentObservation], dict[str, dict[str, Any]]]:
        self.env.reset(seed=seed)
        status = self.env.state.status
        self.agents = [name for k, name in enumerate(self.possible_agents) if status[k] == C.MOVING]
        if not self.agents:  # every agent starts on its goal: nothing to play, but PettingZoo wants a live episode
            self.agents = list(self.possible_agents)
        observations = self._observations(self.agents)
        return observations, {name: {} for name in self.agents}

    def step(self, actions: dict[str, int]) -> tuple[
        dict[str, AgentObservation], dict[str, float], dict[str, bool], dict[str, bool], dict[str, dict[str, Any]]
    ]:
        if not self.agents:
            raise ConfigError("step", "episode finished", "call reset() first")
        unknown = set(actions) - set(self.possible_agents)
        if unknown:
            raise ConfigError("actions", sorted(unknown)[0], f"one of {self.possible_agents}")
        joint = np.zeros(self.env.n_agents, dtype=np.int64)
        for name, action in actions.items():
            joint[self.possible_agents.index(name)] = action
        live = list(self.agents)
        if self.env.done:  # all started on goal
            result_rewards = np.zeros(self.env.n_agents, np.float32)
            terminated, truncated, events = True, False, np.zeros(self.env.n_agents, np.int8)
        else:
            result = self.env.step(joint)
            result_rewards, terminated, truncated, events = result.rewards, result.terminated, result.truncated, result.events
        status = self.env.state.status
        observations = self._observations(live)
        rewards = {name: float(result_rewards[self.possible_agents.index(name)]) for name in live}
        terminations = {
            name: bool(terminated or status[self.possible_agents.index(name)] != C.MOVING) for name in live
        }
        truncations = {name: bool(truncated) for name in live}
        infos = {name: {"events": int(events[self.possible_agents.index(name)])} for name in live}
        self.agents = [name for name in live if not (terminations[name] or truncations[name])]
        return observations, rewards, terminations, truncations, infos

    def render(self) -> str | npt.NDArray[np.uint8] | None:
        """``ansi`` (and no mode): the board as text; ``rgb_array``: the last step drawn as ``(H, W, 3) uint8``
        with its failure markers; ``human``: the same in a pygame window (``MapfEnv.render``)."""
        return self.env.render()

    def close(self) -> None:
        self.env.close()

    @property
    def unwrapped(self) -> "ParallelMapfEnv":
        return self

    def state(self) -> np.ndarray:
        """Global state: the (K, 2) positions."""
        return self.env.state.pos.copy()
