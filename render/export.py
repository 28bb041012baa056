"""Headless image export of replays: one frame as PNG, a whole episode as an animated GIF.

The frames are drawn by ``render.draw.draw_frame``, the same code the window uses, onto off-screen surfaces, so
no display is needed (the CLI also sets ``SDL_VIDEODRIVER=dummy``). GIF encoding uses Pillow (the ``render``
extra); PNG uses pygame alone. Files are written atomically (``simulator.atomic``).
"""

from __future__ import annotations

import io
import os
from pathlib import Path

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

import pygame  # noqa: E402 - after silencing pygame's banner

from render.draw import DEFAULT_SIZE, DrawCache, FrameView, draw_frame  # noqa: E402
from render.source import ReplaySource  # noqa: E402
from render.watch_state import WatchState  # noqa: E402
from simulator.atomic import atomic_write  # noqa: E402
from simulator.errors import ConfigError  # noqa: E402

GIF_SIZE = (960, 600)  # smaller than the window: GIFs are for sharing


def frame_view(state: WatchState, alpha: float | None = None, exported: bool = False) -> FrameView:
    """What the viewer shows for ``state`` (shared by the window, ``s`` snapshots and the exports); ``exported``
    leaves out what only makes sense in a window (play state, key hints, notices)."""
    if exported:
        return FrameView(
            scene=state.scene(), alpha=state.alpha if alpha is None else alpha, facts=state.facts(),
            title="MAPF-FrozenLake replay", completion=state.completion, scroll=state.scroll, follow=state.follow,
            key_hint=False,
        )
    return FrameView(
        scene=state.scene(),
        alpha=state.alpha if alpha is None else alpha,
        facts=state.facts(),
        title="MAPF-FrozenLake replay",
        completion=state.completion,
        scroll=state.scroll,
        follow=state.follow,
        status=state.status_line(),
        message=state.message,
        show_help=state.show_help,
    )


def surface_png_bytes(surface: pygame.Surface) -> bytes:
    buffer = io.BytesIO()
    pygame.image.save(surface, buffer, "frame.png")
    return buffer.getvalue()


def save_png(surface: pygame.Surface, out: str | os.PathLike) -> Path:
    """Write ``surface`` to ``out`` as PNG (atomically); returns the path."""
    atomic_write(out, surface_png_bytes(surface))
    return Path(out)


def export_png(
    source: ReplaySource, index: int, step: int, out: str | os.PathLike, size: tuple[int, int] = DEFAULT_SIZE
) -> tuple[Path, int]:
    """Episode ``index`` at step ``step`` (negative: from the end; -1 = last) at rest, as a PNG of ``size``;
    returns the path and the step drawn."""
    state = WatchState(source, index, step)
    surface = pygame.Surface(size)
    draw_frame(surface, frame_view(state, exported=True), DrawCache())
    return save_png(surface, out), state.step


def gif_frames(state: WatchState, size: tuple[int, int], tween: int = 0) -> list[bytes]:
    """RGB bytes of every frame of the episode: step 0, then per step ``tween`` in-between frames and the step at
    rest, so ``steps * (tween + 1) + 1`` frames."""
    surface = pygame.Surface(size)
    cache = DrawCache()
    frames = []
    for step in range(state.n_steps + 1):
        alphas = [1.0] if step == 0 else [(i + 1) / (tween + 1) for i in range(tween + 1)]
        state.go_to_step(step)
        for alpha in alphas:
            draw_frame(surface, frame_view(state, alpha, exported=True), cache)
            frames.append(pygame.image.tobytes(surface, "RGB"))
    return frames


def export_gif(
    source: ReplaySource,
    index: int,
    out: str | os.PathLike,
    size: tuple[int, int] = GIF_SIZE,
    fps: float = 3.0,
    tween: int = 0,
) -> int:
    """Episode ``index`` as an animated GIF (looping; the last frame held longer); returns the frame count.

    Raises ConfigError when Pillow is missing or ``fps``/``tween`` are out of range.
    """
    try:
        from PIL import Image
    except ImportError:
        raise ConfigError("--gif", os.fspath(out), "Pillow installed: pip install 'mapf-frozenlake[render]'") from None
    if not 0.1 <= fps <= 60:
        raise ConfigError("--fps", fps, "0.1 <= frames per second <= 60")
    if not 0 <= tween <= 30:
        raise ConfigError("--tween", tween, "0..30 in-between frames per step")
    state = WatchState(source, index)
    raw = gif_frames(state, size, tween)
    # One palette for the whole animation, taken from the last frame (it has every colour that matters: the
    # map, all agents, the failure marker), so colours do not flicker between frames.
    last = Image.frombytes("RGB", size, raw[-1]).quantize(
        colors=255, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE
    )
    images = [Image.frombytes("RGB", size, frame).quantize(palette=last, dither=Image.Dither.NONE) for frame in raw]
    step_ms = max(20, int(1000 / fps))
    durations = [step_ms] * len(images)
    durations[-1] = max(step_ms, 2000)  # hold the outcome before looping
    buffer = io.BytesIO()
    images[0].save(buffer, format="GIF", save_all=True, append_images=images[1:], duration=durations, loop=0,
                   optimize=False, disposal=1)
    atomic_write(out, buffer.getvalue())
    return len(images)
