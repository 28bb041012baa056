"""Frames of a live environment, for ``render_mode="rgb_array"`` and ``"human"`` (the env holds no drawing code).

:func:`env_scene` turns an environment's last transition (the state before the step, the state after it and
the joint action) into the ``render.timeline.Scene`` every viewer draws, failure markers included;
:func:`rgb_frame` draws it off-screen with ``render.draw.draw_frame`` and returns ``(H, W, 3) uint8``, what
Gymnasium's video recorders take; :class:`HumanWindow` shows the same frame in a pygame window (a display is
needed: SDL's offscreen and dummy drivers are refused, as in ``mapf-lake watch``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from render.draw import DrawCache
    from render.timeline import Scene
    from simulator.types import EnvState, Instance

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

DEFAULT_FRAME_SIZE = (640, 400)


def env_scene(instance: Instance, before: EnvState | None, after: EnvState, actions: np.ndarray | None,
              step: int) -> Scene:
    """The Scene of a transition ``before`` -> ``after`` (``simulator.env.EnvState``s; ``before`` None at the
    start) under the joint ``actions``."""
    from render.timeline import Scene, markers_for_step

    if before is None:
        return Scene(instance, after.pos, after.pos, after.status, after.status, (), step, step)
    markers = markers_for_step(before.pos, after.pos, after.events, actions)
    return Scene(instance, before.pos, after.pos, before.status, after.status, markers, step, step,
                 np.asarray(actions, np.int8))


def rgb_frame(scene: Scene, size: tuple[int, int] = DEFAULT_FRAME_SIZE) -> np.ndarray:
    """``(H, W, 3) uint8`` of ``scene`` at rest, with the failure markers and the plain sentence of each."""
    import pygame

    from render.draw import DrawCache, FrameView, draw_frame

    if not pygame.font.get_init():  # first frame, or pygame was shut down since: cached fonts are gone
        pygame.font.init()
        _CACHE.clear()
    surface = pygame.Surface(size)
    # the panel states each event of the step in a sentence (``Scene.sentences``), as every viewer does
    facts = [("step", str(scene.step), "")]
    draw_frame(surface, FrameView(scene=scene, alpha=1.0, facts=facts, title="MAPF-FrozenLake", key_hint=False),
               _CACHE.setdefault("cache", DrawCache()))
    return np.ascontiguousarray(pygame.surfarray.array3d(surface).transpose(1, 0, 2))


_CACHE: dict[str, DrawCache] = {}


class HumanWindow:
    """A pygame window that shows each frame it is given (``render_mode="human"``)."""

    def __init__(self, size: tuple[int, int] = DEFAULT_FRAME_SIZE) -> None:
        import pygame

        from render.viewer import init_display

        init_display("a display for render_mode='human' (or render_mode='rgb_array')")
        self.size = size
        self.screen = pygame.display.set_mode(size)
        pygame.display.set_caption("MAPF-FrozenLake")

    def show(self, scene: Scene) -> None:
        import pygame

        frame = rgb_frame(scene, self.size)
        pygame.surfarray.blit_array(self.screen, frame.transpose(1, 0, 2))
        pygame.event.pump()  # keep the window responsive
        pygame.display.flip()

    def close(self) -> None:
        import pygame

        pygame.display.quit()


__all__ = ["DEFAULT_FRAME_SIZE", "HumanWindow", "env_scene", "rgb_frame"]
