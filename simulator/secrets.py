"""The secrets the project holds, and the one redaction every text it prints or stores passes.

A secret is held by the code that reads it (the OpenAI-compatible backend holds its API key: :func:`hold`); from
then on :func:`redact` replaces it, and anything shaped like a credential (a bearer token, ``sk-...``,
``AIza...``), with :data:`HIDDEN` in a text. The sinks call it: run records (``curriculum.loop.records
.write_record``), replay episodes (``replays.writer.ReplayWriter``), the run's log lines and the command line's
error line. A process that holds no secret pays one set lookup per text.
"""

from __future__ import annotations

import re

HIDDEN = "<hidden>"
"""What a secret reads as wherever the project prints or stores it."""

# Things shaped like credentials that a server may echo back (OpenAI-style sk-..., Google AIza..., bearer tokens).
KEY_SHAPES = re.compile(r"(Bearer\s+)\S+|\bsk-[-_A-Za-z0-9]{12,}|\bAIza[-_A-Za-z0-9]{20,}")
SHORT_SECRET = 8
"""A value shorter than this (a placeholder such as ``EMPTY`` for a server that needs no key) is not held: hidden
everywhere, ``x`` would hide every lone x the project writes. The backend still hides it in its own messages."""

_HELD: set[str] = set()


def hold(secret: str) -> None:
    """Redact ``secret`` from every text :func:`redact` sees from now on, in this process (one shorter than
    :data:`SHORT_SECRET`: nothing)."""
    if isinstance(secret, str) and len(secret) >= SHORT_SECRET:
        _HELD.add(secret)


def holding() -> bool:
    """Whether this process holds any secret."""
    return bool(_HELD)


def redact(text: str, *, shapes: bool = True) -> str:
    """``text`` with every held secret, and (``shapes``) every credential-shaped token, replaced by
    :data:`HIDDEN`; unchanged when nothing is held and ``shapes`` is false."""
    for secret in sorted(_HELD, key=len, reverse=True):  # a key that contains another is hidden whole
        text = text.replace(secret, HIDDEN)
    if shapes:
        text = KEY_SHAPES.sub(lambda match: (match.group(1) or "") + HIDDEN, text)
    return text


def redacted_where_held(text: str) -> str:
    """:func:`redact` when this process holds a secret, else ``text`` as it is (the sinks' fast path: a model's
    own words that look like a key are left alone when no key was ever in this process)."""
    return redact(text) if _HELD else text


__all__ = ["HIDDEN", "KEY_SHAPES", "SHORT_SECRET", "hold", "holding", "redact", "redacted_where_held"]
