"""Per run folder: the warm start's and each stage's held-out greedy valid rate per map side, and each
rejection-sampling round's kept plans and sampled valid rate, overall and per side (what the README's "Headroom by
design" quotes).

Usage, from the repository root: python docs/results/small-rft/frontier_stages.py RUN... > frontier-stages.json
"""
import json
import sys
from pathlib import Path

from curriculum.report import load_run, run_arm, run_seed


def by_size(summary: Path) -> dict[str, float]:
    return {side: figures["valid_rate"] for side, figures in json.loads(summary.read_text())["by_size"].items()}


def frontier_figures(run_dir: Path) -> dict:
    """One run folder's figures (read through ``curriculum.report.load_run``, which checks every record)."""
    run = load_run(run_dir)
    stages = [{"valid": record.scores.valid_rate,
               "by_size": by_size(run_dir / f"stage-{record.stage:02d}" / "summary.json"),
               "sizes": {str(side): spec.data_ratio for side, spec in record.config.sizes.items()},
               "rounds": [{"kept": r["kept"], "sampled_valid_rate": round(r["sampled_valid_rate"], 4),
                           "sampled_by_size": {side: round(figures["valid_rate"], 4)
                                               for side, figures in r.get("signal_by_size", {}).items()}}
                          for r in record.train.get("rounds", [])]}
              for record in run["stages"]]
    return {"arm": run_arm(run), "seed": run_seed(run),
            "warm_by_size": by_size(run_dir / "warm_start" / "summary.json"), "stages": stages}


if __name__ == "__main__":
    if len(sys.argv) < 2 or any(arg.startswith("-") for arg in sys.argv[1:]):
        sys.exit(__doc__.strip())
    runs = {Path(arg).name: frontier_figures(Path(arg)) for arg in sys.argv[1:]}
    print(json.dumps({"command": "python docs/results/small-rft/frontier_stages.py " + " ".join(
        Path(arg).name for arg in sys.argv[1:]), "runs": runs}, indent=1))
