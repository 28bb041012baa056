"""Subcommands owned by the render package: ``watch`` and ``play``.

Registration imports nothing heavy (no pygame, no Textual): the handlers import what they use. Every handler
opens and checks its input (replay files, instance files, ranges) before any window or terminal app starts, so
a bad file is one line on stderr (``ReplayError``/``ConfigError``, exit status 2), never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulator.cli import add_command

if TYPE_CHECKING:
    from render.game import PlayGame, SetupValues
    from simulator.cli import Subcommands


def _resolution(text: str) -> tuple[int, int]:
    try:
        width, height = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: WIDTHxHEIGHT in pixels, e.g. 1200x760") from None
    if not (200 <= width <= 8192 and 150 <= height <= 8192):
        raise argparse.ArgumentTypeError(f"{text!r}: width 200..8192 and height 150..8192 pixels")
    return width, height


def _headless() -> None:
    # Image export draws off-screen; the dummy drivers keep SDL from looking for a display or a sound card.
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")


def _watch(args: argparse.Namespace) -> int:
    from render.source import ReplaySource
    from simulator.cli import check_new_target
    from simulator.errors import ConfigError
    from simulator.text import counted

    exports = args.png or args.gif or args.svg or args.mp4
    for flag, suffix in (("png", ".png"), ("gif", ".gif"), ("svg", ".svg"), ("mp4", ".mp4")):
        out = getattr(args, flag)
        if out and Path(out).suffix.lower() != suffix:  # --gif x.png wrote a GIF named .png
            raise ConfigError(f"--{flag}", out, f"a file name ending in {suffix} (the format --{flag} writes)")
        check_new_target(out, f"--{flag}", args.force)
    if exports:
        _headless()
    source = ReplaySource(args.path)
    try:
        total = len(source)
        if not 0 <= args.episode < total:
            raise ConfigError("--episode", args.episode, f"0..{total - 1} ({counted(total, 'episode')} in {args.path})")
        if args.step is not None:
            n_steps = source.load(args.episode).n_steps
            if not -(n_steps + 1) <= args.step <= n_steps:
                raise ConfigError("--step", args.step, f"{-(n_steps + 1)}..{n_steps}: 0 is the start and {n_steps} "
                                  f"the last step; negative counts from the end (-1 the last step, "
                                  f"{-(n_steps + 1)} the start)")
        trails = not args.no_trails
        if args.svg:  # no pygame needed
            from render.svg import export_svg

            path, count = export_svg(source, args.episode, args.svg, args.fps, trails)
            print(f"wrote {path} ({count} frames, episode {args.episode})")
        if args.png or args.gif or args.mp4:
            from render.draw import DEFAULT_SIZE
            from render.export import GIF_SIZE, export_gif, export_mp4, export_png

            if args.png:
                step = -1 if args.step is None else args.step
                path, shown = export_png(source, args.episode, step, args.png, args.resolution or DEFAULT_SIZE,
                                         trails)
                print(f"wrote {path} (episode {args.episode}, step {shown})")
            if args.gif:
                count = export_gif(source, args.episode, args.gif, args.resolution or GIF_SIZE, args.fps, args.tween,
                                   trails)
                print(f"wrote {args.gif} ({count} frames, episode {args.episode})")
            if args.mp4:
                count, (width, height) = export_mp4(source, args.episode, args.mp4, args.resolution or GIF_SIZE,
                                                    args.fps, args.tween, trails)
                print(f"wrote {args.mp4} ({count} frames of {width}x{height}, episode {args.episode})")
        if exports:
            return 0
        from render.watch_state import WatchState

        state = WatchState(source, args.episode, args.step, playing=not args.paused and args.step is None,
                           trails=trails)
        if args.terminal:
            from render.watch_app import WatchApp

            WatchApp(state).run()
        else:
            from render.draw import DEFAULT_SIZE
            from render.viewer import run_viewer

            run_viewer(state, args.resolution or DEFAULT_SIZE)
        return 0
    finally:
        source.close()


def _play(args: argparse.Namespace) -> int:
    from render.play_app import PlayApp

    game, defaults, stage_config = play_start(args)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):  # with no terminal the app waits for keys that never come
        from simulator.errors import ConfigError

        raise ConfigError("play", "standard input or output is not a terminal",
                          "a terminal to play in (to look at a board without one: mapf-lake watch FILE --png OUT, "
                          "or mapf-lake solve FILE)")
    PlayApp(game, save_path=args.save, defaults=defaults, stage_config=stage_config).run()
    return 0


def play_start(args: argparse.Namespace) -> tuple[PlayGame | None, SetupValues, dict[str, Any] | None]:
    """``(first game or None, the setup form's defaults, stage config)`` of ``play``'s arguments."""
    from dataclasses import replace

    from render.game import PlayGame, SetupValues, generate_instance, load_instance
    from simulator.text import counted

    given = {name: value for name, value in (("size", args.size), ("agents", args.agents), ("holes", args.holes),
                                             ("wait_ratio", args.wait_ratio), ("seed", args.seed))
             if value is not None}
    defaults = SetupValues(**given)
    game, stage_config = None, None
    if args.map or args.scen:
        from replays.types import InstanceLabels
        from simulator.errors import ConfigError
        from simulator.movingai import import_one

        if not (args.map and args.scen) or args.load:
            raise ConfigError("--map" if args.scen else "--scen", args.map or args.scen,
                              "--map FILE.map and --scen FILE.scen together, without --load")
        ignored = [flag for flag, value in (("--size", args.size), ("--holes", args.holes),
                                            ("--wait-ratio", args.wait_ratio), ("--seed", args.seed)) if value is not None]
        if ignored:  # the map and scenario give the board: these would be ignored without a word
            raise ConfigError("--map", args.map, f"without {', '.join(ignored)}: --map and --scen give the board "
                              "and the agents' places, so they would be ignored (leave them out)")
        agents = 2 if args.agents is None else args.agents
        item = import_one(args.map, args.scen, agents, args.episode, field_name="--episode")
        game = PlayGame(item.instance, InstanceLabels.from_labelled(item),
                        origin=f"{args.scen} instance {args.episode} ({counted(agents, 'agent')})")
    elif args.load:
        instance, labels = load_instance(args.load, args.episode)
        game = PlayGame(instance, labels, origin=args.load)
        defaults = replace(defaults, load=args.load, episode=args.episode)
    elif given:  # map flags given: generate now and start playing
        instance, labels, stage_config = generate_instance(
            defaults.size, defaults.agents, defaults.holes, defaults.wait_ratio, defaults.seed)
        game = PlayGame(instance, labels, origin=f"generated seed {defaults.seed}")
        defaults = replace(defaults, seed=defaults.seed + 1)  # n then Generate: the next map, not this one again
    return game, defaults, stage_config



def register(commands: Subcommands) -> None:
    watch = add_command(
        commands, "watch", _watch,
        help="watch replays: a pygame window, the terminal (--terminal), or files (--png/--gif/--svg/--mp4)",
        description=(
            "Show the episodes of a replay file, or of a folder of them, step by step: the lake, the agents, each "
            "failure where it happens (a step with several failures names each in a sentence), each agent's "
            "path so far, a legend of the agents' colours and the markers, the episode's metadata and the "
            "model's completion. Keys in the window: space play/pause, left/right step, up/down speed, n/p "
            "next/previous episode, f failures only, t path trails, s save a PNG, h help, q quit. With --png, "
            "--gif, --svg or --mp4 nothing opens: the frame or the whole episode is written to a file (no display "
            "needed); several of them can be given at once."
        ),
        examples=(
            "mapf-lake watch runs/rollouts",
            "mapf-lake watch runs/rollouts --terminal --episode 3",
            "mapf-lake watch runs/rollouts --episode 3 --gif episode.gif   # a folder of replays, or one .mlr file",
        ),
    )
    watch.add_argument("path", help="a replay file (.mlr) or a folder of them")
    watch.add_argument("--episode", type=int, default=0,
                       help="episode to show first, 0-based across the files (default 0)")
    watch.add_argument("--step", type=int, default=None,
                       help="step to show (negative: from the end; --png default: the last step)")
    watch.add_argument("--png", metavar="OUT", help="write the frame of --episode at --step as a PNG and exit")
    watch.add_argument("--gif", metavar="OUT", help="write the whole of --episode as an animated GIF and exit")
    watch.add_argument("--svg", metavar="OUT",
                       help="write the whole of --episode as one self-contained animated SVG (SMIL, plays in a "
                            "browser; agents step cell to cell, each failure marked and named at its step) and exit")
    watch.add_argument("--mp4", metavar="OUT",
                       help="write the whole of --episode as an H.264 MP4 video and exit (needs the video extra: "
                            "pip install 'mapf-frozenlake[video]')")
    watch.add_argument("--fps", type=float, default=3.0,
                       help="frames per second of the GIF and the MP4, steps per second of the SVG (default 3)")
    watch.add_argument("--tween", type=int, default=0,
                       help="GIF and MP4 in-between frames per step for smooth moves (default 0: one frame per step)")
    watch.add_argument("--no-trails", action="store_true",
                       help="draw no path trails (each agent's cells so far, faint in its colour) in the PNG, GIF, "
                            "SVG and MP4, and start the window without them (t shows them)")
    watch.add_argument("--resolution", type=_resolution, default=None,
                       help="window or image size WIDTHxHEIGHT (default 1200x760; GIF and MP4 960x600, rounded "
                            "down to even sizes for the MP4; the SVG is vector and ignores it)")
    watch.add_argument("--force", action="store_true", help="replace an existing --png, --gif, --svg or --mp4 file")
    watch.add_argument("--terminal", action="store_true", help="show the replays in the terminal (Textual)")
    watch.add_argument("--paused", action="store_true", help="start paused")

    play = add_command(
        commands, "play", _play,
        help="play an instance by hand in the terminal (Textual) and save the game as a replay",
        description=(
            "Play MAPF-FrozenLake in the terminal. With map flags a certified instance is generated and the game "
            "starts; with --load the instance comes from a file; with neither a setup screen asks. Keys: tab or a "
            "digit select an agent, arrows or WASD move it, space waits, enter commits the joint step, u undo, "
            "r restart, h hint (the optimal plan from here), ctrl+s save, n new game, q quit."
        ),
        examples=(
            "mapf-lake play --size 5 --agents 2 --seed 3",
            "mapf-lake gen --size 5 --n 10 --out five.jsonl && mapf-lake play --load five.jsonl --episode 3",
            "mapf-lake play --map arena.map --scen arena-even-1.scen --agents 3 --episode 2",
        ),
    )
    play.add_argument("--size", type=int, default=None, help="map side, 3..32 (default 6)")
    play.add_argument("--agents", type=int, default=None, help="agents, 1..16 (default 2)")
    play.add_argument("--holes", type=float, default=None, help="hole ratio, 0..0.9 (default 0.2)")
    play.add_argument("--wait-ratio", type=float, default=None,
                      help="chance that the instance needs a wait, 0..1 (default 0.3)")
    play.add_argument("--seed", type=int, default=None, help="generator seed (default 0)")
    play.add_argument("--load", metavar="FILE",
                      help="instance file: a replay (.mlr), `gen --out` JSON lines, instance JSON, or map text")
    play.add_argument("--episode", type=int, default=0,
                      help="with --load: the episode or line to take; with --map: the instance, made of scenario "
                           "lines EPISODE*K+1 .. EPISODE*K+K for K agents (default 0)")
    play.add_argument("--map", metavar="FILE.map",
                      help="a MovingAI map (with --scen): play one of its scenario's instances, certified by the "
                           "solver (tiles . G S are ice, @ O T W holes; --agents is the scenario lines per instance, "
                           "default 2)")
    play.add_argument("--scen", metavar="FILE.scen", help="the MovingAI scenario of --map (x = column, y = row)")
    play.add_argument("--save", metavar="OUT", default=None,
                      help="replay file that ctrl+s writes (default play-<date>-<time>.mlr here)")
