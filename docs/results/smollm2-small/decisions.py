"""Every decision the SmolLM2 engineer made in the declared runs: seconds, tokens, outcome, what it changed, why.

    python docs/results/smollm2-small/decisions.py RUNS/smol6-smollm2-engineer-s70? --json decisions.json

Reads each run's recorded decisions (the plan before stage 1 in ``warm_start/decision.json``, then
``stage-NN/decision.json``) and prints one row per decision: the seconds the answer took, prompt and answer tokens,
the outcome (kept, changed, rejected), the diff, the refusal or repair notes and the rationale (cut to 100
characters). The JSON holds the same rows with the rationale whole. It reads no test-set figure.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from curriculum.loop.folder import read_decision  # noqa: E402
from simulator.atomic import atomic_write  # noqa: E402


def decision_rows(run: Path) -> list[dict]:
    paths = [run / "warm_start" / "decision.json", *sorted(run.glob("stage-*/decision.json"))]
    rows = []
    for path in paths:
        if not path.exists():
            continue
        decision = read_decision(path)  # the loop's checked reader: a bad record is one line naming the file
        rows.append({
            "run": run.name, "decision": "before stage 1" if path.parent.name == "warm_start"
            else f"after stage {int(path.parent.name.split('-')[1])}",
            "seconds": decision.seconds, "prompt_tokens": decision.details.get("prompt_tokens"),
            "answer_tokens": decision.details.get("completion_tokens"), "outcome": decision.outcome,
            "accepted": decision.accepted, "diff": decision.diff, "reason": decision.reason,
            "repairs": decision.repairs, "rationale": decision.rationale})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    rows = [row for run in args.runs for row in decision_rows(run)]
    for row in rows:
        seconds = f"{row['seconds']:.1f}" if isinstance(row["seconds"], (int, float)) else "-"
        print(f"{row['run']} {row['decision']}: {seconds} s, {row['prompt_tokens']} / {row['answer_tokens']} tokens, "
              f"{row['outcome']} ({row['reason']}); {'; '.join(row['diff']) or 'no change'}; "
              f"rationale {str(row['rationale'] or '')[:100]!r}")
    if args.json:
        atomic_write(args.json, json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
