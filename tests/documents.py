"""Editing nested JSON-like documents in tests: ``set_at(document, path, value)``, and ``DELETE`` to remove a key.

The table-driven tests of the config, run-folder, evidence and proposal readers each damage one field of a good
document; they share this one walk down the path.
"""

from __future__ import annotations

from typing import Any, Sequence

DELETE = object()
"""As the value of :func:`set_at`: remove the key instead of setting it."""


def set_at(document: Any, path: Sequence[Any], value: object) -> None:
    """``document[path[0]]...[path[-1]] = value``, in place; with ``value`` :data:`DELETE` that key is removed."""
    *parents, last = path
    target = document
    for key in parents:
        target = target[key]
    if value is DELETE:
        del target[last]
    else:
        target[last] = value
