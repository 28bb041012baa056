"""Conformance checker for the environment API, shipped with the package and run by the tests.

``check_env(instance)`` drives :class:`MapfEnv` and :class:`ParallelMapfEnv` with seeded random actions and
raises :class:`ConformanceError` on the first broken promise:

* API shape: ``reset`` returns ``(observation, info)``, ``step`` a :class:`StepResult` with the documented keys,
  dtypes and shapes; the parallel adapter's dicts are keyed by live agent names, masks have 5 entries.
* bounds: positions on the map, status and event codes known, rewards in {-1, 0, 1}, ``t`` counts steps.
* determinism: the same seed and actions give the same trajectory (slip included).
* termination: every episode ends (terminated or truncated) within the horizon; stepping after the end raises
  ``ConfigError``; a terminated episode is on all goals or has a failure event.
* agreement: the env's trajectory equals the pure-Python reference rules step by step.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simulator import constants as C
from simulator import rules
from simulator.env import MapfEnv, StepResult
from simulator.errors import ConfigError
from simulator.parallel import ParallelMapfEnv
from simulator.types import Instance


class ConformanceError(AssertionError):
    """The environment broke one of its documented promises."""


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ConformanceError(message)


def _check_observation(obs: dict[str, Any], instance: Instance, t: int) -> None:
    _require(isinstance(obs, dict), f"observation is {type(obs).__name__}, expected dict")
    for key in ("positions", "status", "goals", "grid", "t"):
        _require(key in obs, f"observation lacks {key!r}")
    k = instance.n_agents
    _require(obs["positions"].shape == (k, 2) and obs["positions"].dtype == np.int32, "positions not (K, 2) int32")
    _require(obs["status"].shape == (k,) and obs["status"].dtype == np.int8, "status not (K,) int8")
    _require(obs["t"] == t, f"observation t={obs['t']} after {t} steps")
    pos = obs["positions"]
    _require(
        bool(((pos >= 0) & (pos < np.array([instance.height, instance.width]))).all()), f"position off the map: {pos}"
    )
    _require(bool(np.isin(obs["status"], (C.MOVING, C.ON_GOAL, C.FALLEN)).all()), f"unknown status {obs['status']}")


def _run_episode(env: MapfEnv, seed: int, actions: np.ndarray) -> list[bytes | tuple[bytes, bytes, bool]]:
    obs, info = env.reset(seed=seed)
    trace: list[bytes | tuple[bytes, bytes, bool]] = [obs["positions"].tobytes()]
    for row in actions:
        if env.done:
            break
        result = env.step(row)
        trace.append((result.observation["positions"].tobytes(), result.events.tobytes(), result.terminated))
    return trace


def check_env(instance: Instance, *, seed: int = 0, episodes: int = 5, slip: float = 0.0) -> None:
    """Check :class:`MapfEnv` and :class:`ParallelMapfEnv` on ``instance``; raise ConformanceError on failure."""
    rng = np.random.default_rng(seed)
    env = MapfEnv(instance, slip=slip)
    k = instance.n_agents
    for episode in range(episodes):
        reset_out = env.reset(seed=seed + episode)
        _require(isinstance(reset_out, tuple) and len(reset_out) == 2, "reset must return (observation, info)")
        obs, _info = reset_out
        _check_observation(obs, instance, 0)
        ref_pos, ref_status = instance.starts.copy(), rules.initial_status(instance)
        actions = rng.integers(0, C.N_ACTIONS, size=(env.horizon + 1, k))
        steps = 0
        finished = env.done
        while not finished:
            result = env.step(actions[steps])
            steps += 1
            _require(isinstance(result, StepResult), "step must return a StepResult")
            _check_observation(result.observation, instance, steps)
            _require(result.events.shape == (k,) and result.events.dtype == np.int8, "events not (K,) int8")
            known = C.EV_ALL
            _require(bool(((result.events.astype(np.int64) & ~known) == 0).all()), f"unknown event bits {result.events}")
            _require(bool(np.isin(result.rewards, (-1.0, 0.0, 1.0)).all()), f"reward out of range {result.rewards}")
            _require(steps <= env.horizon, f"episode ran past its horizon {env.horizon}")
            if slip == 0.0:
                ref_pos, ref_status, ref_events = rules.step(
                    instance.grid, ref_pos, instance.goals, ref_status, actions[steps - 1]
                )
                _require(
                    np.array_equal(ref_pos, result.observation["positions"])
                    and np.array_equal(ref_events, result.events)
                    and np.array_equal(ref_status, result.observation["status"]),
                    f"step {steps} disagrees with the reference rules",
                )
            if result.terminated:
                on_goal = bool((result.observation["status"] == C.ON_GOAL).all())
                _require(on_goal or bool((result.events & C.EV_FAILURE_MASK).any()), "terminated without cause")
            _require(not (result.terminated and result.truncated), "terminated and truncated at once")
            finished = result.terminated or result.truncated
        _require(env.done, "episode over but env.done is False")
        try:
            env.step(np.zeros(k, dtype=np.int64))
        except ConfigError:
            pass
        else:
            raise ConformanceError("stepping a finished episode must raise ConfigError")
    # determinism under a seed
    actions = rng.integers(0, C.N_ACTIONS, size=(env.horizon, k))
    first = _run_episode(MapfEnv(instance, slip=slip), seed, actions)
    second = _run_episode(MapfEnv(instance, slip=slip), seed, actions)
    _require(first == second, "same seed and actions gave different trajectories")
    _check_parallel(instance, seed, slip)


def _check_parallel(instance: Instance, seed: int, slip: float) -> None:
    env = ParallelMapfEnv(instance, slip=slip)
    rng = np.random.default_rng(seed)
    observations, infos = env.reset(seed=seed)
    _require(set(observations) == set(env.agents) == set(infos), "reset keys differ from live agents")
    for _ in range(env.env.horizon + 1):
        if not env.agents:
            break
        for name, obs in observations.items():
            _require(obs["action_mask"].shape == (C.N_ACTIONS,), f"{name}: action mask shape")
            _require(obs["observation"].shape == (4, instance.height, instance.width), f"{name}: observation shape")
            _require(obs["action_mask"][C.WAIT] == 1, f"{name}: wait must always be allowed")
        actions = {}
        for name in env.agents:
            mask = observations[name]["action_mask"]
            actions[name] = int(rng.choice(np.flatnonzero(mask)))
        live = set(env.agents)
        observations, rewards, terminations, truncations, infos = env.step(actions)
        for mapping in (observations, rewards, terminations, truncations, infos):
            _require(set(mapping) == live, "step dicts must be keyed by the agents live before the step")
    _require(not env.agents, "parallel episode did not end within the horizon")
