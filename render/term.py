"""The board and the completion as Rich text, for the Textual apps (``play`` and ``watch --terminal``).

Cells use the symbols of ``simulator.text`` (``.`` ice, ``H`` hole, ``A<k>`` agent, ``G<k>`` goal, ``X<k>``
fallen, ``!<k>`` an agent in a failure) and the palette of ``render.colors``, so the terminal board reads the
same as the prompt text and looks like the pygame window.
"""

from __future__ import annotations

import numpy as np
from rich.style import Style
from rich.text import Text

from render import colors as P
from render.completion import CompletionText
from render.timeline import Scene
from simulator import constants as C

_ICE = Style(color=P.hex_color(P.ICE_LINE), bgcolor=P.hex_color(P.ICE))
_ICE_ALT = Style(color=P.hex_color(P.ICE_LINE), bgcolor=P.hex_color(P.ICE_ALT))
_HOLE = Style(color=P.hex_color(P.dimmed(P.ICE, 0.6)), bgcolor=P.hex_color(P.HOLE), bold=True)
_MARKED = Style(color="#ffffff", bgcolor=P.hex_color(P.FAILURE), bold=True)

LEGEND = (
    f"{C.SYMBOL_ICE} ice   {C.SYMBOL_HOLE} hole   {C.SYMBOL_AGENT}k agent k   {C.SYMBOL_GOAL}k goal of k   "
    f"{C.SYMBOL_FALLEN}k fell in   {C.SYMBOL_MARKED}k failure"
)


def _agent_style(agent: int, selected: bool) -> Style:
    color = P.agent_color(agent)
    style = Style(color=P.hex_color(P.text_on(color)), bgcolor=P.hex_color(color), bold=True)
    return style + Style(underline=True, italic=True) if selected else style


def board_text(scene: Scene, selected: int | None = None) -> Text:
    """The board after ``scene``'s step, one text line per map row, each cell ``width`` characters wide.

    ``selected`` (play mode) underlines that agent. Agents of a failure of this step show as ``!k`` on red;
    where two share a cell the lowest index shows.
    """
    instance = scene.instance
    n_agents = instance.n_agents
    width = len(f"{C.SYMBOL_AGENT}{n_agents - 1}") + 2
    cells: dict[tuple[int, int], tuple[str, Style]] = {}
    for k, (r, c) in enumerate(instance.goals.tolist()):
        cells[(r, c)] = (f"{C.SYMBOL_GOAL}{k}", Style(color=P.hex_color(P.agent_color(k)), bold=True,
                                                      bgcolor=P.hex_color(P.ICE if (r + c) % 2 == 0 else P.ICE_ALT)))
    marked = set(scene.marked_agents())
    # Lowest index last, so it wins a shared cell; marked agents over unmarked ones.
    for k in sorted(range(n_agents), key=lambda k: (k in marked, -k)):
        r, c = int(scene.after[k][0]), int(scene.after[k][1])
        if k in marked:
            cells[(r, c)] = (f"{C.SYMBOL_MARKED}{k}", _MARKED)
        elif scene.status_after[k] == C.FALLEN:
            cells[(r, c)] = (f"{C.SYMBOL_FALLEN}{k}", Style(color=P.hex_color(P.agent_color(k)), bgcolor=P.hex_color(P.HOLE), bold=True))
        else:
            cells[(r, c)] = (f"{C.SYMBOL_AGENT}{k}", _agent_style(k, k == selected))
    text = Text(no_wrap=True, overflow="crop")
    grid = instance.grid
    for r in range(instance.height):
        for c in range(instance.width):
            token, style = cells.get((r, c), (None, None))
            if token is None:
                if grid[r, c] == C.HOLE:
                    token, style = C.SYMBOL_HOLE, _HOLE
                else:
                    token, style = C.SYMBOL_ICE, _ICE if (r + c) % 2 == 0 else _ICE_ALT
            text.append(token.center(width), style)
        if r < instance.height - 1:
            text.append("\n")
    return text


def agent_chip(agent: int) -> Text:
    """``A<k>`` in the agent's colours (for panels and logs)."""
    return Text(f"{C.SYMBOL_AGENT}{agent}", style=_agent_style(agent, False))


def completion_text(completion: CompletionText, step: int, width: int) -> tuple[Text, int | None]:
    """The completion wrapped at ``width`` columns with the step's action tokens highlighted in their agent's
    colour; returns the text and the wrapped line of the first highlight (to scroll to), or None."""
    lines = completion.wrapped(width)
    highlights = completion.highlights(step)
    by_line: dict[int, list[tuple[int, int, int]]] = {}
    for agent, (line, start, end) in highlights:
        by_line.setdefault(line, []).append((agent, start, end))
    text = Text(no_wrap=True, overflow="crop")
    first: int | None = None
    for index, shown in enumerate(lines):
        begin = len(text)
        text.append(shown.text)
        for agent, start, end in by_line.get(shown.line, ()):
            lo, hi = max(start, shown.start), min(end, shown.start + len(shown.text))
            if lo < hi:
                color = P.agent_color(agent)
                text.stylize(Style(bgcolor=P.hex_color(color), color=P.hex_color(P.text_on(color)), bold=True),
                             begin + lo - shown.start, begin + hi - shown.start)
                first = index if first is None else min(first, index)
        if index < len(lines) - 1:
            text.append("\n")
    return text, first


def actions_text(actions: np.ndarray | None) -> str:
    """``0:R  1:W`` for a joint action, or ``-``."""
    if actions is None:
        return "-"
    return "  ".join(f"{k}:{C.ACTION_LETTERS[int(a)]}" for k, a in enumerate(actions))
