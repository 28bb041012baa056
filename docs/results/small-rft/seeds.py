"""The `small` preset's rejection-sampling runs over every seed measured: seeds 0-2 of `fixed` from per_run.csv,
every run recorded in seeds.json before (both beside this file; those run folders are not kept), and the run
folders in RUNS_DIR, which replace a recorded run of the same arm and seed (stderr says whether its figures
match the recorded ones: a rerun of the same seed reproduces them on the same code).

Usage, from the repository root: python docs/results/small-rft/seeds.py RUNS_DIR > seeds.json.new && mv
seeds.json.new docs/results/small-rft/seeds.json (RUNS_DIR holds the folders rft-ARM-sSEED of `mapf-lake train
--preset small --compare --name rft ...`). `--install TAG` records RUNS_DIR's runs as arms `ARM@TAG`, paired
with `fixed@TAG`: runs made on another installation (other library versions: the same seed's warm start then
differs) are kept apart from the recorded ones instead of replacing them.

Per arm and seed: warm start, each stage's greedy valid rate and sampled pass@1, the final suite's mean valid
rate, the greedy valid rate per size and on the instances that need a wait vs the others (warm start, then
each stage), the data ratio of every size in each stage's
config, and (rejection-sampling stages) the share of each size's sampled groups that disagree (what the bandit
engineer values) and each sampling round's own sampled valid rate per size (what the progress engineer
values; with it, each round's instances that need a wait, how many kept a plan and their sampled valid rate);
each stage's answer churn on the validation set, training seconds and share of instances with a
kept plan (pass@8); the library versions and commit the run was made with (its manifest), and with
`engineer.plan_first` the changes the engineer made to stage 1's config (`plan_diff`). Per arm: mean and 95% Student-t interval
over its seeds of valid, pass@1, lift, pass@1 lift and final, and the paired difference against `fixed` on the
seeds both have. Shares are fractions; the README prints them as percentages.
"""
import csv
import json
import sys
from pathlib import Path

from curriculum.reports.report import load_run, run_arm, run_seed
from curriculum.reports.stats import mean_interval, paired_difference

HERE = Path(__file__).resolve().parent
KEYS = ("valid", "pass1", "lift", "pass1_lift", "final")


def recorded() -> dict[int, dict]:
    """The fixed runs of seeds 0-2, from per_run.csv."""
    out = {}
    with open(HERE / "per_run.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            stages = [float(row[f"stage{n}_valid"]) for n in (1, 2, 3)]
            pass1 = [float(row[f"stage{n}_pass1"]) for n in (1, 2, 3)]
            out[int(row["seed"])] = {
                "source": "per_run.csv", "warm": float(row["warm_valid"]), "warm_pass1": float(row["warm_pass1"]),
                "stages": stages, "stages_pass1": pass1, "final": float(row["final_valid"])}
    return out


def _by_size(summary: Path) -> dict[str, float]:
    """Greedy valid rate per map side of one validation (warm start or stage)."""
    return {side: figures["valid_rate"] for side, figures in json.loads(summary.read_text())["by_size"].items()}


def _by_wait(replays: Path) -> dict[str, float]:
    """Greedy valid rate of one validation on the instances that need a wait and on the others (from its
    replays, so runs whose summaries predate the split have it too)."""
    from replays.mining import summarize_paths

    return {kind: round(group.valid_rate, 4) for kind, group in summarize_paths(replays, 0).by_wait.items()}


def from_folder(path: Path) -> dict | None:
    run = load_run(path)
    if len(run.stages) < run.run_config.stages or run.final is None:
        return None  # unfinished: left out, not guessed
    warm = json.loads((path / "warm_start" / "summary.json").read_text())
    cells = run.final["cells"].values()
    figures = {"source": path.name, "warm": warm["valid_rate"],
               "warm_pass1": (warm.get("sampled") or {}).get("valid_rate"),
               "stages": [s.scores.valid_rate for s in run.stages],
               "stages_pass1": [s.scores.sampled_valid_rate for s in run.stages],
               "final": sum(c["valid_rate"] for c in cells) / len(cells),
               "mix": [{str(side): spec.data_ratio for side, spec in s.config.sizes.items()} for s in run.stages],
               "by_size": [_by_size(path / "warm_start" / "summary.json")]
               + [_by_size(path / f"stage-{s.stage:02d}" / "summary.json") for s in run.stages],
               "by_wait": [_by_wait(path / "warm_start" / "validation.mlr")]
               + [_by_wait(path / f"stage-{s.stage:02d}" / "validation.mlr") for s in run.stages],
               "shared_from": [Path(s.shared_from).name if s.shared_from else None for s in run.stages],
               "churn": [s.churn for s in run.stages],
               "train_seconds": [round((s.timings or {}).get("train", 0.0), 1) for s in run.stages],
               "kept_share": [s.train.figures.get("solved_share") for s in run.stages],
               "versions": dict(run.manifest.versions), "git_commit": run.manifest.git_commit}
    plan = path / "warm_start" / "decision.json"  # engineer.plan_first: the engineer chose stage 1's config
    if plan.exists():
        figures["plan_diff"] = json.loads(plan.read_text()).get("diff")
    signal = [s.train.signal.to_dict() if s.train.signal is not None else None for s in run.stages]
    if any(signal):
        figures["disagreeing_groups"] = [
            {side: round(1.0 - f["zero_variance_share"], 4) for side, f in (sig or {}).get("by_size", {}).items()}
            for sig in signal]
    if any((sig or {}).get("rounds") for sig in signal):
        figures["round_sampled_valid"] = [
            [{side: round(f["valid_rate"], 4) for side, f in by_size.items()} for by_size in (sig or {}).get("rounds", [])]
            for sig in signal]
    rounds = [s.train.figures.get("rounds") or [] for s in run.stages]
    if any("needs_wait" in r for stage in rounds for r in stage):
        figures["round_needs_wait"] = [[{key: r.get(key) for key in (
            "needs_wait", "needs_wait_kept", "needs_wait_sampled_valid_rate")} for r in stage] for stage in rounds]
    return figures


def earlier() -> dict[str, dict[int, dict]]:
    """Every run seeds.json recorded before, by arm and seed (empty when there is none)."""
    path = HERE / "seeds.json"
    if not path.exists():
        return {}
    return {arm: {int(seed): figures for seed, figures in seeds.items()}
            for arm, seeds in json.loads(path.read_text())["per_seed"].items()}


def derived(figures: dict) -> dict:
    out = {"valid": figures["stages"][-1], "final": figures["final"],
           "lift": figures["stages"][-1] - figures["warm"]}
    if figures.get("stages_pass1") and figures["stages_pass1"][-1] is not None:
        out["pass1"] = figures["stages_pass1"][-1]
        if figures.get("warm_pass1") is not None:
            out["pass1_lift"] = figures["stages_pass1"][-1] - figures["warm_pass1"]
    return out


def main(runs_dir: str, install: str | None = None) -> dict:
    per_arm = earlier()
    per_arm.setdefault("fixed", {}).update(recorded())
    for path in sorted(Path(runs_dir).glob("rft-*-s*")):
        if not (path / "manifest.json").exists():
            continue
        figures = from_folder(path)
        if figures is not None:
            run = load_run(path)
            arm, seed = run_arm(run), run_seed(run)
            arm = f"{arm}@{install}" if install else arm
            before = per_arm.get(arm, {}).get(seed)
            if before is not None:
                same = all(before.get(key) == figures.get(key) for key in ("warm", "stages", "stages_pass1", "final"))
                print(f"{path.name}: {'reproduces' if same else 'DIFFERS FROM'} the recorded run "
                      f"(stages {before.get('stages')} -> {figures['stages']})", file=sys.stderr)
            per_arm.setdefault(arm, {})[seed] = figures
    arms = {}
    for arm, seeds in per_arm.items():
        values = {seed: derived(f) for seed, f in seeds.items()}
        entry = {"seeds": sorted(seeds)}
        for key in KEYS:
            got = {seed: v[key] for seed, v in values.items() if key in v}
            if got:
                entry[key] = mean_interval(list(got.values())).to_dict()
            reference = "fixed" + arm[arm.index("@"):] if "@" in arm else "fixed"
            if arm != reference and reference in per_arm:
                ref = {seed: v[key] for seed, v in ((s, derived(f)) for s, f in per_arm[reference].items()) if key in v}
                diff = paired_difference(got, ref)
                if diff is not None:
                    entry[key + "_vs_fixed"] = diff.to_dict()
        arms[arm] = entry
    warm = {seed: f["warm"] for seed, f in per_arm["fixed"].items()}
    return {"command": "python docs/results/small-rft/seeds.py RUNS_DIR [--install TAG]", "arms": arms,
            "warm_start": {"per_seed": warm, "valid": mean_interval(list(warm.values())).to_dict()},
            "per_seed": {arm: {str(seed): f for seed, f in sorted(seeds.items())} for arm, seeds in per_arm.items()}}


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) not in (1, 3) or (len(args) == 3 and args[1] != "--install"):
        sys.exit(__doc__.split("\n\n")[1])
    print(json.dumps(main(args[0], args[2] if len(args) == 3 else None), indent=1))
