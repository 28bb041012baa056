"""``mapf-lake bench render``: how fast the viewer draws, and how fast a big replay file shows its first frame.

Figures and their targets:

* ``draw``: frames per second of :func:`render.draw.draw_frame` plus ``display.flip`` on the dummy video driver,
  for a 10x10 map with 5 agents (target >= 120/s) and a 32x32 map with 32 agents (target >= 60/s), in a
  1200x760 window with the side panel and a completion, agents gliding between steps; and the 10x10 map again
  with path trails on (target >= 120/s), reported with its ratio to the figure without trails of the same run.
  The time is the frame's drawing only (no clock sleep); the first, cold frame is reported apart.
* ``open``: a replay file of 10,000 episodes is written, then opened and its first frame drawn: in this process
  (open + decode episode 0 + draw; target < 1 s), and end to end as ``mapf-lake watch FILE --png`` in a fresh
  process (interpreter start and imports included).

The maps of the drawing benchmark are made up (random ice, holes and walks): drawing does not care whether a
trace follows the rules, and no generator certifies 32 agents on 32x32 quickly.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

TARGET_FPS = {"10x10/5": 120.0, "32x32/32": 60.0, "10x10/5+trails": 120.0}
TARGET_OPEN_S = 1.0


def _headless() -> None:
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")


def _walk_timeline(side: int, n_agents: int, n_steps: int, seed: int):
    """A made-up episode: random holes (20%), agents on distinct ice cells walking one cell per step."""
    from render.timeline import EpisodeTimeline
    from simulator import constants as C
    from simulator.types import Instance

    rng = np.random.default_rng(seed)
    grid = (rng.random((side, side)) < 0.2).astype(np.int8)
    free = np.argwhere(grid == C.ICE)
    chosen = free[rng.choice(len(free), size=2 * n_agents, replace=False)]
    instance = Instance(grid=grid, starts=chosen[:n_agents], goals=chosen[n_agents:])
    positions = np.empty((n_steps + 1, n_agents, 2), np.int32)
    positions[0] = instance.starts
    for t in range(1, n_steps + 1):
        step = C.ACTION_DELTAS[rng.integers(1, C.N_ACTIONS, size=n_agents)]
        moved = positions[t - 1] + step
        on_map = ((moved >= 0) & (moved < side)).all(axis=1)
        positions[t] = np.where(on_map[:, None], moved, positions[t - 1])
    return EpisodeTimeline(instance, positions, np.zeros((n_steps, n_agents), np.int8))


def bench_draw(side: int, n_agents: int, frames: int, size: tuple[int, int], trails: bool = False) -> dict:
    """Draw ``frames`` animation frames of a made-up ``side x side`` episode with ``n_agents`` agents (with the
    agents' path trails when ``trails``)."""
    _headless()
    import pygame

    from render.completion import CompletionText
    from render.draw import DrawCache, FrameView, draw_frame

    timeline = _walk_timeline(side, n_agents, 40, seed=side * 100 + n_agents)
    completion = CompletionText(
        "<think>plan each agent's shortest path, then resolve the conflicts</think>\n<answer>\n"
        + "\n".join(f"agent {k}: " + " ".join("UDLRW"[(k + t) % 5] for t in range(40)) for k in range(n_agents))
        + "\n</answer>",
        n_agents,
    )
    pygame.display.init()
    screen = pygame.display.set_mode(size)
    cache = DrawCache()
    frames_per_step = 20  # a 2 steps/s animation at 40 frames/s: most frames are in-between frames
    times = []
    for i in range(frames + 1):
        step = 1 + (i // frames_per_step) % timeline.n_steps
        alpha = (i % frames_per_step + 1) / frames_per_step
        view = FrameView(
            scene=timeline.scene(step), alpha=alpha, completion=completion, status="playing · 2 steps/s",
            facts=[("map", f"{side}x{side}", ""), ("agents", str(n_agents), ""), ("step", f"{step} / 40", "")],
            trails=trails,
        )
        start = time.perf_counter()
        draw_frame(screen, view, cache)
        pygame.display.flip()
        times.append(time.perf_counter() - start)
    pygame.display.quit()
    cold, warm = times[0], np.array(times[1:])
    return {
        "map": f"{side}x{side}",
        "agents": n_agents,
        "trails": trails,
        "window": f"{size[0]}x{size[1]}",
        "frames": frames,
        "fps": round(float(len(warm) / warm.sum()), 1),
        "frame_ms_median": round(float(np.median(warm)) * 1e3, 3),
        "frame_ms_p99": round(float(np.percentile(warm, 99)) * 1e3, 3),
        "first_frame_ms": round(cold * 1e3, 2),
    }


def write_big_replay(path: Path, n_episodes: int, n_instances: int = 50) -> None:
    """``n_episodes`` judged random plans (with their answer text) over ``n_instances`` certified 8x8 instances."""
    from policy.prompts import natural_answer
    from policy.rollout import judge_episodes
    from policy.scripted import make_scripted
    from replays.types import ReplayHeader
    from replays.writer import ReplayWriter
    from simulator.config import StageConfig
    from simulator.generator import generate

    config = StageConfig.from_dict(
        {"agents": [2, 4], "samples": n_instances, "seed": 11,
         "sizes": {8: {"data_ratio": 1.0, "hole_ratio": 0.2, "wait_ratio": 0.3}}}
    )
    base = generate(config).instances
    items = [base[i % len(base)] for i in range(n_episodes)]
    plans = make_scripted("random").plans(items, seed=1)
    episodes = judge_episodes(items, plans, completions=[natural_answer(plan) for plan in plans])
    header = ReplayHeader.new(run_id="bench-render", stage=0, split="eval", policy={"name": "random", "spec": "random"},
                              stage_config=config.to_dict())
    with ReplayWriter(path, header) as writer:
        writer.write_all(episodes)


def bench_open(n_episodes: int, size: tuple[int, int], n_instances: int = 50) -> dict:
    """Seconds from opening a replay of ``n_episodes`` to its first frame drawn, in process and end to end."""
    _headless()
    import pygame

    from render.draw import DrawCache, draw_frame
    from render.export import frame_view
    from render.source import ReplaySource
    from render.watch_state import WatchState

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "big.mlr"
        start = time.perf_counter()
        write_big_replay(path, n_episodes, n_instances)
        write_s = time.perf_counter() - start
        file_mb = path.stat().st_size / 2**20

        pygame.font.init()
        start = time.perf_counter()
        source = ReplaySource(path)
        state = WatchState(source, 0)
        surface = pygame.Surface(size)
        draw_frame(surface, frame_view(state), DrawCache())
        in_process_s = time.perf_counter() - start
        start = time.perf_counter()
        failures = len(source.failure_indices())
        filter_s = time.perf_counter() - start
        source.close()

        out = Path(folder) / "first.png"
        start = time.perf_counter()
        result = subprocess.run(
            [sys.executable, "-m", "curriculum.cli", "watch", str(path), "--png", str(out)],
            capture_output=True, text=True, timeout=300, cwd=Path(__file__).resolve().parents[1],
        )
        end_to_end_s = time.perf_counter() - start
        if result.returncode != 0 or not out.exists():
            raise RuntimeError(f"watch --png failed: {result.stderr.strip()}")
    return {
        "episodes": n_episodes,
        "file_mb": round(file_mb, 2),
        "write_s": round(write_s, 3),
        "first_frame_s": round(in_process_s, 4),
        "watch_png_subprocess_s": round(end_to_end_s, 3),
        "failure_filter_scan_s": round(filter_s, 4),
        "failed_episodes": failures,
    }


def run_render_bench(quick: bool = False) -> dict:
    """Every figure; ``quick`` draws fewer frames and writes 1,000 episodes (for smoke tests)."""
    from render.draw import DEFAULT_SIZE

    frames = 30 if quick else 600
    draw = [bench_draw(10, 5, frames, DEFAULT_SIZE), bench_draw(32, 32, frames, DEFAULT_SIZE),
            bench_draw(10, 5, frames, DEFAULT_SIZE, trails=True)]
    draw[2]["fps_ratio_to_no_trails"] = round(draw[2]["fps"] / draw[0]["fps"], 3)
    opening = bench_open(1_000 if quick else 10_000, DEFAULT_SIZE, 8 if quick else 50)
    checks = {
        "draw_10x10_5_fps_ok": draw[0]["fps"] >= TARGET_FPS["10x10/5"],
        "draw_32x32_32_fps_ok": draw[1]["fps"] >= TARGET_FPS["32x32/32"],
        "draw_10x10_5_trails_fps_ok": draw[2]["fps"] >= TARGET_FPS["10x10/5+trails"],
        "first_frame_under_1s": opening["first_frame_s"] < TARGET_OPEN_S,
    }
    targets = {"fps": TARGET_FPS, "first_frame_s": TARGET_OPEN_S}
    return {"quick": quick, "draw": draw, "open": opening, "targets": targets,
            "checks": checks}


def format_render_bench(results: dict) -> str:
    lines = ["render benchmark" + (" (quick: figures not comparable)" if results["quick"] else "")]
    for row in results["draw"]:
        trails = row.get("trails", False)
        target = TARGET_FPS[f"{row['map']}/{row['agents']}" + ("+trails" if trails else "")]
        ratio = f"; {row['fps_ratio_to_no_trails']:.2f}x the figure without trails" if trails else ""
        lines.append(
            f"  draw {row['map']} with {row['agents']} agents{' and trails' if trails else ''} in {row['window']}: "
            f"{row['fps']:.0f} frames/s (median {row['frame_ms_median']:.2f} ms, p99 {row['frame_ms_p99']:.2f} ms, "
            f"first frame {row['first_frame_ms']:.0f} ms; target >= {target:.0f}/s{ratio})"
        )
    opening = results["open"]
    lines.append(
        f"  open a {opening['episodes']}-episode replay and draw its first frame: "
        f"{opening['first_frame_s'] * 1e3:.0f} ms "
        f"in process (target < {TARGET_OPEN_S:.0f} s); `watch FILE --png` end to end in a new process: "
        f"{opening['watch_png_subprocess_s']:.2f} s"
    )
    lines.append("  failures-only filter, first use (scans every outcome): "
                 f"{opening['failure_filter_scan_s'] * 1e3:.0f} ms "
                 f"({opening['failed_episodes']} failed episodes)")
    lines.append("  checks: " + ", ".join(f"{name} {'yes' if ok else 'NO'}" for name, ok in results["checks"].items()))
    return "\n".join(lines)
