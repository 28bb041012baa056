"""The one error type the simulator raises for bad input.

Every check of a config, instance, state, action or plan raises :class:`ConfigError` with the offending field,
the value it had and what is allowed, so a user (or an engineer model) can fix the input without reading code.
"""

from __future__ import annotations

from typing import Any


class ConfigError(ValueError):
    """Bad input: names the field, the value and the allowed range.

    Attributes:
        field: dotted name of the offending field, e.g. ``"instance.starts[2]"``.
        value: the value that was rejected (shortened in the message when long).
        allowed: the allowed range or rule, in words.
    """

    def __init__(self, field: str, value: Any, allowed: str, detail: str = "") -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        shown = repr(value)
        if len(shown) > 120:
            shown = shown[:117] + "..."
        message = f"{field} = {shown} is not allowed: {allowed}"
        if detail:
            message += f" ({detail})"
        super().__init__(message)
