"""Did each stage train on its own config? The stage's config against what its trainer's reward tallied.

    python docs/results/own-trainer/steering.py RUN [RUN ...] [--json OUT.json]

For every stage of each run folder: the map sides and agent count of the stage's config (``stage-NN/config.yaml``,
written when the stage's first rows are drawn), the groups the trainer's reward tallied per agents x side
(``stage.json``'s ``train.signal``: what reached the trainer's batches, counted by the reward it scored them with),
how many of those groups fall outside the stage's config (rows of another stage), the stage's training seconds, and
the evidence valid rate after it. A stage whose signal is missing (a trainer without the project's reward) says so.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from simulator.atomic import atomic_write


def stage_rows(run: Path) -> list[dict]:
    rows = []
    for record_path in sorted(run.glob("stage-*/stage.json")):
        record = json.loads(record_path.read_text())
        config = yaml.safe_load((record_path.parent / "config.yaml").read_text())
        sides = sorted(int(side) for side, size in config["sizes"].items() if size["data_ratio"] > 0)
        agents = config["agents"]
        allowed = {(a, side) for a in (range(agents[0], agents[1] + 1) if isinstance(agents, list) else [agents])
                   for side in sides}
        signal = (record.get("train") or {}).get("signal") or {}
        cells = signal.get("by_agents_size") or {}
        tallied = {key: cell["groups"] for key, cell in sorted(cells.items())}
        outside = sum(groups for key, groups in tallied.items()
                      if tuple(int(part) for part in key.split("x")) not in allowed)
        rows.append({"run": run.name, "stage": record["stage"], "config_sides": sides, "config_agents": agents,
                     "groups_by_agents_size": tallied, "groups": sum(tallied.values()),
                     "groups_outside_config": outside if tallied else None,
                     "train_seconds": round((record.get("timings") or {}).get("train", 0.0), 1),
                     "train_steps": (record.get("train") or {}).get("steps"),
                     "evidence_valid_rate": record["scores"]["valid_rate"]})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders")
    parser.add_argument("--json", type=Path, help="also write the rows here (atomically)")
    args = parser.parse_args(argv)
    rows = [row for run in args.runs for row in stage_rows(run)]
    print(f"{'run':<22} {'stage':>5} {'config sides':<14} {'groups':>6} {'outside':>7} {'train s':>8} {'steps':>5} "
          f"{'evidence':>8}")
    for row in rows:
        outside = "no signal" if row["groups_outside_config"] is None else row["groups_outside_config"]
        print(f"{row['run']:<22} {row['stage']:>5} {','.join(map(str, row['config_sides'])):<14} {row['groups']:>6} "
              f"{outside!s:>7} {row['train_seconds']:>8} {row['train_steps']!s:>5} {row['evidence_valid_rate']:>8.1%}")
    if args.json:
        atomic_write(args.json, json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
