"""Tiny comparison over seeds 0-2: seed 0 from compare.json (beside this file), seeds 1-2 from the run folders.

Usage, from the repository root: python docs/results/tiny-compare/seeds.py RUNS_DIR > seeds.json
"""
import json
import sys
from pathlib import Path
from curriculum.reports.report import load_run, run_arm, run_seed, run_figures
from curriculum.reports.stats import mean_interval, paired_difference

root = Path("docs/results/tiny-compare")
zero = json.load(open(root / "compare.json"))["arms"]
by_arm = {}
for arm in ("rule", "fixed", "random"):
    m = zero[arm]["metrics"]
    by_arm.setdefault(arm, {})[0] = {k: m[k]["mean"] for k in ("valid", "lift", "final")}
runs = {}
for path in sorted(Path(sys.argv[1]).glob("tiny-*-s[12]")):
    if not (path / "final" / "table.json").exists():
        continue
    run = load_run(path)
    f = run_figures(run)
    f["warm"] = run.warm_start.valid_rate
    f["stages"] = [s.scores.valid_rate for s in run.stages]
    by_arm.setdefault(run_arm(run), {})[run_seed(run)] = f
out = {"seeds": [0, 1, 2], "per_seed": by_arm, "arms": {}}
for arm, seeds in by_arm.items():
    entry = {}
    for key in ("valid", "lift", "final"):
        vals = {s: f[key] for s, f in seeds.items() if key in f}
        entry[key] = mean_interval(list(vals.values())).to_dict()
        if arm != "fixed":
            ref = {s: f[key] for s, f in by_arm["fixed"].items() if key in f}
            d = paired_difference(vals, ref)
            entry[key + "_vs_fixed"] = d.to_dict() if d else None
    out["arms"][arm] = entry
warm = {0: by_arm["fixed"][0]["valid"] - by_arm["fixed"][0]["lift"]}
warm.update({s: f["warm"] for s, f in by_arm["fixed"].items() if "warm" in f})
out["warm_start"] = {"per_seed": warm, "valid": mean_interval(list(warm.values())).to_dict()}
print(json.dumps(out, indent=1))
