"""The pygame replay viewer window (``mapf-lake watch PATH``).

The window only maps keys to :class:`render.watch_state.WatchState` methods and draws what the state says with
``render.draw.draw_frame``; all the viewer's state lives there. Keys (also in the ``h`` overlay): space
play/pause, left/right step, home/end first/last step, up/down speed, n/p next/previous episode, f failures
only, t path trails, PgUp/PgDn or the wheel scroll the completion, s save the frame as PNG, h help, q or Esc quit.
The window is resizable; the board scales to it (a 32x32 map fits any window of a few hundred pixels).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

import pygame  # noqa: E402 - after silencing pygame's banner

from render.draw import DEFAULT_SIZE, DrawCache, draw_frame  # noqa: E402
from render.export import frame_view, save_png  # noqa: E402
from render.watch_state import WatchState  # noqa: E402
from simulator.errors import ConfigError  # noqa: E402

MESSAGE_SECONDS = 3.0
MAX_FPS = 120  # the loop sleeps to this rate while animating; idle it waits for events instead


def snapshot_path(state: WatchState, folder: str | os.PathLike[str] = ".") -> Path:
    """Where ``s`` saves: ``<file stem>-ep<i>-t<step>.png`` in ``folder`` (a new name if it exists)."""
    stem = Path(state.loaded.path).stem
    base = Path(folder) / f"{stem}-ep{state.loaded.local_index}-t{state.step}"
    path, n = base.with_suffix(".png"), 1
    while path.exists():
        path, n = Path(f"{base}-{n}.png"), n + 1
    return path


def handle_key(state: WatchState, key: int, snapshot: Callable[[], None]) -> bool:
    """Apply one key press to ``state``; ``snapshot()`` saves the frame. Returns False when the key quits."""
    if key in (pygame.K_q, pygame.K_ESCAPE):
        if key == pygame.K_ESCAPE and state.show_help:
            state.show_help = False
            return True
        return False
    actions = {
        pygame.K_SPACE: state.toggle_play,
        pygame.K_RIGHT: lambda: state.step_by(+1),
        pygame.K_LEFT: lambda: state.step_by(-1),
        pygame.K_HOME: lambda: state.go_to_step(0),
        pygame.K_END: lambda: state.go_to_step(state.n_steps),
        pygame.K_UP: state.faster,
        pygame.K_DOWN: state.slower,
        pygame.K_n: state.next_episode,
        pygame.K_p: state.previous_episode,
        pygame.K_f: state.toggle_failures_only,
        pygame.K_t: state.toggle_trails,
        pygame.K_PAGEUP: lambda: state.scroll_by(-10),
        pygame.K_PAGEDOWN: lambda: state.scroll_by(+10),
        pygame.K_s: snapshot,
    }
    if key == pygame.K_h:
        state.show_help = not state.show_help
    elif key in actions:
        actions[key]()
    return True


# SDL video drivers that draw to memory only: what SDL falls back to without a display.
HEADLESS_DRIVERS = ("offscreen", "dummy")


def init_display(allowed: str, headless_ok: bool = False) -> None:
    """Start SDL's video, or raise ConfigError("display", ..., ``allowed``): a driver this machine lacks (or an
    empty ``SDL_VIDEODRIVER``), or, unless ``headless_ok``, one that draws to memory only, where a window nobody
    can see would wait forever."""
    try:
        pygame.display.init()
    except pygame.error as exc:
        raise ConfigError("display", f"SDL_VIDEODRIVER={os.environ.get('SDL_VIDEODRIVER', '')!r}", allowed,
                          str(exc)) from None
    driver = pygame.display.get_driver()
    if not headless_ok and driver in HEADLESS_DRIVERS:
        pygame.display.quit()  # only the display: fonts others hold stay valid
        raise ConfigError("display", f"{os.environ.get('DISPLAY') or 'none'} (SDL video driver {driver!r})", allowed)


def run_viewer(state: WatchState, size: tuple[int, int] = DEFAULT_SIZE, max_frames: int | None = None) -> None:
    """Open the window and run until the user quits (or ``max_frames`` frames, for tests).

    Raises ConfigError when no display can be opened (use ``--terminal`` or ``--png``/``--gif`` then).
    """
    init_display("a display for the window (or use --terminal, --png or --gif)", headless_ok=max_frames is not None)
    pygame.font.init()
    try:
        screen = pygame.display.set_mode(size, pygame.RESIZABLE)
    except pygame.error as exc:
        pygame.quit()
        raise ConfigError(
            "display", os.environ.get("DISPLAY"), "a display for the window (or use --terminal, --png or --gif)",
            str(exc),
        ) from None
    pygame.display.set_caption(f"mapf-lake watch: {state.source.path}")
    pygame.key.set_repeat(300, 40)
    cache = DrawCache()
    clock = pygame.time.Clock()
    shown_message: str | None = None
    message_until = 0.0
    frames = 0
    dirty = True

    def snapshot() -> None:
        path = snapshot_path(state)
        save_png(screen, path)
        state.message = f"saved {path}"

    try:
        running = True
        last = time.perf_counter()
        while running:
            # Idle (paused, nothing changed): block on events instead of spinning, waking to expire messages.
            events = pygame.event.get() if (state.playing or dirty) else [pygame.event.wait(250)]
            for event in events:
                if event.type == pygame.QUIT:
                    running = False
                elif event.type == pygame.KEYDOWN:
                    running = handle_key(state, event.key, snapshot) and running
                    dirty = True
                elif event.type == pygame.MOUSEWHEEL:
                    state.scroll_by(-3 * event.y)
                    dirty = True
                elif event.type in (pygame.VIDEORESIZE, pygame.WINDOWSIZECHANGED, pygame.WINDOWEXPOSED):
                    dirty = True
            now = time.perf_counter()
            if state.advance(now - last):
                dirty = True
            last = now
            if state.message != shown_message:  # a new notice: show it for a few seconds
                shown_message, message_until = state.message, now + MESSAGE_SECONDS
            elif state.message and now > message_until:
                state.message = shown_message = None
                dirty = True
            if dirty:
                layout = draw_frame(screen, frame_view(state), cache)
                state.scroll = layout.scroll  # what the panel really showed (clamped, or following the step)
                pygame.display.flip()
                dirty = False
            frames += 1
            if max_frames is not None and frames >= max_frames:
                break
            if state.playing:
                clock.tick(MAX_FPS)
    finally:
        pygame.quit()
