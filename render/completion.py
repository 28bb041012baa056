"""The model's completion text as the side panels show it: cleaned, wrapped, and synchronised with the step shown.

Synchronisation: on the answer's agent lines (``agent 0: R R D``, ``A1 UURD``) every action token gets a span,
so the viewers can highlight, for step ``t``, the token each agent's line gives for that step and scroll to it.
Finding those tokens is a display aid, not parsing: the plan that was judged is ``episode.plan`` (made by
``policy.parsing``); when a line does not look like an action list nothing on it is highlighted.
"""

from __future__ import annotations

from dataclasses import dataclass

from policy.parsing import line_action_spans

MAX_SHOWN_CHARS = 200_000  # longer texts show their start and their end (where the answer is), cut in between
_HEAD_CHARS = 40_000
_TAB = 4

# Control characters other than newline and tab would draw as boxes or break the font renderer.
_CONTROL = {code: "?" for code in (*range(0, 9), *range(11, 32), 127)}

Span = tuple[int, int, int]  # (line, start column, end column) in the cleaned text's lines


@dataclass(frozen=True)
class DisplayLine:
    """One wrapped line: ``text`` is columns ``start .. start + len(text)`` of source line ``line``."""

    line: int
    start: int
    text: str


def clean_text(text: str) -> str:
    """Tabs expanded, control characters shown as ``?``, the middle of an over-long text cut out."""
    if len(text) > MAX_SHOWN_CHARS:
        tail = MAX_SHOWN_CHARS - _HEAD_CHARS
        cut = len(text) - MAX_SHOWN_CHARS
        text = f"{text[:_HEAD_CHARS]}\n[... {cut} characters not shown ...]\n{text[-tail:]}"
    return text.translate(_CONTROL).expandtabs(_TAB)


def action_spans(lines: list[str], n_agents: int) -> dict[int, list[Span]]:
    """For each agent, the spans of its action tokens on the last line that lists them.

    A line counts when it starts with an agent label (``policy.parsing.AGENT_LINE``, the parser's own) and every
    word after the label is an action word (up, down, left, right, wait) or a run of action letters (U D L R W,
    one span per letter): ``policy.parsing.line_action_spans``.
    """
    spans: dict[int, list[Span]] = {}
    for number, line in enumerate(lines):
        found = line_action_spans(line)
        if found is not None and found[0] < n_agents:
            spans[found[0]] = [(number, start, end) for start, end in found[1]]  # a later line wins: the answer
    return spans


class CompletionText:
    """A completion prepared for a panel.

    Attributes:
        lines: the cleaned text's lines.
        spans: agent -> spans of its action tokens (see :func:`action_spans`).
    """

    def __init__(self, text: str | None, n_agents: int) -> None:
        self.lines = clean_text(text).split("\n") if text else []
        self.spans = action_spans(self.lines, n_agents)
        self._wrapped: dict[int, list[DisplayLine]] = {}

    def __bool__(self) -> bool:
        return bool(self.lines)

    def highlights(self, step: int) -> list[tuple[int, Span]]:
        """``(agent, span)`` of the token for step ``step`` (1-based; none at step 0) of every agent that has one."""
        if step < 1:
            return []
        return [(agent, spans[step - 1]) for agent, spans in sorted(self.spans.items()) if step - 1 < len(spans)]

    def wrapped(self, width: int) -> list[DisplayLine]:
        """The lines wrapped at ``width`` columns (hard wrap: completions are mostly plans and code)."""
        width = max(8, width)
        lines = self._wrapped.get(width)
        if lines is None:
            lines = []
            for number, line in enumerate(self.lines):
                if not line:
                    lines.append(DisplayLine(number, 0, ""))
                for start in range(0, len(line), width):
                    lines.append(DisplayLine(number, start, line[start : start + width]))
            self._wrapped = {width: lines}  # one width at a time: a resize drops the old wrapping
        return lines

    def display_index(self, width: int, span: Span) -> int:
        """The wrapped line that shows ``span``'s start."""
        line, start, _ = span
        for index, shown in enumerate(self.wrapped(width)):
            if shown.line == line and shown.start <= start < shown.start + max(len(shown.text), 1):
                return index
        return 0
