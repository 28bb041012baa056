"""Do two run folders make the same curriculum decisions and the same test-set scores?

    python docs/results/own-trainer/same_decisions.py RUN_A RUN_B [--json OUT.json]

Reads each folder's decisions (the plan before stage 1, then every stage's), their configs, reasons and rationale,
the evidence rates of every stage, and the final test table; prints them side by side and whether they are equal.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def decisions(run: Path) -> list[dict]:
    paths = [path for path in (run / "warm_start" / "decision.json", run / "untrained" / "decision.json")
             if path.exists()]
    paths += sorted(run.glob("stage-*/decision.json"))
    out = []
    for path in paths:
        data = json.loads(path.read_text())
        config = dict(data["config"])
        config.pop("seed", None)  # the next stage's seed is set by the stage itself
        out.append({"after": path.parent.name, "reason": data["reason"], "diff": data["diff"],
                    "rationale": data["rationale"], "config": config})
    return out


def evidence(run: Path) -> list[dict]:
    out = []
    for path in [run / "warm_start" / "summary.json", *sorted(run.glob("stage-*/summary.json"))]:
        if path.exists():
            failures = json.loads(path.read_text())
            out.append({"folder": path.parent.name, "valid_rate": failures["valid_rate"],
                        "optimal_rate": failures["optimal_rate"]})
    return out


def test_table(run: Path) -> dict:
    table = json.loads((run / "final" / "table.json").read_text())
    return {key: cell["valid_rate"] for key, cell in sorted(table["cells"].items())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs=2, type=Path)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    a, b = ({"decisions": decisions(run), "evidence": evidence(run), "test": test_table(run)} for run in args.runs)
    same = {part: a[part] == b[part] for part in ("decisions", "evidence", "test")}
    for part in ("decisions", "evidence", "test"):
        print(f"{part}: {'identical' if same[part] else 'DIFFERENT'}")
    for one, two in zip(a["decisions"], b["decisions"]):
        print(f"  after {one['after']}: {one['reason']} | {'; '.join(one['diff']) or 'no change'}"
              + ("" if one == two else f"  <-> {two['reason']} | {'; '.join(two['diff'])}"))
    diffs = {key: b["test"].get(key, float("nan")) - value for key, value in a["test"].items()}
    print("test valid rate per cell, B - A: " + ", ".join(f"{key} {value:+.4f}" for key, value in diffs.items()))
    if args.json:
        from simulator.atomic import atomic_write

        document = {"runs": [str(run) for run in args.runs], "same": same, "a": a, "b": b}
        atomic_write(args.json, json.dumps(document, indent=2, sort_keys=True))
    return 0 if all(same.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
