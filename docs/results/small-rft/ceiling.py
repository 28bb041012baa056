"""What a checkpoint's greedy answers do on the held-out instances that need a wait and on the others.

For each validation replay (a run's ``warm_start/validation.mlr`` or ``stage-NN/validation.mlr``): per map side,
how many held-out instances that need a wait (no plan in which each agent walks a shortest path is free of
conflicts) and how many of the others the greedy answer solves, and how many answers write a wait action at all.
It separates "the policy cannot find the timing" from "the policy never waits".

Usage, from the repository root: python docs/results/small-rft/ceiling.py RUN/warm_start/validation.mlr ...
> ceiling.json (a table goes to stderr).
"""
import json
import sys

import numpy as np

from replays.reader import read_replay
from simulator import constants as C


def tally(path: str) -> dict:
    _, episodes = read_replay(path)
    out: dict[str, dict] = {}
    for episode in episodes:
        waits = bool(episode.labels is not None and episode.labels.needs_wait)
        row = out.setdefault(f"{episode.instance.grid.shape[0]}:{'needs_wait' if waits else 'no_wait'}",
                             {"episodes": 0, "valid": 0, "writes_a_wait": 0})
        row["episodes"] += 1
        row["valid"] += int(episode.outcome.valid)
        plan = episode.plan
        if plan is not None:
            actions, lengths = np.asarray(plan.actions), np.asarray(plan.lengths)
            row["writes_a_wait"] += int(any((actions[k, :lengths[k]] == C.WAIT).any() for k in range(len(lengths))))
    return dict(sorted(out.items()))


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__, file=sys.stderr)
        sys.exit(0 if len(sys.argv) > 1 else 2)
    result = {}
    for path in sys.argv[1:]:
        rows = tally(path)
        result[path] = rows
        for kind in ("needs_wait", "no_wait"):
            parts = [f"{key.split(':')[0]}x: {row['valid']}/{row['episodes']} (waits written {row['writes_a_wait']})"
                     for key, row in rows.items() if key.endswith(kind)]
            print(f"{path} {kind}: " + ", ".join(parts), file=sys.stderr)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
