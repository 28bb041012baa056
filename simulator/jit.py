"""``njit``: numba's ``numba.njit(**options)`` with a type, for the kernels of ``simulator/`` and ``replays/``.

numba ships no type information, so to mypy ``numba.njit`` is ``Any`` and every function it compiles would lose
its annotations (strict mode refuses that: "untyped decorator"). Here the decorator is declared to return the
function's own type: a compiled kernel is called exactly like the Python function it compiles, so that is what
the callers are checked against. At run time this is ``numba.njit`` itself; nothing is wrapped.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

import numba

Function = TypeVar("Function", bound=Callable[..., Any])


def njit(**options: Any) -> Callable[[Function], Function]:
    """``numba.njit(**options)``, e.g. ``@njit(cache=True)``: compiles the decorated function in nopython mode."""
    decorator: Callable[[Function], Function] = numba.njit(**options)
    return decorator
