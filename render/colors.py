"""The palette: one place for every colour the pygame viewer and the Textual apps use.

Colours are ``(r, g, b)`` tuples of ints 0..255; :func:`hex_color` gives the ``#rrggbb`` form Rich and Textual
take. Agent colours are chosen to stand apart from the ice (light blue), the holes (dark navy) and the failure
red, and from each other; past the hand-picked dozen they come from a golden-ratio walk around the hue circle.
"""

from __future__ import annotations

import colorsys

RGB = tuple[int, int, int]

# --- the lake ---------------------------------------------------------------------------------------------
BACKGROUND: RGB = (18, 26, 38)  # around the board
ICE: RGB = (216, 234, 246)
ICE_ALT: RGB = (204, 226, 242)  # every other cell, so cells can be counted on large maps
ICE_LINE: RGB = (176, 204, 224)  # thin lines between cells
HOLE: RGB = (24, 52, 92)  # a hole's water; tests look for exactly this colour at a hole's centre
HOLE_RIM: RGB = (12, 30, 58)  # the broken ice around it
# --- events -----------------------------------------------------------------------------------------------
FAILURE: RGB = (236, 38, 38)  # every failure marker is drawn in exactly this colour (and nothing else is)
SLIP: RGB = (250, 200, 60)  # a slip on slippery ice (not a failure)
GOOD: RGB = (88, 196, 112)
BAD: RGB = (240, 96, 96)
# --- the side panel and overlays -----------------------------------------------------------------------------
PANEL: RGB = (28, 36, 50)
PANEL_LINE: RGB = (52, 64, 84)
TEXT: RGB = (226, 232, 240)
TEXT_DIM: RGB = (140, 152, 170)
ACCENT: RGB = (120, 190, 255)
HIGHLIGHT: RGB = (84, 70, 20)  # behind the completion's tokens of the step shown
OVERLAY: tuple[int, int, int, int] = (8, 12, 20, 220)  # help overlay, with alpha

_AGENT_PALETTE: tuple[RGB, ...] = (
    (245, 130, 32),  # orange
    (46, 160, 67),  # green
    (142, 68, 200),  # purple
    (214, 48, 150),  # magenta
    (0, 150, 150),  # teal
    (226, 180, 0),  # gold
    (40, 96, 226),  # blue
    (150, 96, 48),  # brown
    (250, 128, 180),  # pink
    (118, 140, 24),  # olive
    (176, 30, 70),  # crimson
    (96, 104, 128),  # slate
)
# the names the legends print beside each colour of the palette above, in its order
_AGENT_COLOR_NAMES: tuple[str, ...] = (
    "orange", "green", "purple", "magenta", "teal", "gold", "blue", "brown", "pink", "olive", "crimson", "slate",
)
NAMED_COLORS = len(_AGENT_COLOR_NAMES)  # legends name each colour up to this many agents, then number chips only
TRAIL_STRENGTH = 0.42  # how much of the agent's colour a trail keeps (the rest is ice): faint, still readable
_GOLDEN = 0.6180339887498949


def agent_color(agent: int) -> RGB:
    """The colour of agent ``agent`` (>= 0): the same in every view, distinct for the first dozen."""
    if agent < len(_AGENT_PALETTE):
        return _AGENT_PALETTE[agent]
    hue = (0.07 + agent * _GOLDEN) % 1.0
    lightness = 0.45 if agent % 2 else 0.55
    r, g, b = colorsys.hls_to_rgb(hue, lightness, 0.75)
    color = (round(r * 255), round(g * 255), round(b * 255))
    return color if color != FAILURE else (color[0] - 1, color[1], color[2])


def agent_color_name(agent: int) -> str:
    """The word for agent ``agent``'s colour in legends (``"orange"``); past the named dozen, its hue in degrees."""
    if agent < len(_AGENT_COLOR_NAMES):
        return _AGENT_COLOR_NAMES[agent]
    return f"hue {round(((0.07 + agent * _GOLDEN) % 1.0) * 360)}°"


def trail_color(agent: int) -> RGB:
    """The faint colour of agent ``agent``'s path trail: its colour mixed toward the ice (never ``FAILURE``)."""
    return dimmed(agent_color(agent), TRAIL_STRENGTH, ICE)


def text_on(color: RGB) -> RGB:
    """Black or white, whichever reads better on ``color`` (by perceived luminance)."""
    r, g, b = color
    return (16, 16, 16) if 0.299 * r + 0.587 * g + 0.114 * b > 150 else (250, 250, 250)


def dimmed(color: RGB, factor: float = 0.45, toward: RGB = HOLE) -> RGB:
    """``color`` mixed toward ``toward`` (fallen agents, drawn sinking into their hole)."""
    r, g, b = (round(c * factor + t * (1 - factor)) for c, t in zip(color, toward, strict=True))
    return (r, g, b)


def hex_color(color: RGB) -> str:
    """``"#rrggbb"`` for Rich and Textual."""
    return "#{:02x}{:02x}{:02x}".format(*color)
