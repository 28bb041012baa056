"""Protocol 3's tables: `band` - `fixed` on the test set over the twelve declared seeds, and over eighteen.

    mapf-lake compare --json --primary band RUNS/proto3-fixed-* RUNS/proto3-band-* > docs/results/protocol3/compare-s301-312.json
    python docs/results/protocol3/table.py docs/results/protocol3/compare-s301-312.json \
        --earlier docs/results/protocol/primary-s101-106.json [--second-draw second-draw-s3*.json] \
        --json docs/results/protocol3/table.json

Reads both ``compare --json`` files typed (``SeedComparison.from_dict``) and prints, for the twelve alone and for
the eighteen together: each seed's test % of both arms and their difference, the paired difference's mean and 95%
interval (Student t over seeds) and the paired t test's two-sided p. With ``--second-draw`` (the files
``second_draw.py`` writes, one per seed), the same on the second, larger test draw. The verdict line applies the
declaration: the claim stands if the twelve's interval lies above 0, is retired if it contains 0.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from curriculum.loop.records import read_record  # noqa: E402
from curriculum.reports.report import SeedComparison  # noqa: E402
from curriculum.reports.stats import mean_interval, paired_p_value  # noqa: E402
from simulator.atomic import atomic_write  # noqa: E402

ARM, REFERENCE, METRIC = "band", "fixed", "test"


def test_figures(comparison: SeedComparison) -> dict[int, tuple[float, float]]:
    """``{seed: (fixed test, band test)}`` over the seeds both arms have (fractions)."""
    arm, reference = comparison.arms[ARM], comparison.arms[REFERENCE]
    return {seed: (reference.per_seed[seed][METRIC], arm.per_seed[seed][METRIC])
            for seed in sorted(set(arm.per_seed) & set(reference.per_seed))}


def second_draw_figures(paths: list[Path]) -> dict[int, tuple[float, float]]:
    """``{seed: (fixed valid, band valid)}`` from second_draw.py's files (the seed from the run folders' names)."""
    out = {}
    for path in paths:
        document = read_record(path, "second draw's figures")
        rates = {}
        for name, table in document["valid"].items():
            arm_name, _, seed_text = name.rpartition("-s")
            rates[arm_name.rpartition("-")[2]] = (int(seed_text), table["mean"]["2"]["valid_rate"])
        (seed, fixed), (_, band) = rates[REFERENCE], rates[ARM]
        out[seed] = (fixed, band)
    return out


def summary(figures: dict[int, tuple[float, float]]) -> dict:
    differences = [band - fixed for fixed, band in figures.values()]
    interval = mean_interval(differences)
    return {"seeds": sorted(figures), "per_seed": {str(seed): {"fixed": fixed, "band": band, "difference": band - fixed}
                                                   for seed, (fixed, band) in figures.items()},
            "fixed_mean": mean_interval([fixed for fixed, _ in figures.values()]).to_dict(),
            "band_mean": mean_interval([band for _, band in figures.values()]).to_dict(),
            "difference": interval.to_dict(), "p": paired_p_value(differences),
            "band_ahead": sum(difference > 0 for difference in differences),
            "band_behind": sum(difference < 0 for difference in differences)}


def render(title: str, result: dict) -> list[str]:
    lines = [f"## {title}", "", "| seed | fixed % | band % | band - fixed |", "| ---: | ---: | ---: | ---: |"]
    for seed, row in result["per_seed"].items():
        lines.append(f"| {seed} | {100 * row['fixed']:.2f} | {100 * row['band']:.2f} | {100 * row['difference']:+.2f} |")
    diff = result["difference"]
    half = f" ± {100 * diff['half_width']:.2f}" if diff["half_width"] is not None else ""
    p = f"{result['p']:.4f}" if result["p"] is not None else "-"
    lines += ["", f"{len(result['seeds'])} seeds: fixed {100 * result['fixed_mean']['mean']:.2f}, band "
              f"{100 * result['band_mean']['mean']:.2f}; band - fixed {100 * diff['mean']:+.2f}{half} points (95% "
              f"interval, Student t over seeds), paired t p = {p}; band ahead on {result['band_ahead']}, behind on "
              f"{result['band_behind']}", ""]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("twelve", type=Path, help="compare --json of the protocol's runs (seeds 301-312)")
    parser.add_argument("--earlier", type=Path, required=True, help="protocol 2's compare --json (seeds 101-106)")
    parser.add_argument("--second-draw", type=Path, nargs="*", default=[], help="second_draw.py's files")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args(argv)
    twelve = test_figures(SeedComparison.from_dict(read_record(args.twelve, "compare --json output")))
    earlier = test_figures(SeedComparison.from_dict(read_record(args.earlier, "compare --json output")))
    if set(twelve) & set(earlier):
        raise SystemExit(f"the two files share seeds {sorted(set(twelve) & set(earlier))}: they must be disjoint")
    results = {"twelve": summary(twelve), "eighteen": summary({**earlier, **twelve})}
    lines = render(f"Test set, the {len(twelve)} declared seeds", results["twelve"])
    lines += render(f"Test set, those and protocol 2's {len(earlier)}", results["eighteen"])
    if args.second_draw:
        results["second_draw"] = summary(second_draw_figures(args.second_draw))
        lines += render("Second test draw (2 agents, sides 3-6), the declared seeds", results["second_draw"])
    low = results["twelve"]["difference"]["low"]
    if len(twelve) < 12:
        lines.append(f"verdict: none yet ({len(twelve)} of the 12 declared seeds finished; the declaration decides on "
                     "all twelve)")
    else:
        verdict = ("kept: the declared seeds' interval lies above 0" if low is not None and low > 0 else
                   "retired: the declared seeds' interval contains 0 (or lies below it)")
        lines.append(f"verdict (as declared): the claim `band` beats `fixed` on the test set is {verdict}")
    print("\n".join(lines))
    if args.json is not None:
        atomic_write(args.json, json.dumps(results, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
