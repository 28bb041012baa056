"""``njit``: numba's ``numba.njit(**options)`` with a type, for the kernels of ``simulator/`` and ``replays/``, and
the array types their arguments are annotated with (``Int8Array`` is ``npt.NDArray[np.int8]``; shapes are not
part of numpy's types, the kernels' docstrings give them).

numba ships no type information, so to mypy ``numba.njit`` is ``Any`` and every function it compiles would lose
its annotations (strict mode refuses that: "untyped decorator"). Here the decorator is declared to return the
function's own type: a compiled kernel is called exactly like the Python function it compiles, so that is what
the callers are checked against. At run time this is ``numba.njit`` itself; nothing is wrapped.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar, Union

import numba
import numpy as np
import numpy.typing as npt

Function = TypeVar("Function", bound=Callable[..., Any])

BoolArray = npt.NDArray[np.bool_]
Int8Array = npt.NDArray[np.int8]
Int32Array = npt.NDArray[np.int32]
Int64Array = npt.NDArray[np.int64]
UInt8Array = npt.NDArray[np.uint8]
UInt16Array = npt.NDArray[np.uint16]
Float64Array = npt.NDArray[np.float64]
# Scalars as kernels take them: Python ints and bools, or numpy scalars (callers pass np.int64 and np.bool_ to keep
# one numba specialisation where a literal would compile one per value).
IntScalar = Union[int, np.integer[Any]]
BoolScalar = Union[bool, np.bool_]


def njit(**options: Any) -> Callable[[Function], Function]:
    """``numba.njit(**options)``, e.g. ``@njit(cache=True)``: compiles the decorated function in nopython mode."""
    decorator: Callable[[Function], Function] = numba.njit(**options)
    return decorator
