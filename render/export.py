"""Headless image export of replays: one frame as PNG, a whole episode as an animated GIF or an MP4 video.

The frames are drawn by ``render.draw.draw_frame``, the same code the window uses, onto off-screen surfaces, so
no display is needed (the CLI also sets ``SDL_VIDEODRIVER=dummy``). Path trails are drawn unless ``trails`` is
False. GIF encoding uses Pillow (the ``render`` extra), MP4 encoding imageio with its ffmpeg plugin (the
``video`` extra); PNG uses pygame alone. Files are written atomically (``simulator.atomic``). The animated SVG,
which needs no pygame, is ``render.svg``.
"""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path
from typing import Iterator

import numpy as np

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

import pygame  # noqa: E402 - after silencing pygame's banner

from render.draw import DEFAULT_SIZE, DrawCache, FrameView, draw_frame  # noqa: E402
from render.source import ReplaySource  # noqa: E402
from render.watch_state import WatchState, check_timing  # noqa: E402
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
            key_hint=False, trails=state.trails,
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
        trails=state.trails,
    )


def surface_png_bytes(surface: pygame.Surface) -> bytes:
    buffer = io.BytesIO()
    pygame.image.save(surface, buffer, "frame.png")
    return buffer.getvalue()


def save_png(surface: pygame.Surface, out: str | os.PathLike[str]) -> Path:
    """Write ``surface`` to ``out`` as PNG (atomically); returns the path."""
    atomic_write(out, surface_png_bytes(surface))
    return Path(out)


def export_png(
    source: ReplaySource, index: int, step: int, out: str | os.PathLike[str], size: tuple[int, int] = DEFAULT_SIZE,
    trails: bool = True,
) -> tuple[Path, int]:
    """Episode ``index`` at step ``step`` (negative: from the end; -1 = last) at rest, as a PNG of ``size``;
    returns the path and the step drawn."""
    state = WatchState(source, index, step, trails=trails)
    surface = pygame.Surface(size)
    draw_frame(surface, frame_view(state, exported=True), DrawCache())
    return save_png(surface, out), state.step


def episode_frames(state: WatchState, size: tuple[int, int], tween: int = 0) -> Iterator[bytes]:
    """RGB bytes of every frame of the episode, drawn one at a time (GIF and MP4 alike): step 0, then per step
    ``tween`` in-between frames and the step at rest, so ``steps * (tween + 1) + 1`` frames."""
    surface = pygame.Surface(size)
    cache = DrawCache()
    for step in range(state.n_steps + 1):
        alphas = [1.0] if step == 0 else [(i + 1) / (tween + 1) for i in range(tween + 1)]
        state.go_to_step(step)
        for alpha in alphas:
            draw_frame(surface, frame_view(state, alpha, exported=True), cache)
            yield pygame.image.tobytes(surface, "RGB")


def export_gif(
    source: ReplaySource,
    index: int,
    out: str | os.PathLike[str],
    size: tuple[int, int] = GIF_SIZE,
    fps: float = 3.0,
    tween: int = 0,
    trails: bool = True,
) -> int:
    """Episode ``index`` as an animated GIF (looping; the last frame held longer); returns the frame count.

    Raises ConfigError when Pillow is missing or ``fps``/``tween`` are out of range.
    """
    try:
        from PIL import Image
    except ImportError:
        raise ConfigError("--gif", os.fspath(out), "Pillow installed: pip install 'mapf-frozenlake[render]'") from None
    check_timing(fps, tween)
    state = WatchState(source, index, trails=trails)
    raw = list(episode_frames(state, size, tween))  # the palette comes from the last frame
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


VIDEO_EXTRA = "pip install 'mapf-frozenlake[video]'"


def export_mp4(
    source: ReplaySource,
    index: int,
    out: str | os.PathLike[str],
    size: tuple[int, int] = GIF_SIZE,
    fps: float = 3.0,
    tween: int = 0,
    trails: bool = True,
) -> tuple[int, tuple[int, int]]:
    """Episode ``index`` as an H.264 MP4 video (``episode_frames``: one frame per step, or ``tween`` more);
    returns the frame count and the frame size, which is ``size`` rounded down to even numbers (what H.264's
    4:2:0 colour needs).

    Raises ConfigError when imageio or its ffmpeg plugin is missing (the ``video`` extra) or ``fps``/``tween``
    are out of range.
    """
    try:
        import imageio.v2 as imageio
        import imageio_ffmpeg
    except ImportError:
        raise ConfigError("--mp4", os.fspath(out), f"imageio and imageio-ffmpeg installed: {VIDEO_EXTRA}") from None
    try:
        imageio_ffmpeg.get_ffmpeg_exe()
    except RuntimeError as exc:
        raise ConfigError("--mp4", os.fspath(out), f"an ffmpeg binary for imageio-ffmpeg: {VIDEO_EXTRA}",
                          str(exc).splitlines()[0]) from None
    check_timing(fps, tween)
    even = (size[0] - size[0] % 2, size[1] - size[1] % 2)
    state = WatchState(source, index, trails=trails)
    count = 0
    # ffmpeg writes to a path: encode into a private folder (frames streamed to it as they are drawn), then move
    # the bytes into place atomically
    with tempfile.TemporaryDirectory(prefix="mapf-lake-mp4-") as folder:
        temp = Path(folder) / "episode.mp4"
        writer = imageio.get_writer(temp, format="FFMPEG", mode="I", fps=fps, codec="libx264", quality=8,
                                    pixelformat="yuv420p", macro_block_size=1, ffmpeg_log_level="error")
        try:
            for frame in episode_frames(state, even, tween):
                writer.append_data(np.frombuffer(frame, np.uint8).reshape(even[1], even[0], 3))
                count += 1
        finally:
            writer.close()
        atomic_write(out, temp.read_bytes())
    return count, even
