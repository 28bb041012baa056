"""pygame drawing of one frame: the frozen lake, the agents' trails, the failure markers, the agents, the side
panel with the step's sentences and the legend, the help overlay.

:func:`draw_frame` draws a :class:`FrameView` onto any ``pygame.Surface`` (a window, or an off-screen surface for
PNG and GIF export) and returns the :class:`Layout` it used. It reads nothing but its arguments; a
:class:`DrawCache` keeps what does not change between frames (the board with its ice, holes and goals, rendered
text, fonts), so an animation frame is one blit of the board, the agents, the markers and one blit of the panel.

Picture contract (the tests check these pixel facts):

* a hole's centre pixel is exactly ``colors.HOLE``; the disc of agent ``k`` is filled with ``colors.agent_color(k)``
  (its index is written in the middle, so sample below the centre);
* every failure marker is drawn in exactly ``colors.FAILURE``, and nothing else is: a frame has pixels of that
  colour if and only if its step has a failure (illegal move, hole, vertex or edge conflict, goal not reached);
* each goal is a square frame in its agent's colour; fallen agents are drawn small and sunk in their hole;
* with trails on, agent ``k``'s path so far is drawn in exactly ``colors.trail_color(k)`` through the centres of
  the cells it stood on (under the markers and the agents);
* the panel states every event of the step in a plain sentence (``Scene.sentences``) and holds the legend: each
  agent's colour by name and a sample of each marker, drawn in ``colors.BAD`` so that only a failure on the
  board is ever ``colors.FAILURE``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

import pygame  # noqa: E402 - after silencing pygame's banner
import pygame.gfxdraw  # noqa: E402

from render import colors as P  # noqa: E402
from render.completion import CompletionText  # noqa: E402
from render.source import Fact  # noqa: E402
from render.timeline import MARKER_MEANINGS, TWO_CELL_GLYPHS, VERTEX, Scene, interpolate, spread  # noqa: E402
from simulator import constants as C  # noqa: E402
from simulator.types import Instance  # noqa: E402

DEFAULT_SIZE = (1200, 760)  # window and export size in pixels
MIN_PANEL_WINDOW = 560  # narrower windows show the board alone
PAD = 14  # pixels between the window's edge and the board
CAPTION_SIZE = 13  # font size of the sentences' strip of a frame without the panel
CAPTION_H = 3 * (CAPTION_SIZE + 5) + 6  # that strip: three lines of sentences

HELP_LINES = (
    ("space", "play / pause"),
    ("left / right", "previous / next step"),
    ("home / end", "first / last step"),
    ("up / down", "faster / slower"),
    ("n / p", "next / previous episode"),
    ("f", "failures only (toggle)"),
    ("t", "path trails (toggle)"),
    ("pgup / pgdn, wheel", "scroll the completion"),
    ("s", "save this frame as PNG"),
    ("h", "this help"),
    ("q / esc", "quit"),
)


@dataclass
class FrameView:
    """Everything one frame shows.

    Fields:
        scene: the board's transition (see ``render.timeline.Scene``); ``alpha`` in [0, 1] is how far into it.
        facts: the side panel's ``(label, value, tone)`` lines; ``title`` heads the panel.
        completion: the model's text, or None; ``scroll`` is its first wrapped line shown, and with ``follow``
            the panel scrolls to the tokens of the step shown instead.
        status: the panel's bottom line (playing, speed, filter); ``message`` a short notice over the board.
        show_help: draw the key help over everything. ``panel``: draw the side panel at all. ``key_hint``:
            end the status line with "h: help" (a window has keys, an exported image does not).
        trails: draw each agent's path so far, faintly in its colour (where ``scene.trail`` is known).

    The panel also states every event of the step in a plain sentence (``Scene.sentences``: a step with several
    failures names each) and holds the legend: each agent's colour by name, and what each marker means. A
    window too narrow for the panel writes the sentences over the top of the board instead.
    """

    scene: Scene
    alpha: float = 1.0
    facts: Sequence[Fact] = ()
    title: str = "MAPF-FrozenLake"
    completion: CompletionText | None = None
    scroll: int = 0
    follow: bool = True
    status: str = ""
    message: str | None = None
    show_help: bool = False
    panel: bool = True
    key_hint: bool = True  # "h: help" in the status line (not in exported images)
    trails: bool = False


@dataclass
class Layout:
    """Where a frame put things (pixels). ``scroll`` is the completion's first line actually shown."""

    size: tuple[int, int]
    cell: int
    origin: tuple[int, int]  # top-left pixel of cell (0, 0)
    board: pygame.Rect
    panel: pygame.Rect | None
    scroll: int = 0
    visible_lines: int = 0
    completion_lines: int = 0
    legend: pygame.Rect | None = None  # the panel's legend (agents' colours, markers), in window pixels

    def cell_center(self, row: float, col: float) -> tuple[int, int]:
        """Pixel at the centre of cell (row, col) (fractions allowed)."""
        return (int(self.origin[0] + (col + 0.5) * self.cell), int(self.origin[1] + (row + 0.5) * self.cell))

    def cell_rect(self, row: int, col: int) -> pygame.Rect:
        return pygame.Rect(self.origin[0] + col * self.cell, self.origin[1] + row * self.cell, self.cell, self.cell)


def compute_layout(size: tuple[int, int], height: int, width: int, panel: bool = True) -> Layout:
    """Fit an ``height x width`` map and the panel into ``size``; cells are square, at least 2 pixels.

    Half a cell is kept free around the map so an off-grid move has room to be drawn. Without the panel a strip
    of ``CAPTION_H`` pixels at the top is kept for the step's sentences, so they never cover a marker.
    """
    window_w, window_h = size
    panel_rect = None
    board_w = window_w
    if panel and window_w >= MIN_PANEL_WINDOW:
        panel_w = min(480, max(280, int(window_w * 0.36)))
        panel_rect = pygame.Rect(window_w - panel_w, 0, panel_w, window_h)
        board_w = window_w - panel_w
    top = 0 if panel_rect is not None else min(CAPTION_H, window_h // 4)  # the sentences' strip
    avail_w, avail_h = max(1, board_w - 2 * PAD), max(1, window_h - top - 2 * PAD)
    cell = max(2, int(min(avail_w / (width + 1), avail_h / (height + 1))))
    origin = ((board_w - cell * width) // 2, top + (window_h - top - cell * height) // 2)
    board = pygame.Rect(origin[0], origin[1], cell * width, cell * height)
    return Layout((window_w, window_h), cell, origin, board, panel_rect)


PanelDrawing = tuple[pygame.Surface, int, int, int, pygame.Rect]  # panel, scroll, visible, total lines, legend


class DrawCache:
    """Fonts, rendered text and board backgrounds kept between frames (bounded). One per window or exporter."""

    def __init__(self) -> None:
        if not pygame.font.get_init():
            pygame.font.init()
        self._fonts: dict[tuple[str, int], pygame.font.Font] = {}
        self._texts: dict[tuple[str, str, int, P.RGB], pygame.Surface] = {}
        self._boards: dict[tuple[Instance, int], pygame.Surface] = {}
        # whole panels keyed by what they show, and overlays by window size (see _panel and _help_overlay)
        self.panels: dict[tuple[object, ...], PanelDrawing] = {}
        self.overlays: dict[tuple[str, tuple[int, int]], pygame.Surface] = {}
        self._font_paths = {
            "ui": pygame.font.match_font("dejavusans") or None,
            "bold": pygame.font.match_font("dejavusans", bold=True) or None,
            "mono": pygame.font.match_font("dejavusansmono") or None,
        }

    def font(self, role: str, size: int) -> pygame.font.Font:
        key = (role, size)
        font = self._fonts.get(key)
        if font is None:
            font = self._fonts[key] = pygame.font.Font(self._font_paths[role], size)
        return font

    def text(self, text: str, role: str, size: int, color: P.RGB) -> pygame.Surface:
        key = (text, role, size, color)
        surface = self._texts.get(key)
        if surface is None:
            if len(self._texts) > 8192:  # completions scroll through many lines: keep the cache bounded
                self._texts.clear()
            surface = self._texts[key] = self.font(role, size).render(text, True, color)
        return surface

    def board(self, scene: Scene, cell: int) -> pygame.Surface:
        key = (scene.instance, cell)
        surface = self._boards.get(key)
        if surface is None:
            if len(self._boards) >= 8:
                self._boards.clear()
            surface = self._boards[key] = _draw_board(self, scene.instance, cell)
        return surface


# --- the board ---------------------------------------------------------------------------------------------
def _draw_board(cache: DrawCache, instance: Instance, cell: int) -> pygame.Surface:
    """The still part of the board: ice, holes, goals, cell lines (drawn once per map and cell size)."""
    height, width = instance.height, instance.width
    surface = pygame.Surface((width * cell, height * cell))
    surface.fill(P.ICE)
    grid = instance.grid
    for r in range(height):
        for c in range(width):
            rect = pygame.Rect(c * cell, r * cell, cell, cell)
            if grid[r, c] == C.HOLE:
                _draw_hole(surface, rect)
            elif (r + c) % 2:
                surface.fill(P.ICE_ALT, rect)
    if cell >= 8:
        for r in range(height + 1):
            pygame.draw.line(surface, P.ICE_LINE, (0, r * cell), (width * cell, r * cell))
        for c in range(width + 1):
            pygame.draw.line(surface, P.ICE_LINE, (c * cell, 0), (c * cell, height * cell))
    for k, (r, c) in enumerate(instance.goals.tolist()):
        _draw_goal(cache, surface, pygame.Rect(c * cell, r * cell, cell, cell), k)
    return surface


def _draw_hole(surface: pygame.Surface, rect: pygame.Rect) -> None:
    # Open water in broken ice: a rounded square, so a hole never looks like an agent's disc.
    cell = rect.width
    surface.fill(P.ICE, rect)
    rim = rect.inflate(-2 * max(0, cell // 14), -2 * max(0, cell // 14))
    pygame.draw.rect(surface, P.HOLE_RIM, rim, border_radius=max(0, cell // 4))
    water = rim.inflate(-max(2, cell // 7), -max(2, cell // 7))
    pygame.draw.rect(surface, P.HOLE, water, border_radius=max(0, cell // 5))
    if cell >= 16:  # ripples on the water, away from the centre so the centre keeps the hole's colour
        ripple = P.dimmed(P.ICE, 0.3)
        for i, length in ((1, 0.30), (2, 0.18)):
            y = water.bottom - i * max(3, cell // 7)
            x = water.centerx + (i - 1) * cell // 10
            pygame.draw.line(surface, ripple, (x - int(cell * length / 2), y), (x + int(cell * length / 2), y))


def _draw_goal(cache: DrawCache, surface: pygame.Surface, rect: pygame.Rect, agent: int) -> None:
    color = P.agent_color(agent)
    cell = rect.width
    inset = max(1, cell // 10)
    frame = rect.inflate(-2 * inset, -2 * inset)
    thickness = max(1, cell // 14)
    pygame.draw.rect(surface, color, frame, thickness, border_radius=max(0, cell // 8))
    if cell >= 24:  # a small flag with the agent's index in the goal's corner
        size = max(9, cell // 4)
        label = cache.text(f"G{agent}", "bold", size, color)
        surface.blit(label, (frame.left + thickness + 1, frame.top + thickness))


def _draw_agent(cache: DrawCache, surface: pygame.Surface, center: tuple[int, int], cell: int, agent: int,
                fallen: float, outline: P.RGB | None) -> None:
    """A disc in the agent's colour with its index; ``fallen`` in [0, 1] shrinks and dims it into a hole."""
    color = P.agent_color(agent)
    radius = max(1, int(cell * 0.36 * (1.0 - 0.45 * fallen)))
    if fallen > 0:
        color = P.dimmed(color, 1.0 - 0.55 * fallen)
    x, y = center
    if radius >= 3:
        pygame.gfxdraw.filled_circle(surface, x, y, radius, color)
        pygame.gfxdraw.aacircle(surface, x, y, radius, color)
        ring = outline or (20, 24, 32)
        pygame.draw.circle(surface, ring, center, radius, max(1, cell // 18) if outline is None else max(2, cell // 12))
    else:
        pygame.draw.circle(surface, color, center, radius)
    if cell >= 14 and fallen < 1.0:
        label = cache.text(str(agent), "bold", max(8, int(cell * 0.34)), P.text_on(color))
        surface.blit(label, label.get_rect(center=(x, y - max(1, cell // 40))))
    elif cell >= 14:
        label = cache.text(str(agent), "bold", max(8, int(cell * 0.26)), P.text_on(color))
        surface.blit(label, label.get_rect(center=(x, y)))


def _draw_cross(surface: pygame.Surface, center: tuple[int, int], half: int, width: int, color: P.RGB) -> None:
    x, y = center
    pygame.draw.line(surface, color, (x - half, y - half), (x + half, y + half), width)
    pygame.draw.line(surface, color, (x - half, y + half), (x + half, y - half), width)


def _glyph_arc(surface: pygame.Surface, center: tuple[int, int], other: tuple[int, int] | None, cell: int,
               big: int, thick: int, color: P.RGB) -> None:
    x, y = center
    pygame.draw.arc(surface, color, pygame.Rect(x - cell // 4, y - cell // 2, cell // 2, cell // 2), 0.0, math.pi,
                    max(1, cell // 16))


def _glyph_ring_cross(surface: pygame.Surface, center: tuple[int, int], other: tuple[int, int] | None, cell: int,
                      big: int, thick: int, color: P.RGB) -> None:
    pygame.draw.circle(surface, color, center, int(big * 0.46), thick)
    _draw_cross(surface, center, int(big * 0.22), thick, color)


def _glyph_burst(surface: pygame.Surface, center: tuple[int, int], other: tuple[int, int] | None, cell: int,
                 big: int, thick: int, color: P.RGB) -> None:
    x, y = center
    pygame.draw.circle(surface, color, center, int(big * 0.5), thick)
    for i in range(8):  # a burst: two agents hit each other here
        angle = i * math.pi / 4
        inner, outer = big * 0.52, big * 0.68
        pygame.draw.line(
            surface, color,
            (x + inner * math.cos(angle), y + inner * math.sin(angle)),
            (x + outer * math.cos(angle), y + outer * math.sin(angle)), max(1, thick // 2),
        )


def _glyph_swap(surface: pygame.Surface, center: tuple[int, int], other: tuple[int, int] | None, cell: int,
                big: int, thick: int, color: P.RGB) -> None:
    x, y = center
    b = other if other is not None else center
    mid = ((x + b[0]) // 2, (y + b[1]) // 2)
    half = max(5, int(big * 0.24))
    diamond = [(mid[0], mid[1] - half), (mid[0] + half, mid[1]), (mid[0], mid[1] + half), (mid[0] - half, mid[1])]
    pygame.draw.polygon(surface, color, diamond)
    pygame.draw.line(surface, color, center, b, max(1, thick // 2))
    if cell >= 20:
        bang = pygame.Rect(0, 0, max(2, cell // 16), max(4, half))
        bang.center = (mid[0], mid[1] - half // 5)
        surface.fill((255, 255, 255), bang)


def _glyph_off_map(surface: pygame.Surface, center: tuple[int, int], other: tuple[int, int] | None, cell: int,
                   big: int, thick: int, color: P.RGB) -> None:
    x, y = center
    if other is None:
        pygame.draw.rect(surface, color, pygame.Rect(x - cell // 2, y - cell // 2, cell, cell), thick)
        return
    dx, dy = (other[0] - x) / max(1, cell), (other[1] - y) / max(1, cell)
    edge = (x + dx * cell * 0.5, y + dy * cell * 0.5)  # where the map ends
    tip = (x + dx * cell * 0.95, y + dy * cell * 0.95)
    tail = (x + dx * cell * 0.38, y + dy * cell * 0.38)  # from the disc's rim, not its label
    pygame.draw.line(surface, color, tail, tip, thick)
    _draw_cross(surface, (int(tip[0]), int(tip[1])), max(3, big // 6), thick, color)
    pygame.draw.circle(surface, color, (int(edge[0]), int(edge[1])), max(2, thick))


def _glyph_dashed_ring(surface: pygame.Surface, center: tuple[int, int], other: tuple[int, int] | None, cell: int,
                       big: int, thick: int, color: P.RGB) -> None:
    x, y = center
    radius = int(big * 0.44)
    for i in range(0, 12, 2):  # a dashed ring: the agent is still short of its goal
        pygame.draw.arc(surface, color, pygame.Rect(x - radius, y - radius, 2 * radius, 2 * radius),
                        i * math.pi / 6, (i + 1) * math.pi / 6, max(1, thick // 2 + 1))


# The failure table's glyphs (``simulator.failures.Kind.glyph``), each drawn by one function:
# (surface, centre, other cell's centre or None, cell, big, line thickness, colour).
Glyph = Callable[[pygame.Surface, tuple[int, int], tuple[int, int] | None, int, int, int, P.RGB], None]
_GLYPHS: dict[str, Glyph] = {"arc": _glyph_arc, "ring_cross": _glyph_ring_cross, "burst": _glyph_burst,
                             "swap": _glyph_swap, "off_map": _glyph_off_map, "dashed_ring": _glyph_dashed_ring}


def _draw_marker(surface: pygame.Surface, kind: str, center: tuple[int, int], other: tuple[int, int] | None,
                 cell: int, big: int, color: P.RGB) -> None:
    """One marker of ``kind`` at pixel ``center`` (its cell's centre); ``other`` is the pixel centre of the other
    cell (the far end of a swap, the off-map cell of an illegal move) or None; ``big`` its drawn size. The board
    and the legend both draw through here, so a legend's sample is the marker's own shape."""
    glyph = C.KIND_BY_NAME[kind].glyph
    assert glyph is not None  # every kind with a marker has its glyph (the failure table's rule)
    _GLYPHS[glyph](surface, center, other, cell, big, max(2, big // 10), color)


def _draw_markers(layout: Layout, surface: pygame.Surface, scene: Scene, alpha: float) -> None:
    cell = layout.cell
    big = max(cell, 22)  # markers keep a readable size on large maps with small cells
    for marker in scene.markers:
        if marker.is_failure and alpha < 0.5:
            continue  # a failure shows from the moment the agents meet (halfway through the move)
        other = layout.cell_center(*marker.other) if marker.other is not None else None
        color = P.FAILURE if marker.is_failure else P.SLIP
        _draw_marker(surface, marker.kind, layout.cell_center(*marker.cell), other, cell, big, color)


def _draw_trails(layout: Layout, surface: pygame.Surface, scene: Scene, alpha: float) -> None:
    """Where each agent has been so far, as a faint line in its colour (``colors.trail_color``) through the
    centres of the cells it stood on, ending where the agent is now (mid-move too). Each agent's line is shifted
    a little off the centre, so two agents that used the same cells both show."""
    trail = scene.trail
    if trail is None or not len(trail):
        return
    cell = layout.cell
    width = max(1, cell // 9)
    dot = max(1, (width + 1) // 2 + 1)
    # the cells up to the step before, then the point the agent has reached in this step
    now = scene.before + (scene.after - scene.before) * min(max(alpha, 0.0), 1.0)
    history = np.concatenate([trail[:-1], now[None]], axis=0) if len(trail) > 1 else trail.astype(np.float64)
    ox, oy = layout.origin
    for k in range(scene.instance.n_agents):
        shift = ((k % 4) - 1.5) * cell * 0.07
        xs = ox + (history[:, k, 1] + 0.5) * cell + shift
        ys = oy + (history[:, k, 0] + 0.5) * cell + shift
        points = list(zip(xs.astype(int).tolist(), ys.astype(int).tolist()))
        color = P.trail_color(k)
        if len(points) > 1:
            pygame.draw.lines(surface, color, False, points, width)
        for point in dict.fromkeys(points):  # round joints, and a dot on every cell stood on
            pygame.draw.circle(surface, color, point, dot)


def _spread(scene: Scene, points: np.ndarray, alpha: float) -> np.ndarray:
    """Agents that share a cell (a vertex conflict) are drawn side by side once they meet (``timeline.spread``)."""
    return points if alpha < 0.5 else spread(scene, points)


def draw_board(surface: pygame.Surface, layout: Layout, scene: Scene, alpha: float, cache: DrawCache,
               trails: bool = False) -> None:
    """The lake at ``alpha`` into ``scene``: background, the path trails (with ``trails``, where the scene knows
    its history), markers, then the agents where the interpolation puts them, so a marker never hides who failed
    (the agent and its number sit above the hole's cross or the swap's line)."""
    surface.blit(cache.board(scene, layout.cell), layout.origin)
    if trails:
        _draw_trails(layout, surface, scene, alpha)
    _draw_markers(layout, surface, scene, alpha)
    points = _spread(scene, interpolate(scene, alpha), alpha)
    failing = set(scene.marked_agents()) if alpha >= 0.5 else set()
    shared = {k for marker in scene.markers if marker.kind == VERTEX for k in marker.agents} if alpha >= 0.5 else set()
    order = sorted(range(scene.instance.n_agents), key=lambda k: (scene.status_after[k] != C.FALLEN, k))
    for k in order:
        was_fallen = scene.status_before[k] == C.FALLEN
        falls_now = scene.status_after[k] == C.FALLEN and not was_fallen
        fallen = 1.0 if was_fallen else (max(0.0, alpha - 0.5) * 2.0 if falls_now else 0.0)
        center = layout.cell_center(points[k, 0], points[k, 1])
        cell = int(layout.cell * 0.72) if k in shared else layout.cell
        _draw_agent(cache, surface, center, cell, k, fallen, P.FAILURE if k in failing else None)


# --- the side panel ----------------------------------------------------------------------------------------
def _fit(cache: DrawCache, text: str, role: str, size: int, width: int) -> str:
    """``text`` shortened with an ellipsis to fit ``width`` pixels."""
    font = cache.font(role, size)
    if font.size(text)[0] <= width:
        return text
    low, high = 0, len(text)
    while low < high:
        mid = (low + high + 1) // 2
        if font.size(text[:mid] + "…")[0] <= width:
            low = mid
        else:
            high = mid - 1
    return text[:low] + "…"


def _wrap(cache: DrawCache, text: str, role: str, size: int, width: int) -> list[str]:
    """``text`` broken at spaces into lines of at most ``width`` pixels (a word too long alone is cut)."""
    font = cache.font(role, size)
    lines: list[str] = []
    line = ""
    for word in text.split(" "):
        candidate = f"{line} {word}" if line else word
        if font.size(candidate)[0] <= width or not line:
            line = candidate
        else:
            lines.append(line)
            line = word
    lines.append(line)
    return [_fit(cache, shown, role, size, width) for shown in lines]


def event_lines(cache: DrawCache, scene: Scene, size: int, width: int, limit: int) -> list[tuple[str, P.RGB]]:
    """The step's sentences (``Scene.sentences``) wrapped to ``width`` pixels, each line with its colour; past
    ``limit`` lines the last one says how many events are left out."""
    lines: list[tuple[str, P.RGB]] = []
    sentences = scene.sentences()
    for index, (sentence, is_failure) in enumerate(sentences):
        wrapped = _wrap(cache, sentence, "ui", size, width)
        if len(lines) + len(wrapped) > limit:
            left = len(sentences) - index
            lines = lines[: max(0, limit - 1)]
            lines.append((f"… and {left} more event{'s' if left > 1 else ''} at this step", P.BAD))
            break
        lines.extend((line, P.BAD if is_failure else P.SLIP) for line in wrapped)
    return lines




def _draw_legend(surface: pygame.Surface, scene: Scene, x0: int, y: int, width: int, ui: int, cache: DrawCache,
                 trails: bool = False, bottom: int | None = None) -> int:
    """The legend: one chip per agent in its colour (named, up to ``colors.NAMED_COLORS`` agents) with a mark
    for on goal or fallen, then a sample of each marker with its meaning (and of a trail, with ``trails``), as
    many rows of them as end above ``bottom``; returns the y below it. The samples are drawn in ``colors.BAD``,
    not ``colors.FAILURE``: only a failure on the board is ever drawn in that colour."""
    chip = ui + 5
    small = max(10, ui - 2)
    marks = {C.ON_GOAL: "✓", C.FALLEN: "✗"}
    n_agents = scene.instance.n_agents
    named = n_agents <= P.NAMED_COLORS
    mark_w = cache.font("ui", ui).size("✓")[0]
    name_w = max(cache.font("ui", small).size(P.agent_color_name(k))[0] for k in range(n_agents)) + 6 if named else 0
    item_w = chip + name_w + mark_w + 12
    per_row = max(1, width // item_w)
    for k in range(n_agents):
        row, col = divmod(k, per_row)
        x, top = x0 + col * item_w, y + row * (chip + 4)
        color = P.agent_color(k)
        pygame.draw.circle(surface, color, (x + chip // 2, top + chip // 2), chip // 2)
        label = cache.text(str(k), "bold", max(8, chip // 2 + 1), P.text_on(color))
        surface.blit(label, label.get_rect(center=(x + chip // 2, top + chip // 2)))
        if named:
            name = cache.text(P.agent_color_name(k), "ui", small, P.TEXT_DIM)
            surface.blit(name, name.get_rect(midleft=(x + chip + 4, top + chip // 2)))
        mark = marks.get(int(scene.status_after[k]))
        if mark:
            tone = P.GOOD if mark == "✓" else P.BAD
            surface.blit(cache.text(mark, "ui", ui, tone), (x + chip + 2 + name_w, top + 1))
    rows = (n_agents + per_row - 1) // per_row
    y += rows * (chip + 4) + 4
    # the markers, two to a row where they fit
    icon = small + 6
    meanings = list(MARKER_MEANINGS) + ([("trail", "path so far")] if trails else [])
    text_w = max(cache.font("ui", small).size(text)[0] for _, text in meanings)
    slot = icon + icon // 2  # room for the shapes that reach into a second cell
    item_w = slot + 4 + text_w + 8
    per_row = max(1, width // item_w)
    line_h = icon + 4
    if bottom is not None:  # a short panel keeps the rows that fit (the completion needs the rest)
        meanings = meanings[: max(0, (bottom - y) // line_h) * per_row]
    for i, (kind, text) in enumerate(meanings):
        row, col = divmod(i, per_row)
        x, top = x0 + col * item_w, y + row * line_h
        center = (x + icon // 2, top + icon // 2)
        if kind == "trail":
            for j, step_x in enumerate(range(0, slot - 2, max(3, icon // 3))):
                pygame.draw.circle(surface, P.trail_color(j % max(1, n_agents)), (x + 2 + step_x, center[1]),
                                   max(2, icon // 7))
        elif C.KIND_BY_NAME[kind].glyph in TWO_CELL_GLYPHS:  # the other "cell" is one icon to the right
            _draw_marker(surface, kind, center, (center[0] + icon * 4 // 5, center[1]), icon * 4 // 5, icon, P.BAD)
        elif not C.KIND_BY_NAME[kind].is_failure:  # a slip's arc sits high in its cell: lower it into the row
            _draw_marker(surface, kind, (center[0], center[1] + icon // 3), None, icon, icon, P.SLIP)
        else:
            _draw_marker(surface, kind, center, None, icon, icon, P.BAD)
        label = cache.text(text, "ui", small, P.TEXT_DIM)
        surface.blit(label, label.get_rect(midleft=(x + slot + 4, center[1])))
    return y + ((len(meanings) + per_row - 1) // per_row) * line_h


def _draw_panel(view: FrameView, rect: pygame.Rect, cache: DrawCache) -> PanelDrawing:
    """The panel on its own surface; returns it with the completion's (scroll, visible lines, total lines) and
    the legend's rectangle (panel pixels)."""
    surface = pygame.Surface(rect.size)
    surface.fill(P.PANEL)
    pygame.draw.line(surface, P.PANEL_LINE, (0, 0), (0, rect.height), 2)
    margin, y = 16, 14
    inner = rect.width - 2 * margin
    ui = 15 if rect.height >= 600 else 13
    surface.blit(cache.text(_fit(cache, view.title, "bold", ui + 3, inner), "bold", ui + 3, P.ACCENT), (margin, y))
    y += ui + 14
    label_w = max(cache.font("ui", ui).size(label)[0] for label, _, _ in view.facts) + 12 if view.facts else 0
    tones = {"good": P.GOOD, "bad": P.BAD}
    for label, value, tone in view.facts:
        surface.blit(cache.text(label, "ui", ui, P.TEXT_DIM), (margin, y))
        shown = _fit(cache, value, "ui", ui, inner - label_w)
        surface.blit(cache.text(shown, "ui", ui, tones.get(tone, P.TEXT)), (margin + label_w, y))
        y += ui + 7
    events = event_lines(cache, view.scene, ui, inner, max(3, rect.height // 4 // (ui + 5)))
    if events:
        y += 2
        for line, color in events:
            surface.blit(cache.text(line, "ui", ui, color), (margin, y))
            y += ui + 5
    status_h = ui + 16
    bottom = rect.height - status_h
    legend_top = y + 4
    room = bottom - 16 - ((ui + 8 + 2 * (ui + 3)) if view.completion else ui + 4)  # a header and two lines
    y = _draw_legend(surface, view.scene, margin, legend_top, inner, ui, cache, view.trails, room)
    legend = pygame.Rect(margin, legend_top, inner, y - legend_top)
    y += 6
    pygame.draw.line(surface, P.PANEL_LINE, (margin, y), (rect.width - margin, y))
    y += 10
    scroll = visible = total = 0
    completion = view.completion
    if completion:
        mono = 13 if rect.height >= 600 else 12
        char_w, line_h = cache.font("mono", mono).size("M")[0], mono + 5
        columns = max(8, (inner - 10) // max(1, char_w))
        lines = completion.wrapped(columns)
        total = len(lines)
        top = y + ui + 8
        visible = max(1, (bottom - top - 6) // line_h)
        highlights = completion.highlights(view.scene.step)
        scroll = view.scroll
        if view.follow and highlights:
            first = completion.display_index(columns, highlights[0][1])
            last = completion.display_index(columns, highlights[-1][1])
            if not (scroll <= first and last < scroll + visible):
                scroll = max(0, first - visible // 3)
        scroll = max(0, min(scroll, total - visible))
        header = f"completion  (lines {scroll + 1}-{min(total, scroll + visible)} of {total})"
        surface.blit(cache.text(_fit(cache, header, "ui", ui, inner), "ui", ui, P.TEXT_DIM), (margin, y))
        by_line: dict[int, list[tuple[int, int, int]]] = {}
        for agent, (line_index, start, end) in highlights:
            by_line.setdefault(line_index, []).append((agent, start, end))
        for row, display in enumerate(lines[scroll : scroll + visible]):
            line_y = top + row * line_h
            for agent, start, end in by_line.get(display.line, ()):
                lo, hi = max(start, display.start), min(end, display.start + len(display.text))
                if lo < hi:
                    left = margin + (lo - display.start) * char_w - 1
                    box = pygame.Rect(left, line_y - 1, (hi - lo) * char_w + 2, line_h)
                    surface.fill(P.dimmed(P.agent_color(agent), 0.55, P.PANEL), box)
            if display.text:
                surface.blit(cache.text(display.text, "mono", mono, P.TEXT), (margin, line_y))
        if total > visible:  # a scroll bar
            track = pygame.Rect(rect.width - 7, top, 4, visible * line_h)
            pygame.draw.rect(surface, P.PANEL_LINE, track)
            thumb_h = max(12, track.height * visible // total)
            thumb_y = top + (track.height - thumb_h) * scroll // max(1, total - visible)
            pygame.draw.rect(surface, P.TEXT_DIM, pygame.Rect(track.left, thumb_y, 4, thumb_h))
    else:
        surface.blit(cache.text("no completion text recorded", "ui", ui, P.TEXT_DIM), (margin, y))
    pygame.draw.line(surface, P.PANEL_LINE, (margin, bottom), (rect.width - margin, bottom))
    status = "   ·   ".join(part for part in (view.status, "h: help" if view.key_hint else "") if part)
    status = _fit(cache, status, "ui", ui, inner)
    surface.blit(cache.text(status, "ui", ui, P.TEXT_DIM), (margin, bottom + 8))
    return surface, scroll, visible, total, legend


def _panel(view: FrameView, rect: pygame.Rect, cache: DrawCache) -> PanelDrawing:
    # The panel changes only when the step, the episode, the scroll or the status does: cache it on those.
    key = (rect.size, view.title, tuple(view.facts), id(view.completion), view.scene.step, view.scene.markers,
           view.scroll, view.follow, view.status, view.key_hint, view.trails)
    cached = cache.panels.get(key)
    if cached is None:
        if len(cache.panels) >= 16:
            cache.panels.clear()
        cached = cache.panels[key] = _draw_panel(view, rect, cache)
    return cached


def _help_overlay(size: tuple[int, int], cache: DrawCache) -> pygame.Surface:
    cached = cache.overlays.get(("help", size))
    if cached is not None:
        return cached
    overlay = pygame.Surface(size, pygame.SRCALPHA)
    overlay.fill(P.OVERLAY)
    ui = 18
    key_w = max(cache.font("bold", ui).size(key)[0] for key, _ in HELP_LINES) + 28
    line_h = ui + 12
    box_h = line_h * (len(HELP_LINES) + 2)
    x = max(20, size[0] // 2 - 240)
    y = max(20, (size[1] - box_h) // 2)
    overlay.blit(cache.text("keys", "bold", ui + 4, P.ACCENT), (x, y))
    y += line_h + 8
    for key, what in HELP_LINES:
        overlay.blit(cache.text(key, "bold", ui, P.TEXT), (x, y))
        overlay.blit(cache.text(what, "ui", ui, P.TEXT_DIM), (x + key_w, y))
        y += line_h
    cache.overlays[("help", size)] = overlay
    return overlay


def draw_frame(surface: pygame.Surface, view: FrameView, cache: DrawCache | None = None) -> Layout:
    """Draw ``view`` onto ``surface`` (its whole area) and return the layout used.

    Pure with respect to the game: it reads ``view`` and draws; ``cache`` only saves work between frames.
    """
    cache = cache or DrawCache()
    instance = view.scene.instance
    layout = compute_layout(surface.get_size(), instance.height, instance.width, view.panel)
    surface.fill(P.BACKGROUND)
    draw_board(surface, layout, view.scene, view.alpha, cache, view.trails)
    if layout.panel is not None:
        panel, layout.scroll, layout.visible_lines, layout.completion_lines, legend = _panel(view, layout.panel, cache)
        layout.legend = legend.move(layout.panel.topleft)
        surface.blit(panel, layout.panel.topleft)
    elif view.scene.markers:  # no room for the panel: the step's sentences go in the strip above the board
        size, line_h = CAPTION_SIZE, CAPTION_SIZE + 5
        strip = min(CAPTION_H, layout.size[1] // 4)
        lines = event_lines(cache, view.scene, size, max(40, layout.size[0] - 16), max(1, (strip - 6) // line_h))
        for i, (line, color) in enumerate(lines):
            surface.blit(cache.text(line, "ui", size, color), (8, 4 + i * line_h))
    if view.message:
        text = cache.text(view.message, "ui", 15, P.TEXT)
        box = text.get_rect()
        board_w = layout.panel.left if layout.panel is not None else layout.size[0]
        box.midbottom = (board_w // 2, layout.size[1] - 6)
        surface.fill(P.PANEL, box.inflate(16, 8))
        surface.blit(text, box)
    if view.show_help:
        surface.blit(_help_overlay(layout.size, cache), (0, 0))
    return layout

