"""The validated entry to the batched step kernel, for vectorised users (MARL, benchmarks, rollouts).

``BatchState`` holds B environments' mutable state; ``step_batch`` checks shapes and codes once, then runs
``kernels.step_batch`` in place. Rules are those of ``simulator.rules.step``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from simulator import constants as C
from simulator import kernels
from simulator.errors import ConfigError
from simulator.judge import PackedInstances


@dataclass
class BatchState:
    """B environments stepping together.

    Fields:
        pos: ``(B, K, 2) int32`` positions.
        status: ``(B, K) int8`` agent status (``ABSENT`` in padding slots).
        events: ``(B, K) int8`` event flags of the last step.
    """

    pos: npt.NDArray[np.int32]  # (B, K, 2)
    status: npt.NDArray[np.int8]  # (B, K)
    events: npt.NDArray[np.int8]  # (B, K)

    @classmethod
    def initial(cls, packed: PackedInstances) -> "BatchState":
        """Every agent on its start; agents starting on their goal are ``ON_GOAL``; padding slots ``ABSENT``."""
        n, k_max = packed.starts.shape[:2]
        status = np.full((n, k_max), C.MOVING, dtype=np.int8)
        status[np.all(packed.starts == packed.goals, axis=2)] = C.ON_GOAL
        status[np.arange(k_max)[None, :] >= packed.n_agents[:, None]] = C.ABSENT
        return cls(packed.starts.copy(), status, np.zeros((n, k_max), dtype=np.int8))


def check_actions(actions: npt.ArrayLike, shape: tuple[int, ...], name: str = "actions") -> npt.NDArray[np.int8]:
    """Return ``actions`` as int8 of ``shape`` or raise :class:`ConfigError` naming the bad entry."""
    array = np.asarray(actions)
    if array.shape != shape:
        raise ConfigError(name, f"shape {array.shape}", f"shape {shape}: one action per agent")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise ConfigError(name, array.dtype.name, f"integer action codes 0..{C.N_ACTIONS - 1}")
    if array.dtype == np.int8:  # the hot path: one pass, negative codes read as >= 128 through uint8
        out_of_range = array.size and array.view(np.uint8).max() >= C.N_ACTIONS
    else:
        out_of_range = array.size and (array.min() < 0 or array.max() >= C.N_ACTIONS)
    if out_of_range:
        bad = tuple(int(i) for i in np.argwhere((array < 0) | (array >= C.N_ACTIONS))[0])
        raise ConfigError(f"{name}{list(bad)}", int(array[bad]), f"an action code 0..{C.N_ACTIONS - 1} {C.ACTION_NAMES}")
    return np.ascontiguousarray(array, dtype=np.int8)


def step_batch(
    packed: PackedInstances,
    state: BatchState,
    actions: npt.ArrayLike,
    slip: float = 0.0,
    draws: npt.ArrayLike | None = None,
) -> BatchState:
    """Advance every environment one step in place and return ``state``.

    Args:
        packed: the B instances (maps padded with ``OFF_GRID``).
        state: their current state; updated in place.
        actions: ``(B, K)`` action codes (padding slots are ignored).
        slip: slip probability in [0, 1].
        draws: ``(B, K)`` uniforms in [0, 1) for the slips; required when ``slip > 0``.
    """
    shape = state.status.shape
    actions = check_actions(actions, shape)
    if not 0.0 <= float(slip) <= 1.0:
        raise ConfigError("slip", slip, "a probability in [0, 1]")
    if slip > 0.0:
        if draws is None:
            raise ConfigError("draws", None, f"a (B, K) = {shape} array of uniforms when slip > 0")
        draws = np.ascontiguousarray(draws, dtype=np.float64)
        if draws.shape != shape:
            raise ConfigError("draws", f"shape {draws.shape}", f"shape {shape}")
    else:
        draws = np.zeros((1, 1), dtype=np.float64)
    kernels.step_batch(
        packed.grids, state.pos, packed.goals, state.status, actions, float(slip), draws,
        state.pos, state.status, state.events,
    )
    return state
