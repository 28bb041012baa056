"""The ``smol-self`` warm start, swept: learning rate and steps, scored on the run's evidence set.

    MAPF_LAKE_MODELS=MODELS python docs/results/smol-self/warmstart.py --out RUNS/ws-sweep \
        --setting 1e-4:100 --setting 3e-4:100 --setting 1e-3:100 --json docs/results/smol-self/warmstart.json

Each ``--setting LR:STEPS`` is the ``smol-self`` preset's warm start (seed 0, SmolLM2-135M-Instruct, 1,600 of the
solver's plans at batch 16, cosine schedule) with that learning rate and step count, trained into its own folder
under ``--out`` by the run's own code (``Run._warm_start``: the same training and the same validation a run does),
then scored greedily on the run's evidence set (200 instances, 2 agents, sides 3-6). Per setting: evidence valid
and optimal %, the share of answers that did not parse, training seconds, and this process's peak resident memory.
A setting whose folder is finished is read back, so a killed sweep resumes; the JSON is rewritten after each
setting. The test set is not read.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from simulator.atomic import atomic_write  # noqa: E402


def parse_setting(text: str) -> tuple[float, int]:
    """``LR:STEPS`` -> (learning rate, steps), each checked."""
    rate_text, _, steps_text = text.partition(":")
    try:
        rate, steps = float(rate_text), int(steps_text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--setting {text!r}: expected LR:STEPS, e.g. 3e-4:100") from None
    if not 0 < rate <= 1e-2 or not 1 <= steps <= 10_000:
        raise argparse.ArgumentTypeError(f"--setting {text!r}: the learning rate must lie in (0, 0.01] and the "
                                         f"steps in 1..10000")
    return rate, steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="parent folder of the settings' run folders")
    parser.add_argument("--setting", type=parse_setting, action="append", required=True,
                        help="LR:STEPS, repeat for more")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args(argv)

    from curriculum.config import preset
    from curriculum.loop.records import read_record
    from curriculum.training.run import Run

    rows = []
    for rate, steps in args.setting:
        name = f"ws-lr{rate:g}-steps{steps}-s{args.seed}"
        config = preset("smol-self").with_overrides(**{
            "seed": args.seed, "name": name, "output_dir": str(args.out),
            "warm_start.learning_rate": rate, "warm_start.steps": steps})
        run = Run(config)
        run.curriculum.open()
        started = time.perf_counter()
        run._warm_start(run.initial_model())
        seconds = time.perf_counter() - started
        folder = config.run_dir / "warm_start"
        summary = read_record(folder / "summary.json", "validation summary")  # the loop's checked reader
        report = read_record(folder / "model" / "checkpoint_done.json", "checkpoint mark")
        episodes = summary["episodes"]
        rows.append({
            "setting": f"{rate:g}:{steps}", "learning_rate": rate, "steps": steps, "seed": args.seed,
            "evidence_instances": episodes,
            "valid_pct": round(100 * summary["valid_rate"], 2), "optimal_pct": round(100 * summary["optimal_rate"], 2),
            "unparsed_pct": round(100 * summary["failures"]["parse_error"] / max(episodes, 1), 2),
            "train_seconds": report.get("seconds"), "seconds_this_call": round(seconds, 1),
            "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2),
        })
        print(json.dumps(rows[-1]), flush=True)
        atomic_write(args.json, json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
