"""Per run folder: the warm start's and each stage's held-out greedy valid rate per map side, and each
rejection-sampling round's kept plans and sampled valid rate, overall and per side (what the README's "Headroom by
design" quotes); the held-out [valid, episodes] per map side and optimal makespan of the warm start and of the
last stage, per run and summed per arm over its runs (``pooled``: what "Plan length is the frontier" quotes).

Usage, from the repository root: python docs/results/small-rft/frontier_stages.py RUN... > frontier-stages.json
"""
import json
import re
import sys
from pathlib import Path

from curriculum.reports.report import load_run, run_arm, run_seed
from curriculum.loop.folder import read_summary as _read_summary


def by_size(summary: Path) -> dict[str, float]:
    return {side: figures["valid_rate"] for side, figures in json.loads(summary.read_text())["by_size"].items()}


def by_length(folder: Path) -> dict[str, list[int]]:
    """``{"side:makespan": [valid, episodes]}`` of a validation folder (from its replays when the summary predates
    the split)."""
    split = _read_summary(folder / "summary.json").failures.by_size_makespan
    return {f"{side}:{makespan}": [group.valid, group.episodes] for (side, makespan), group in split.items()}


def pooled(runs: dict[str, dict]) -> dict[str, dict[str, dict[str, list[int]]]]:
    """Per arm, ``warm`` and ``last`` split by makespan summed over the arm's runs."""
    out: dict[str, dict[str, dict[str, list[int]]]] = {}
    for figures in runs.values():
        arm = out.setdefault(figures["arm"], {"warm": {}, "last": {}})
        for name, source in (("warm", "warm_by_length"), ("last", "last_by_length")):
            for key, (valid, episodes) in figures[source].items():
                cell = arm[name].setdefault(key, [0, 0])
                cell[0] += valid
                cell[1] += episodes
    return out


def frontier_figures(run_dir: Path) -> dict:
    """One run folder's figures (read through ``curriculum.reports.report.load_run``, which checks every record)."""
    run = load_run(run_dir)
    stages = [{"valid": record.scores.valid_rate,
               "by_size": by_size(run_dir / f"stage-{record.stage:02d}" / "summary.json"),
               "sizes": {str(side): spec.data_ratio for side, spec in record.config.sizes.items()},
               "rounds": [{"kept": r["kept"], "sampled_valid_rate": round(r["sampled_valid_rate"], 4),
                           "sampled_by_size": {side: round(figures["valid_rate"], 4)
                                               for side, figures in r.get("signal_by_size", {}).items()}}
                          for r in record.train.figures.get("rounds", [])]}
              for record in run.stages]
    last = run_dir / f"stage-{run.stages[-1].stage:02d}" if run.stages else run_dir / "warm_start"
    return {"arm": run_arm(run), "seed": run_seed(run),
            "warm_by_size": by_size(run_dir / "warm_start" / "summary.json"), "stages": stages,
            "warm_by_length": by_length(run_dir / "warm_start"), "last_by_length": by_length(last)}


if __name__ == "__main__":
    if len(sys.argv) < 2 or any(arg.startswith("-") for arg in sys.argv[1:]):
        sys.exit(__doc__.strip())
    runs = {Path(arg).name: frontier_figures(Path(arg)) for arg in sys.argv[1:]}
    text = json.dumps({"command": "python docs/results/small-rft/frontier_stages.py " + " ".join(
        Path(arg).name for arg in sys.argv[1:]), "runs": runs, "pooled": pooled(runs)}, indent=1)
    print(re.sub(r"\[\s+(-?\d+),\s+(-?\d+)\s+\]", r"[\1, \2]", text))  # a [valid, episodes] pair on one line
