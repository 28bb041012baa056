"""Per run folder: the warm start's and each stage's held-out greedy valid rate per map side, and each
rejection-sampling round's kept plans and sampled valid rate (what the README's "Headroom by design" quotes).

Usage, from the repository root: python docs/results/small-rft/frontier_stages.py RUN... > frontier-stages.json
"""
import json
import sys
from pathlib import Path


def by_size(summary: Path) -> dict[str, float]:
    return {side: figures["valid_rate"] for side, figures in json.loads(summary.read_text())["by_size"].items()}


def run_figures(run: Path) -> dict:
    manifest = json.loads((run / "manifest.json").read_text())["run_config"]
    stages = []
    for number in range(1, int(manifest["stages"]) + 1):
        folder = run / f"stage-{number:02d}"
        if not (folder / "stage.json").exists():
            break
        record = json.loads((folder / "stage.json").read_text())
        stages.append({"valid": record["scores"]["valid_rate"], "by_size": by_size(folder / "summary.json"),
                       "sizes": {side: spec["data_ratio"] for side, spec in record["config"]["sizes"].items()},
                       "rounds": [{"kept": r["kept"], "sampled_valid_rate": round(r["sampled_valid_rate"], 4)}
                                  for r in record["train"].get("rounds", [])]})
    return {"arm": manifest["arm"], "seed": manifest["seed"],
            "warm_by_size": by_size(run / "warm_start" / "summary.json"), "stages": stages}


if __name__ == "__main__":
    runs = {Path(arg).name: run_figures(Path(arg)) for arg in sys.argv[1:]}
    print(json.dumps({"command": "python docs/results/small-rft/frontier_stages.py " + " ".join(
        Path(arg).name for arg in sys.argv[1:]), "runs": runs}, indent=1))
