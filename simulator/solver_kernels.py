"""The optimal MAPF solver's and ``needs_wait``'s numba kernels under their former single name.

They live by role in ``simulator.grid_kernels`` (move table, BFS distances), ``simulator.pair_tables``
(pairwise cost-to-go tables), ``simulator.astar_kernels`` (joint A* of one group and its outcome codes),
``simulator.independence_kernels`` (independence detection, ``solve_kernel``) and
``simulator.needs_wait_kernels``. A public name read from this module is looked up in them, in that order.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from simulator import astar_kernels, grid_kernels, independence_kernels, needs_wait_kernels, pair_tables

_ROLE_MODULES: tuple[ModuleType, ...] = (
    grid_kernels, pair_tables, astar_kernels, independence_kernels, needs_wait_kernels,
)


def _public(module: ModuleType) -> dict[str, Any]:
    """The names ``module`` defines itself (not what it imports)."""
    return {
        name: value for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, ModuleType)
        and getattr(value, "__module__", module.__name__) == module.__name__
    }


def __getattr__(name: str) -> Any:
    for module in _ROLE_MODULES:
        names = _public(module)
        if name in names:
            return names[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({name for module in _ROLE_MODULES for name in _public(module)})
