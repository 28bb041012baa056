"""A whole episode as one self-contained animated SVG (``mapf-lake watch FILE --svg OUT.svg``).

The file needs nothing beside it (no script, no font file, no image): the lake is drawn once, and everything that
changes is a SMIL animation with ``calcMode="discrete"`` over one shared clock, so any browser plays it and it
loops. Frame ``t`` (``t = 0..T``, step 0 is the starts) begins at ``t / fps`` seconds; the last frame is held at
least ``HOLD_S`` seconds before the loop starts again. Every animation has the same ``dur`` and the frames' key
times, so they stay in step:

* each agent is a ``<g class="agent">`` moved from cell to cell by an ``<animateTransform type="translate">``
  with one value per frame (agents sharing a cell in a collision are drawn side by side, as in the window);
  an agent that falls shrinks and dims from its fall on;
* each failure is a ``<g class="marker">`` (``data-kind``, ``data-step``, ``data-agents``) in ``colors.FAILURE``
  whose opacity is 0 until the key time of its step and 1 from there until the next frame, together with the
  step's plain sentences (``Scene.sentences``: every failure of the step is named);
* with trails, each move is a faint ``<line class="trail">`` in the agent's trail colour that appears at its step;
* a legend names each agent's colour and what each marker means.

The document is built with ``xml.etree.ElementTree``, which escapes every text and attribute (file names,
policy names), and written atomically. No pygame is needed.
"""

from __future__ import annotations

import math
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Callable

from render import colors as P
from render.source import LoadedEpisode, ReplaySource, episode_facts
from render.timeline import MARKER_MEANINGS, TWO_CELL_GLYPHS, VERTEX, spread
from render.watch_state import check_timing
from simulator import constants as C
from simulator.atomic import atomic_write
from simulator.text import counted
from simulator.types import Instance

SVG_NS = "http://www.w3.org/2000/svg"
CELL = 48  # pixels per cell (the picture is vector: it scales to any size)
HOLD_S = 2.0  # the outcome stays this long (at least one step) before the animation loops
MIN_WIDTH = 560  # room for the sentences under a small map
FONT = "DejaVu Sans, Verdana, Arial, sans-serif"
LINE_H = 18  # text lines under the board
CAPTION_SIZE = 14  # the caption's font size (bold)
CHAR_EM = 0.64  # a generous average advance of a bold sans-serif character, in ems (to fit the caption)


def _hex(color: P.RGB) -> str:
    r, g, b = (int(c) for c in color)
    return P.hex_color((r, g, b))


def _num(value: float) -> str:
    """A coordinate or time, short: ``12``, ``12.5``."""
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


# Characters XML 1.0 forbids even escaped (C0 controls but tab and line breaks, lone surrogates from undecodable
# file names, U+FFFE/U+FFFF): ElementTree writes them raw, and the document no longer parses.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _middle_cut(text: str, keep: int) -> str:
    """``text`` cut to ``keep`` characters by dropping its middle for an ellipsis (both ends name a file best)."""
    if len(text) <= keep:
        return text
    head = (keep - 1 + 1) // 2
    return text[:head] + "…" + text[len(text) - (keep - 1 - head):]


def _xml_safe(text: str) -> str:
    """``text`` with each character XML cannot hold written as ``\\xNN`` / ``\\uNNNN`` (visible, not lost)."""
    return _NOT_XML.sub(lambda match: ascii(match.group())[1:-1], text)


def _clean_tree(root: ET.Element) -> None:
    for element in root.iter():
        if element.text:
            element.text = _xml_safe(element.text)
        if element.tail:
            element.tail = _xml_safe(element.tail)
        for name, value in element.attrib.items():
            element.attrib[name] = _xml_safe(value)


def _sub(parent: ET.Element, tag: str, attrib: dict[str, str] | None = None, **attributes: object) -> ET.Element:
    """A child element: ``attrib`` as given, then keyword attributes whose ``_`` stand for ``-``
    (``stroke_width`` -> ``stroke-width``)."""
    names = {name.replace("_", "-"): str(value) for name, value in attributes.items()}
    return ET.SubElement(parent, tag, {**(attrib or {}), **names})


class _Clock:
    """The shared timing of every animation: frame ``t`` begins at key time ``key_times[t]`` (a share of ``dur``)."""

    def __init__(self, n_frames: int, fps: float) -> None:
        step_s = 1.0 / fps
        self.n_frames = n_frames
        self.dur = (n_frames - 1) * step_s + max(step_s, HOLD_S)
        self.key_times = [round(t * step_s / self.dur, 6) for t in range(n_frames)]

    def animate(self, parent: ET.Element, attribute: str, values: list[str], tag: str = "animate",
                **extra: Any) -> None:
        """One value per frame, compressed to the frames where the value changes (discrete steps)."""
        kept_values: list[str] = []
        kept_times: list[float] = []
        for value, key_time in zip(values, self.key_times, strict=True):
            if not kept_values or value != kept_values[-1]:
                kept_values.append(value)
                kept_times.append(key_time)
        self.animate_at(parent, attribute, kept_values, kept_times, tag, **extra)

    def animate_at(self, parent: ET.Element, attribute: str, values: list[str], key_times: list[float],
                   tag: str = "animate", **extra: Any) -> None:
        _sub(parent, tag, attributeName=attribute, values=";".join(values),
             keyTimes=";".join(f"{t:.6f}".rstrip("0").rstrip(".") for t in key_times), dur=f"{self.dur:.6g}s",
             calcMode="discrete",
             repeatCount="indefinite", **extra)

    def show_during(self, element: ET.Element, first: int, last: int | None = None) -> None:
        """``element`` is hidden except from frame ``first`` up to (not including) frame ``last`` (None: to the
        end of the loop)."""
        element.set("opacity", "0")
        values, times = ["0", "1"], [0.0, self.key_times[first]]
        if last is not None and last < self.n_frames:
            values.append("0")
            times.append(self.key_times[last])
        if first == 0:
            values, times = values[1:], times[1:]
            times[0] = 0.0
        self.animate_at(element, "opacity", values, times)


class _Geometry:
    """Pixel places: half a cell of margin round the map (an off-map move has room), the map centred."""

    def __init__(self, width: int, top: int, total_width: int) -> None:
        self.x0 = (total_width - width * CELL) / 2
        self.y0 = top + CELL / 2

    def center(self, row: float, col: float) -> tuple[float, float]:
        return self.x0 + (col + 0.5) * CELL, self.y0 + (row + 0.5) * CELL


def _cross(parent: ET.Element, x: float, y: float, half: float, width: float, color: str) -> None:
    for dx in (-half, half):
        _sub(parent, "line", x1=_num(x - dx), y1=_num(y - half), x2=_num(x + dx), y2=_num(y + half), stroke=color,
             stroke_width=_num(width), stroke_linecap="round")


def _glyph_arc(parent: ET.Element, x: float, y: float, other: tuple[float, float] | None, size: float,
               thick: float, color: str) -> None:
    r = size / 4
    _sub(parent, "path", d=f"M {_num(x - r)} {_num(y - r)} A {_num(r)} {_num(r)} 0 0 1 {_num(x + r)} {_num(y - r)}",
         fill="none", stroke=color, stroke_width=_num(max(1.0, size / 16)))


def _glyph_ring_cross(parent: ET.Element, x: float, y: float, other: tuple[float, float] | None, size: float,
                      thick: float, color: str) -> None:
    _sub(parent, "circle", cx=_num(x), cy=_num(y), r=_num(size * 0.46), fill="none", stroke=color,
         stroke_width=_num(thick))
    _cross(parent, x, y, size * 0.22, thick, color)


def _glyph_burst(parent: ET.Element, x: float, y: float, other: tuple[float, float] | None, size: float,
                 thick: float, color: str) -> None:
    _sub(parent, "circle", cx=_num(x), cy=_num(y), r=_num(size * 0.5), fill="none", stroke=color,
         stroke_width=_num(thick))
    for i in range(8):  # a burst: agents hit each other here
        angle = i * math.pi / 4
        _sub(parent, "line", x1=_num(x + size * 0.52 * math.cos(angle)), y1=_num(y + size * 0.52 * math.sin(angle)),
             x2=_num(x + size * 0.68 * math.cos(angle)), y2=_num(y + size * 0.68 * math.sin(angle)), stroke=color,
             stroke_width=_num(max(1.0, thick / 2)))


def _glyph_swap(parent: ET.Element, x: float, y: float, other: tuple[float, float] | None, size: float,
                thick: float, color: str) -> None:
    bx, by = other if other is not None else (x, y)
    mx, my, half = (x + bx) / 2, (y + by) / 2, max(5.0, size * 0.24)
    _sub(parent, "line", x1=_num(x), y1=_num(y), x2=_num(bx), y2=_num(by), stroke=color,
         stroke_width=_num(max(1.0, thick / 2)))
    corners = ((mx, my - half), (mx + half, my), (mx, my + half), (mx - half, my))
    _sub(parent, "polygon", fill=color, points=" ".join(f"{_num(px)},{_num(py)}" for px, py in corners))


def _glyph_off_map(parent: ET.Element, x: float, y: float, other: tuple[float, float] | None, size: float,
                   thick: float, color: str) -> None:
    if other is None:
        _sub(parent, "rect", x=_num(x - size / 2), y=_num(y - size / 2), width=_num(size), height=_num(size),
             fill="none", stroke=color, stroke_width=_num(thick))
        return
    dx, dy = (other[0] - x) / size, (other[1] - y) / size
    _sub(parent, "line", x1=_num(x + dx * size * 0.38), y1=_num(y + dy * size * 0.38),
         x2=_num(x + dx * size * 0.95), y2=_num(y + dy * size * 0.95), stroke=color, stroke_width=_num(thick))
    _cross(parent, x + dx * size * 0.95, y + dy * size * 0.95, max(3.0, size / 6), thick, color)
    _sub(parent, "circle", cx=_num(x + dx * size * 0.5), cy=_num(y + dy * size * 0.5), r=_num(thick), fill=color)


def _glyph_dashed_ring(parent: ET.Element, x: float, y: float, other: tuple[float, float] | None, size: float,
                       thick: float, color: str) -> None:
    _sub(parent, "circle", cx=_num(x), cy=_num(y), r=_num(size * 0.44), fill="none", stroke=color,
         stroke_width=_num(max(1.0, thick / 2 + 1)), stroke_dasharray=_num(size * 0.44 * math.pi / 6))


# The failure table's glyphs (``simulator.failures.Kind.glyph``): the same shapes as ``render.draw`` draws:
# (parent, centre x, centre y, other cell's centre or None, size, line thickness, colour).
Glyph = Callable[[ET.Element, float, float, tuple[float, float] | None, float, float, str], None]
_GLYPHS: dict[str, Glyph] = {"arc": _glyph_arc, "ring_cross": _glyph_ring_cross, "burst": _glyph_burst,
                             "swap": _glyph_swap, "off_map": _glyph_off_map, "dashed_ring": _glyph_dashed_ring}


def _marker_shape(parent: ET.Element, kind: str, center: tuple[float, float], other: tuple[float, float] | None,
                  size: float, color: str) -> None:
    """The marker's shape at pixel ``center`` (its cell's centre; ``other``: the far cell's), ``size`` one cell;
    the same shapes as ``render.draw`` draws."""
    glyph = C.KIND_BY_NAME[kind].glyph
    assert glyph is not None  # every kind with a marker has its glyph (the failure table's rule)
    _GLYPHS[glyph](parent, center[0], center[1], other, size, max(2.0, size / 10), color)


def _text(parent: ET.Element, x: float, y: float, text: str, size: float, color: str,
          **extra: Any) -> ET.Element:
    element = _sub(parent, "text", x=_num(x), y=_num(y), font_size=_num(size), fill=color, **extra)
    element.text = text
    return element


def _draw_board(svg: ET.Element, instance: Instance, geometry: _Geometry) -> None:
    board = _sub(svg, "g", id="board")
    for r in range(instance.height):
        for c in range(instance.width):
            x, y = geometry.x0 + c * CELL, geometry.y0 + r * CELL
            hole = instance.grid[r, c] == C.HOLE
            _sub(board, "rect", x=_num(x), y=_num(y), width=CELL, height=CELL,
                 fill=_hex(P.ICE if hole or (r + c) % 2 == 0 else P.ICE_ALT), stroke=_hex(P.ICE_LINE))
            if hole:
                cell = _sub(board, "g", {"class": "hole"})
                _sub(cell, "rect", x=_num(x + 3), y=_num(y + 3), width=CELL - 6, height=CELL - 6, rx=CELL // 4,
                     fill=_hex(P.HOLE_RIM))
                _sub(cell, "rect", x=_num(x + 8), y=_num(y + 8), width=CELL - 16, height=CELL - 16, rx=CELL // 5,
                     fill=_hex(P.HOLE))
    for k, (r, c) in enumerate(instance.goals.tolist()):
        x, y = geometry.x0 + c * CELL, geometry.y0 + r * CELL
        goal = _sub(board, "g", {"class": "goal", "data-agent": str(k)})
        color = _hex(P.agent_color(k))
        _sub(goal, "rect", x=_num(x + 5), y=_num(y + 5), width=CELL - 10, height=CELL - 10, rx=6, fill="none",
             stroke=color, stroke_width=3)
        _text(goal, x + 9, y + 19, f"G{k}", 12, color, font_weight="bold")


def episode_svg(loaded: LoadedEpisode, fps: float = 3.0, trails: bool = True, total: int = 1) -> str:
    """The SVG document of ``loaded`` (a ``render.source.LoadedEpisode``; ``total`` episodes in its source, for
    the caption) at ``fps`` steps per second."""
    check_timing(fps)
    timeline = loaded.timeline
    instance = timeline.instance
    n_agents, n_steps = instance.n_agents, timeline.n_steps
    n_frames = n_steps + 1
    clock = _Clock(n_frames, fps)
    scenes = [timeline.scene(t) for t in range(n_frames)]
    sentences = [scene.sentences() for scene in scenes]
    facts = {label: value for label, value, _ in episode_facts(loaded, n_steps, total)}

    width = max(MIN_WIDTH, (instance.width + 1) * CELL)
    top = 2 * LINE_H + 8  # caption and step counter
    board_h = (instance.height + 1) * CELL
    sentence_lines = max((len(lines) for lines in sentences), default=0)
    named = n_agents <= P.NAMED_COLORS
    per_row = max(1, (width - 24) // (150 if named else 44))
    legend_top = top + board_h + 8 + max(1, sentence_lines) * LINE_H + 10
    marker_rows = (len(MARKER_MEANINGS) + (1 if trails else 0) + 2) // 3
    legend_h = ((n_agents + per_row - 1) // per_row) * 24 + marker_rows * 26
    height = legend_top + legend_h + 8
    geometry = _Geometry(instance.width, top, width)

    svg = ET.Element("svg", {"xmlns": SVG_NS, "width": str(width), "height": str(height),
                             "viewBox": f"0 0 {width} {height}", "font-family": FONT, "data-frames": str(n_frames),
                             "data-fps": _num(fps)})
    name = Path(loaded.path).name
    title = f"MAPF-FrozenLake replay: {name}, episode {loaded.index}"
    _sub(svg, "title").text = title
    _sub(svg, "desc").text = (f"{instance.height}x{instance.width} map, {counted(n_agents, 'agent')}, {counted(n_steps, 'step')}; "
                              f"result: {facts['result']}; failure: {facts['failure']}")
    _sub(svg, "rect", width="100%", height="100%", fill=_hex(P.BACKGROUND))
    # The caption fits the picture's width (it ran off the right edge): the file name gives up its middle first,
    # and a caption still too wide is squeezed to the width. The <title> keeps the whole name.
    caption = f"{title} · {facts['result']}"
    room = int((width - 24) / (CAPTION_SIZE * CHAR_EM))
    if len(caption) > room:
        caption = caption.replace(name, _middle_cut(name, max(12, len(name) - (len(caption) - room))), 1)
    squeeze = {"textLength": str(width - 24), "lengthAdjust": "spacingAndGlyphs"} if len(caption) > room else {}
    _text(svg, 12, LINE_H, caption, CAPTION_SIZE, _hex(P.ACCENT), font_weight="bold", **squeeze)
    counter = _sub(svg, "g", id="steps")
    for t in range(n_frames):
        label = _text(counter, 12, 2 * LINE_H + 2, f"step {t} / {n_steps}", 13, _hex(P.TEXT), **{"data-step": t})
        clock.show_during(label, t, t + 1)

    _draw_board(svg, instance, geometry)

    # trails: one faint line per move, shown from its step on (shifted off the centre per agent, as in the window)
    if trails:
        layer = _sub(svg, "g", id="trails", stroke_linecap="round", opacity="1")
        for k in range(n_agents):
            shift = ((k % 4) - 1.5) * CELL * 0.07
            color = _hex(P.trail_color(k))
            x, y = geometry.center(*timeline.positions[0, k])
            _sub(layer, "circle", {"class": "trail-start"}, cx=_num(x + shift), cy=_num(y + shift), r=_num(CELL / 14),
                 fill=color)
            for t in range(1, n_frames):
                a, b = timeline.positions[t - 1, k], timeline.positions[t, k]
                if (a == b).all():
                    continue
                (x1, y1), (x2, y2) = geometry.center(*a), geometry.center(*b)
                line = _sub(layer, "line", {"class": "trail", "data-agent": str(k), "data-step": str(t)},
                            x1=_num(x1 + shift), y1=_num(y1 + shift), x2=_num(x2 + shift), y2=_num(y2 + shift),
                            stroke=color, stroke_width=_num(CELL / 9))
                clock.show_during(line, t)

    # failure markers (and slips), each shown at its step
    layer = _sub(svg, "g", id="markers")
    for t, scene in enumerate(scenes):
        for marker in scene.markers:
            group = _sub(layer, "g", {"class": "marker", "data-kind": marker.kind, "data-step": str(t),
                                      "data-agents": " ".join(str(k) for k in marker.agents)})
            other = geometry.center(*marker.other) if marker.other is not None else None
            color = _hex(P.FAILURE if marker.is_failure else P.SLIP)
            _marker_shape(group, marker.kind, geometry.center(*marker.cell), other, CELL, color)
            clock.show_during(group, t, t + 1)

    # agents: a translate per frame (collisions spread apart), fallen ones shrink and dim
    layer = _sub(svg, "g", id="agents")
    points = [spread(scene, scene.after) for scene in scenes]  # (K, 2) float per frame
    for k in range(n_agents):
        rgb = P.agent_color(k)
        places = [geometry.center(*points[t][k]) for t in range(n_frames)]
        group = _sub(layer, "g", {"class": "agent", "data-agent": str(k)},
                     transform=f"translate({_num(places[0][0])} {_num(places[0][1])})")
        fallen = [bool(timeline.status[t][k] == C.FALLEN) for t in range(n_frames)]
        shared = [any(m.kind == VERTEX and k in m.agents for m in scene.markers) for scene in scenes]
        body = group
        if any(shared):  # agents that share a cell are drawn smaller, side by side
            body = _sub(group, "g")
            clock.animate(body, "transform", ["0.72" if s else "1" for s in shared], tag="animateTransform",
                          type="scale")
        disc = _sub(body, "circle", r=_num(CELL * 0.36), fill=_hex(rgb), stroke="#141820", stroke_width=2)
        _text(body, 0, CELL * 0.13, str(k), CELL * 0.34, _hex(P.text_on(rgb)), text_anchor="middle",
              font_weight="bold")
        if any(fallen):
            clock.animate(disc, "r", [_num(CELL * (0.2 if f else 0.36)) for f in fallen])
            clock.animate(disc, "fill", [_hex(P.dimmed(rgb, 0.45) if f else rgb) for f in fallen])
        clock.animate(group, "transform", [f"{_num(x)} {_num(y)}" for x, y in places], tag="animateTransform",
                      type="translate")

    # the sentences of each step under the board
    layer = _sub(svg, "g", id="sentences")
    text_top = top + board_h + 8
    for t, lines in enumerate(sentences):
        if not lines:
            continue
        group = _sub(layer, "g", {"class": "sentences", "data-step": str(t)})
        for i, (sentence, is_failure) in enumerate(lines):
            _text(group, 12, text_top + (i + 1) * LINE_H - 4, sentence, 13, _hex(P.BAD if is_failure else P.SLIP))
        clock.show_during(group, t, t + 1)

    # the legend: each agent's colour by name, then the markers' meanings
    legend = _sub(svg, "g", id="legend")
    item_w = (width - 24) / per_row
    for k in range(n_agents):
        row, col = divmod(k, per_row)
        x, y = 12 + col * item_w, legend_top + row * 24
        rgb = P.agent_color(k)
        item = _sub(legend, "g", {"class": "legend-agent", "data-agent": str(k)})
        _sub(item, "circle", cx=_num(x + 9), cy=_num(y + 9), r=9, fill=_hex(rgb))
        _text(item, x + 9, y + 13, str(k), 11, _hex(P.text_on(rgb)), text_anchor="middle", font_weight="bold")
        if named:
            _text(item, x + 24, y + 13, f"agent {k}: {P.agent_color_name(k)}", 12, _hex(P.TEXT_DIM))
    meanings = list(MARKER_MEANINGS) + ([("trail", "path so far")] if trails else [])
    marks_top = legend_top + ((n_agents + per_row - 1) // per_row) * 24 + 4
    column_w = (width - 24) / 3
    for i, (kind, text) in enumerate(meanings):
        row, col = divmod(i, 3)
        x, y = 12 + col * column_w, marks_top + row * 26
        item = _sub(legend, "g", {"class": "legend-marker", "data-kind": kind})
        center = (x + 10, y + 10)
        if kind == "trail":
            _sub(item, "line", x1=_num(x), y1=_num(y + 10), x2=_num(x + 24), y2=_num(y + 10),
                 stroke=_hex(P.trail_color(0)), stroke_width=4, stroke_linecap="round")
        else:
            kind_row = C.KIND_BY_NAME[kind]  # its row of the failure table
            other = (center[0] + 16, center[1]) if kind_row.glyph in TWO_CELL_GLYPHS else None
            color = _hex(P.BAD if kind_row.is_failure else P.SLIP)
            _marker_shape(item, kind, (center[0], center[1] + (0 if kind_row.is_failure else 6)), other,
                          16 if other else 18, color)
        _text(item, x + 32, y + 14, text, 12, _hex(P.TEXT_DIM))

    _clean_tree(svg)  # names come from outside (a file name with a control character made the file invalid)
    ET.indent(svg, space=" ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(svg, encoding="unicode") + "\n"


def export_svg(source: ReplaySource, index: int, out: str | os.PathLike[str], fps: float = 3.0,
               trails: bool = True) -> tuple[Path, int]:
    """Episode ``index`` of ``source`` as an animated SVG written atomically to ``out``; returns the path and the
    frame count (steps + 1). Raises ConfigError for an ``fps`` out of range, ReplayError for a bad record."""
    check_timing(fps)
    loaded = source.load(index)
    atomic_write(out, episode_svg(loaded, fps, trails, len(source)))
    return Path(out), loaded.n_steps + 1


__all__ = ["CELL", "HOLD_S", "episode_svg", "export_svg"]
