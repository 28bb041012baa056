"""Did two runs of one seed, made by two versions of the code on one machine, train and decide the same?

    python docs/results/record-layer/run_identity.py RUN_A RUN_B [--json OUT.json]

Compares every record the two run folders hold in common (each stage's ``config.yaml``, ``decision.json``,
``summary.json``, ``stage.json`` and ``outcomes.json``, the plan before stage 1, the warm start's mark, the final
table), with what differs between two runs of the same code masked: timings (any key named ``seconds``,
``timings``, ``generation``, ``judging_and_records`` or ending in ``_seconds``), the run's identity (``run_id``, the
folder path) and the versions recorded in the manifest (not compared). Prints each record as ``same`` or the first keys
that differ; exit status 0 when every record is the same.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

MASKED = {"seconds", "timings", "generation", "judging_and_records", "run_id"}  # and any key ending in _seconds
RECORDS = ["warm_start/decision.json", "untrained/decision.json", "warm_start/model/checkpoint_done.json",
           "final/table.json"]
STAGE_RECORDS = ["config.yaml", "decision.json", "summary.json", "stage.json", "outcomes.json"]


def masked(value, folder: str):
    if isinstance(value, dict):
        return {key: masked(item, folder) for key, item in value.items()
                if key not in MASKED and not str(key).endswith("_seconds")}
    if isinstance(value, list):
        return [masked(item, folder) for item in value]
    if isinstance(value, str):
        return value.replace(folder, "RUN")
    return value


def differing(a, b, where: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b), key=str):
            out += differing(a.get(key), b.get(key), f"{where}.{key}" if where else str(key))
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differing(x, y, f"{where}[{i}]")]
    return [] if a == b else [where or "(whole)"]


def read(path: Path, run: Path):
    if path.suffix == ".json":
        return masked(json.loads(path.read_text()), str(run))
    return path.read_text().replace(str(run), "RUN")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_a", type=Path)
    parser.add_argument("run_b", type=Path)
    parser.add_argument("--json", type=Path, help="also write the per-record result here")
    args = parser.parse_args()
    names = list(RECORDS)
    for stage in sorted(args.run_a.glob("stage-*")):
        names += [f"{stage.name}/{record}" for record in STAGE_RECORDS]
    result = {}
    for name in names:
        a, b = args.run_a / name, args.run_b / name
        if not a.exists() and not b.exists():
            continue
        if not (a.exists() and b.exists()):
            result[name] = ["present in one run only"]
            continue
        result[name] = differing(read(a, args.run_a), read(b, args.run_b))
    for name, diff in result.items():
        print(f"{name}: " + ("same" if not diff else "differs at " + ", ".join(diff[:6])))
    same = all(not diff for diff in result.values())
    print(f"{len(result)} records, {'all the same' if same else 'some differ'}")
    if args.json:
        args.json.write_text(json.dumps({"run_a": str(args.run_a), "run_b": str(args.run_b), "same": same,
                                         "records": result}, indent=1) + "\n")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
