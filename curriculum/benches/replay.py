"""Replay format benchmark: bytes per episode and write/read speed, against the same episodes as JSON lines.

The episode measured is the reference case: 2 agents on an 8x8 map, a plan of 20 steps per agent, a
trace of 21 positions (judged by the simulator, so events are real), generator labels, a reward with two named
components, no text. Every episode has its own instance (no instance reuse helps the writer).

Figures (each the best of ``repeats`` runs, files in a temporary folder on the local disk):
    write_eps: ``ReplayWriter`` from Episode objects to a committed file (fsync included).
    read_eps: ``for ep in ReplayReader(path)`` (lazy: structure checked, arrays decoded on access).
    read_list_eps: ``list(ReplayReader(path))`` (the same, all episodes kept alive).
    read_full_eps: ``read_replay(path)`` (every array decoded and checked: Instance, JointPlan, positions, events).
    open_first_s: open a file of ``index_episodes`` episodes and decode episode 0 in full.
JSON lines: ``json.dumps`` of an equivalent dict per line, written to a file; read back with ``json.loads`` into
full Episode objects (the JSON equivalent of ``read_full``).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from typing import Any, Callable

import numpy as np

from replays.reader import ReplayReader, read_replay
from replays.types import Episode, InstanceLabels, Outcome, ReplayHeader
from replays.writer import write_replay
from simulator import constants as C
from simulator.judge import judge_plans
from simulator.types import Instance, JointPlan

TARGET_EPS = 50_000  # write and read, episodes per second
TARGET_BYTES = 200  # bytes per reference episode, before any compression


def reference_episodes(count: int, seed: int = 0, side: int = 8, n_agents: int = 2, plan_length: int = 20) -> list[Episode]:
    """``count`` reference episodes, each on its own random instance, judged by the simulator."""
    rng = np.random.default_rng(seed)
    instances, plans = [], []
    for _ in range(count):
        grid = (rng.random((side, side)) < 0.2).astype(np.int8)
        free = np.flatnonzero(grid.ravel() == C.ICE)
        cells = rng.choice(free, 2 * n_agents, replace=False)
        points = np.stack(np.divmod(cells, side), axis=1)
        instances.append(Instance(grid=grid, starts=points[:n_agents], goals=points[n_agents:]))
        plans.append(JointPlan(actions=rng.integers(0, C.N_ACTIONS, (n_agents, plan_length)),
                               lengths=np.full(n_agents, plan_length)))
    result = judge_plans(instances, plans, record=True)
    trace_pos, trace_events = result.trace_pos, result.trace_events
    assert trace_pos is not None and trace_events is not None  # record=True keeps the traces
    episodes = []
    for b, (instance, plan) in enumerate(zip(instances, plans)):
        optimal_makespan = int(rng.integers(side, 2 * side))
        outcome = Outcome.from_judgement(result.judgement(b), optimal_makespan)
        episodes.append(Episode(
            instance=instance,
            labels=InstanceLabels(size=side, seed=int(rng.integers(2**40)), index=b, optimal_makespan=optimal_makespan,
                                  optimal_sum_of_costs=optimal_makespan + 3, sum_of_distances=optimal_makespan + 1,
                                  needs_wait=bool(b % 3 == 0)),
            plan=plan,
            parse_error=None,
            positions=trace_pos[b],
            events=trace_events[b],
            outcome=outcome,
            reward=1.0 if outcome.valid else 0.0,
            reward_components={"valid": float(outcome.valid), "optimal": float(outcome.optimal)},
        ))
    return episodes


# --- the JSON-lines baseline -----------------------------------------------------------------------------------
def episode_to_json(episode: Episode) -> dict[str, Any]:
    """The same content as a replay record, as one JSON object."""
    return {
        "instance": episode.instance.to_dict(),
        "labels": None if episode.labels is None else dict(vars(episode.labels)),
        "plan": None if episode.plan is None else episode.plan.sequences(),
        "parse_error": episode.parse_error,
        "positions": np.asarray(episode.positions).tolist(),
        "events": np.asarray(episode.events).tolist(),
        "outcome": dict(vars(episode.outcome)),
        "reward": episode.reward,
        "reward_components": episode.reward_components,
        "prompt": episode.prompt,
        "completion": episode.completion,
        "prompt_tokens": episode.prompt_tokens,
        "completion_tokens": episode.completion_tokens,
        "timings": episode.timings,
        "slip": episode.slip,
        "extra": episode.extra,
    }


def episode_from_json(data: dict[str, Any]) -> Episode:
    n_agents = len(data["instance"]["starts"])
    return Episode(
        instance=Instance.from_dict(data["instance"]),
        labels=None if data["labels"] is None else InstanceLabels(**data["labels"]),
        plan=None if data["plan"] is None else JointPlan.from_sequences(data["plan"]),
        parse_error=data["parse_error"],
        positions=np.array(data["positions"], dtype=np.int32).reshape(-1, n_agents, 2),
        events=np.array(data["events"], dtype=np.int8).reshape(-1, n_agents),
        outcome=Outcome(**data["outcome"]),
        reward=data["reward"],
        reward_components=data["reward_components"],
        prompt=data["prompt"],
        completion=data["completion"],
        prompt_tokens=data["prompt_tokens"],
        completion_tokens=data["completion_tokens"],
        timings=data["timings"],
        slip=data["slip"],
        extra=data["extra"],
    )


def _write_jsonl(path: str, episodes: list[Episode]) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        for episode in episodes:
            handle.write(json.dumps(episode_to_json(episode)) + "\n")
        handle.flush()
        os.fsync(handle.fileno())  # as the replay writer does


def _read_jsonl(path: str) -> list[Episode]:
    with open(path, encoding="utf-8") as handle:
        return [episode_from_json(json.loads(line)) for line in handle]


def _best_rate(action: Callable[[], object], count: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return count / best


def run_replay_bench(quick: bool = False) -> dict[str, Any]:
    """Measure the replay format on reference episodes (see the module docstring); returns plain numbers.

    ``quick=True`` uses 2,000 episodes and one run each (a smoke test); the full run uses 20,000 and the best
    of 3 runs, plus a 10,000-episode file for the open-and-show figure.
    """
    count = 2_000 if quick else 20_000
    repeats = 1 if quick else 3
    index_count = 2_000 if quick else 10_000
    episodes = reference_episodes(count)
    header = ReplayHeader.new(run_id="bench", stage=0, split="eval", policy={"name": "random"})
    with tempfile.TemporaryDirectory(prefix="replay-bench-") as folder:
        replay_path = os.path.join(folder, "bench.mlr")
        json_path = os.path.join(folder, "bench.jsonl")

        write_eps = _best_rate(lambda: write_replay(replay_path, header, episodes), count, repeats)
        replay_bytes = os.path.getsize(replay_path)

        def iterate() -> None:
            with ReplayReader(replay_path) as reader:
                for _ in reader:
                    pass

        def read_list() -> None:
            with ReplayReader(replay_path) as reader:
                list(reader)

        read_eps = _best_rate(iterate, count, repeats)
        read_list_eps = _best_rate(read_list, count, repeats)
        read_full_eps = _best_rate(lambda: read_replay(replay_path), count, repeats)
        _, round_trip = read_replay(replay_path)
        assert round_trip == episodes, "the benchmark's episodes did not read back equal"

        write_replay(replay_path, header, episodes[:index_count])
        start = time.perf_counter()
        with ReplayReader(replay_path) as reader:
            reader[0].materialized()
        open_first_s = time.perf_counter() - start

        json_write_eps = _best_rate(lambda: _write_jsonl(json_path, episodes), count, repeats)
        json_bytes = os.path.getsize(json_path)
        json_read_eps = _best_rate(lambda: _read_jsonl(json_path), count, repeats)

    # The file's fixed cost (preamble, header, trailer) is spread over the episodes; the index is 8 bytes each.
    bytes_per_episode = replay_bytes / count
    json_bytes_per_episode = json_bytes / count
    summary = bench_summary(10_000 if quick else 100_000)
    return {
        "summary": summary,
        "episodes": count,
        "episode": "2 agents, 8x8, plan 20 per agent, 21 positions, labels, 2 reward components, no text",
        "replay": {
            "bytes_per_episode": bytes_per_episode,
            "write_eps": write_eps,
            "read_eps": read_eps,
            "read_list_eps": read_list_eps,
            "read_full_eps": read_full_eps,
            "open_first_s": open_first_s,
            "open_first_episodes": index_count,
        },
        "jsonl": {
            "bytes_per_episode": json_bytes_per_episode,
            "write_eps": json_write_eps,
            "read_full_eps": json_read_eps,
        },
        "ratios": {
            "jsonl_bytes_over_replay": json_bytes_per_episode / bytes_per_episode,
            "write_speed_replay_over_jsonl": write_eps / json_write_eps,
            "read_speed_replay_over_jsonl": read_eps / json_read_eps,
            "read_full_speed_replay_over_jsonl": read_full_eps / json_read_eps,
        },
        "targets": {
            "write_eps": TARGET_EPS,
            "read_eps": TARGET_EPS,
            "bytes_per_episode": TARGET_BYTES,
            "met": write_eps >= TARGET_EPS and read_eps >= TARGET_EPS and bytes_per_episode <= TARGET_BYTES,
        },
    }


def bench_summary(count: int = 100_000) -> dict[str, Any]:
    """Seconds to build the failure summary of ``count`` episodes read from a replay file.

    The episodes are greedy-policy rollouts on 1,000 generated 2-agent 8x8 instances (about half fail, with
    real conflicts), repeated to ``count``; reading the file is included in the time.
    """
    from policy.rollout import judge_episodes
    from policy.scripted import make_scripted
    from replays.mining import summarize_paths
    from simulator.config import StageConfig
    from simulator.generator import generate

    stage = StageConfig.from_dict(
        {"agents": 2, "samples": 1000, "seed": 1, "sizes": {8: {"data_ratio": 1, "hole_ratio": 0.2, "wait_ratio": 0.5}}}
    )
    items = generate(stage).instances
    episodes = judge_episodes(items, make_scripted("greedy").plans(items))
    header = ReplayHeader.new(run_id="bench", stage=0, split="rollout", policy={"name": "greedy"})
    with tempfile.TemporaryDirectory(prefix="summary-bench-") as folder:
        path = os.path.join(folder, "greedy.mlr")
        write_replay(path, header, (episodes * (count // len(episodes) + 1))[:count])
        best = float("inf")
        for _ in range(2):
            start = time.perf_counter()
            summary = summarize_paths(path)
            best = min(best, time.perf_counter() - start)
    return {"episodes": summary.episodes, "seconds": best, "failed": summary.episodes - summary.valid}


def format_replay_bench(result: dict[str, Any]) -> str:
    """A short human-readable table of :func:`run_replay_bench`'s result."""
    replay, jsonl, ratios, targets = result["replay"], result["jsonl"], result["ratios"], result["targets"]
    lines = [
        f"replay format bench: {result['episodes']} episodes ({result['episode']})",
        f"{'':24}{'replay (.mlr)':>16}{'JSON lines':>16}{'ratio':>10}",
        f"{'bytes / episode':24}{replay['bytes_per_episode']:>16.1f}{jsonl['bytes_per_episode']:>16.1f}"
        f"{ratios['jsonl_bytes_over_replay']:>9.1f}x",
        f"{'write episodes/s':24}{replay['write_eps']:>16,.0f}{jsonl['write_eps']:>16,.0f}"
        f"{ratios['write_speed_replay_over_jsonl']:>9.1f}x",
        f"{'read episodes/s (lazy)':24}{replay['read_eps']:>16,.0f}{jsonl['read_full_eps']:>16,.0f}"
        f"{ratios['read_speed_replay_over_jsonl']:>9.1f}x",
        f"{'read, list() (lazy)':24}{replay['read_list_eps']:>16,.0f}",
        f"{'read, full decode':24}{replay['read_full_eps']:>16,.0f}{jsonl['read_full_eps']:>16,.0f}"
        f"{ratios['read_full_speed_replay_over_jsonl']:>9.1f}x",
        f"open a {replay['open_first_episodes']:,}-episode file and decode episode 0: {replay['open_first_s'] * 1000:.1f} ms",
        f"targets: write and read >= {targets['write_eps']:,}/s, <= {targets['bytes_per_episode']} bytes/episode: "
        + ("met" if targets["met"] else "NOT met"),
    ]
    if "summary" in result:
        summary = result["summary"]
        lines.append(
            f"failure summary of {summary['episodes']:,} episodes ({summary['failed']:,} failed), file read included: "
            f"{summary['seconds']:.2f} s (target < 2 s)"
        )
    return "\n".join(lines)
