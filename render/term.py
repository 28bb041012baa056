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
from simulator.types import Instance

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


ARROW_GLYPHS = {C.UP: "↑", C.DOWN: "↓", C.LEFT: "←", C.RIGHT: "→", C.WAIT: "·"}


def cell_shape(instance: Instance, columns: int, rows: int) -> tuple[int, int]:
    """The largest cell ``(width, height)`` in characters that fits the map into ``columns x rows``
    (at least one line per row and room for the longest token)."""
    token = len(f"{C.SYMBOL_AGENT}{instance.n_agents - 1}") + 2
    for width, height in ((max(token, 7), 3), (max(token, 5), 2)):
        if instance.width * width <= columns and instance.height * height <= rows:
            return width, height
    return token, 1


def board_text(
    scene: Scene,
    selected: int | None = None,
    pending: np.ndarray | None = None,
    cell: tuple[int, int] | None = None,
) -> Text:
    """The board after ``scene``'s step; each map cell is ``cell = (width, height)`` characters (default: one
    line, just wide enough).

    ``selected`` (play mode) underlines that agent; ``pending`` ``(K,)`` shows each moving agent's next move
    as an arrow under it (cells of 3 lines; waits show nothing). Agents of a failure of this step show as
    ``!k`` on red; where two share a cell the lowest index shows. With cells of 3 lines a goal's cell has a
    frame line in its agent's colour above and below, so an agent at home shows inside it.
    """
    instance = scene.instance
    n_agents = instance.n_agents
    width, height = cell or (len(f"{C.SYMBOL_AGENT}{n_agents - 1}") + 2, 1)
    goal_of = {(r, c): k for k, (r, c) in enumerate(instance.goals.tolist())}
    occupant: dict[tuple[int, int], tuple[str, Style, int]] = {}
    marked = set(scene.marked_agents())
    # Lowest index last, so it wins a shared cell; marked agents over unmarked ones.
    for k in sorted(range(n_agents), key=lambda k: (k in marked, -k)):
        where = (int(scene.after[k][0]), int(scene.after[k][1]))
        if k in marked:
            occupant[where] = (f"{C.SYMBOL_MARKED}{k}", _MARKED, k)
        elif scene.status_after[k] == C.FALLEN:
            occupant[where] = (f"{C.SYMBOL_FALLEN}{k}", Style(color=P.hex_color(P.agent_color(k)),
                                                              bgcolor=P.hex_color(P.HOLE), bold=True), k)
        else:
            occupant[where] = (f"{C.SYMBOL_AGENT}{k}", _agent_style(k, k == selected), k)
    middle = height // 2
    text = Text(no_wrap=True, overflow="crop")
    grid = instance.grid
    for r in range(instance.height):
        for line in range(height):
            for c in range(instance.width):
                hole = grid[r, c] == C.HOLE
                ground = _HOLE if hole else (_ICE if (r + c) % 2 == 0 else _ICE_ALT)
                goal = goal_of.get((r, c))
                here = occupant.get((r, c))
                if line == middle:
                    if here is not None:
                        token, style, agent = here
                        pad = width - len(token)
                        chip = 2 if width - len(token) >= 4 else 0  # room for a chip wider than the token
                        text.append(" " * (pad // 2 - chip // 2), ground)
                        text.append(token.center(len(token) + chip), style)
                        text.append(" " * (width - len(token) - chip - (pad // 2 - chip // 2)), ground)
                    elif goal is not None:
                        text.append(f"{C.SYMBOL_GOAL}{goal}".center(width),
                                    ground + Style(color=P.hex_color(P.agent_color(goal)), bold=True))
                    else:
                        text.append((C.SYMBOL_HOLE if hole else C.SYMBOL_ICE).center(width), ground)
                elif goal is not None and height >= 3:
                    bar = "▁" if line < middle else "▔"
                    text.append(" " + bar * (width - 2) + " ", ground + Style(color=P.hex_color(P.agent_color(goal))))
                elif (here is not None and pending is not None and line > middle and pending[here[2]] != C.WAIT
                      and scene.status_after[here[2]] == C.MOVING):
                    text.append(ARROW_GLYPHS[int(pending[here[2]])].center(width), ground + Style(bold=True))
                else:
                    text.append(" " * width, ground)
            if r < instance.height - 1 or line < height - 1:
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
