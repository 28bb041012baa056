"""Whose route does each answer line walk? A test of how a model finds its agent's line in the prompt.

    .venv/bin/python docs/results/transfer/align.py FOLDER_OF_CELL_REPLAYS [--json OUT]

For every answer in the folder's ``cell-AxS.mlr`` replays (``mapf-lake eval`` writes them; an answer that names
only the first ``m`` of the board's agents counts with its ``m`` lines), each answer line
``A<line>`` is walked alone (no other agent) from the start of every agent ``k`` of the board; it counts for
``(line, k)`` when it stays on the ice and ends on agent ``k``'s goal. A model that reads its own agent's line
scores mostly on the diagonal (line 0 -> agent 0); a model that finds "its" line by its distance from the answer
shifts with the agent count.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from replays.reader import ReplayReader  # noqa: E402
from simulator import constants as C  # noqa: E402
from simulator.atomic import atomic_write  # noqa: E402
from simulator.types import Instance  # noqa: E402


def walks_alone(instance: Instance, actions, agent: int) -> bool:
    """Whether ``actions``, walked alone from ``agent``'s start, stay on the ice and end on its goal."""
    row, col = (int(v) for v in instance.starts[agent])
    for action in actions:
        d_row, d_col = (int(v) for v in C.ACTION_DELTAS[int(action)])
        row, col = row + d_row, col + d_col
        if not (0 <= row < instance.height and 0 <= col < instance.width) or instance.grid[row][col] == C.HOLE:
            return False
    return (row, col) == tuple(int(v) for v in instance.goals[agent])


def _first_lines(completion: str | None, n_agents: int):
    """The plan of an answer that names fewer agents than the board has (``A0``.. ``A<m-1>``, m < n), or None."""
    from policy.parsing import parse_plan

    for m in range(n_agents - 1, 0, -1):
        parsed = parse_plan(completion or "", m)
        if parsed.plan is not None:
            return parsed.plan
    return None


def tally(path: Path) -> tuple[int, Counter]:
    """``(parsed answers, {(line, agent): answers whose line walks that agent's route})`` of one replay file."""
    parsed, counts = 0, Counter()
    with ReplayReader(path) as reader:
        for episode in reader:
            plan = episode.plan if episode.plan is not None else _first_lines(episode.completion,
                                                                               episode.instance.n_agents)
            if plan is None:
                continue
            parsed += 1
            for line, actions in enumerate(plan.sequences()):
                for agent in range(episode.instance.n_agents):
                    if walks_alone(episode.instance, actions, agent):
                        counts[line, agent] += 1
    return parsed, counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="a folder of cell-AxS.mlr replays")
    parser.add_argument("--json", type=Path, help="write the counts here too")
    args = parser.parse_args(argv)
    out = {}
    for path in sorted(args.folder.glob("cell-*.mlr")):
        parsed, counts = tally(path)
        cell = path.stem.removeprefix("cell-")
        out[cell] = {"parsed": parsed, "walks": {f"A{line}->{agent}": n for (line, agent), n in sorted(counts.items())}}
        own = sum(n for (line, agent), n in counts.items() if line == agent)
        shifted = sum(n for (line, agent), n in counts.items() if agent == line + 1)
        print(f"{cell}: {parsed} parsed; a line walks its own agent's route {own} times, the next agent's "
              f"{shifted} times; " + ", ".join(f"A{line}->{agent} {n}" for (line, agent), n in sorted(counts.items())))
    if args.json is not None:
        atomic_write(args.json, json.dumps(out, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
