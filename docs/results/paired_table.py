"""Declared paired comparisons of a multi-arm, multi-seed run: each seed's figures, the paired difference's mean and
95% interval, paired t p, and Holm p over the declared family.

    mapf-lake compare --json RUNS/smol6-* > compare.json
    python docs/results/paired_table.py compare.json [more.json ...] --prefix smol6- \
        --family smollm2-engineer fixed --family smollm2-engineer band --also band fixed \
        [--second-draw second-draw-s7*.json] --json table.json

``--family ARM REFERENCE`` (repeatable): a comparison of the declared family, Holm-adjusted over the family;
``--also ARM REFERENCE``: reported beside it, outside the family (no adjustment). ``--share A B C D``: the share
``mean(A - B) / mean(C - D)`` over the seeds all four arms have, with a 95% percentile bootstrap interval (10,000
resamples of the seeds, seed 0), reported only where ``C - D``'s 95% interval lies above 0 (the controls page's
"the reading's share of the gain"). Figures are the test set's (``compare --json``'s ``test``: 2 agents,
greedy valid %) and, with ``--second-draw`` (the files ``docs/results/protocol3/second_draw.py`` writes, one per
seed), the same comparisons on the second fresh draw; a run folder's arm is its name without ``--prefix`` and the
``-sSEED`` suffix. Several ``compare --json`` files are read as one, each a part of the seeds (a machine that keeps
no run folder between sessions compares each session's seeds, and the parts meet here). Only seeds both arms of a
comparison have are paired; the table says how many.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from curriculum.loop.records import read_record  # noqa: E402
from curriculum.reports.report import SeedComparison  # noqa: E402
from curriculum.reports.stats import holm, mean_interval, paired_p_value  # noqa: E402
from simulator.atomic import atomic_write  # noqa: E402

Figures = dict[str, dict[int, float]]  # {arm: {seed: valid rate}}


def test_figures(paths: list[Path]) -> Figures:
    """Each arm's test figure per seed, from one or more ``compare --json`` files (one per session's seeds, say):
    a seed two files both give an arm must have the same figure there, else the files are of different runs."""
    out: Figures = {}
    where: dict[tuple[str, int], Path] = {}
    for path in paths:
        comparison = SeedComparison.from_dict(read_record(path, "compare --json output"))
        for arm, entry in comparison.arms.items():
            for seed, figures in entry.per_seed.items():
                if figures.get("test") is None:
                    continue
                known = out.setdefault(arm, {}).get(seed)
                if known is not None and known != figures["test"]:
                    raise SystemExit(f"{arm} seed {seed}: {where[arm, seed]} says {known}, {path} says "
                                     f"{figures['test']} (files of different runs)")
                out[arm][seed], where[arm, seed] = figures["test"], path
    return out


def second_draw_figures(paths: list[Path], prefix: str) -> Figures:
    out: Figures = {}
    for path in paths:
        document = read_record(path, "second draw's figures", ("valid",))
        for name, table in document["valid"].items():
            arm, _, seed = name.rpartition("-s")
            arm = arm[len(prefix):] if prefix and arm.startswith(prefix) else arm
            out.setdefault(arm, {})[int(seed)] = table["mean"]["2"]["valid_rate"]
    return out


def comparison(figures: Figures, arm: str, reference: str) -> dict:
    if arm not in figures or reference not in figures:
        missing = arm if arm not in figures else reference
        raise SystemExit(f"no runs of arm {missing!r} (arms: {', '.join(sorted(figures))})")
    seeds = sorted(set(figures[arm]) & set(figures[reference]))
    differences = [figures[arm][seed] - figures[reference][seed] for seed in seeds]
    interval = mean_interval(differences) if seeds else None
    return {"arm": arm, "reference": reference, "seeds": seeds,
            "per_seed": {str(seed): {"arm": figures[arm][seed], "reference": figures[reference][seed],
                                     "difference": difference} for seed, difference in zip(seeds, differences)},
            "difference": interval.to_dict() if interval is not None else None,
            "p": paired_p_value(differences) if len(seeds) >= 2 else None,
            "ahead": sum(d > 0 for d in differences), "behind": sum(d < 0 for d in differences)}


def share(figures: Figures, arms: tuple[str, str, str, str], resamples: int = 10_000) -> dict:
    """``mean(A - B) / mean(C - D)`` over the seeds all four arms have, its bootstrap interval, and whether the
    denominator's 95% interval lies above 0 (the share is read only then)."""
    import numpy as np

    a, b, c, d = arms
    for arm in arms:
        if arm not in figures:
            raise SystemExit(f"no runs of arm {arm!r} (arms: {', '.join(sorted(figures))})")
    seeds = sorted(set.intersection(*(set(figures[arm]) for arm in arms)))
    top = np.array([figures[a][seed] - figures[b][seed] for seed in seeds])
    bottom = np.array([figures[c][seed] - figures[d][seed] for seed in seeds])
    denominator = mean_interval(list(bottom)) if len(seeds) else None
    readable = bool(denominator is not None and denominator.low is not None and denominator.low > 0)
    out = {"of": f"({a} - {b}) / ({c} - {d})", "seeds": seeds, "reported": readable, "share": None, "low": None,
           "high": None}
    if readable:
        rng = np.random.default_rng(0)
        picks = rng.integers(0, len(seeds), size=(resamples, len(seeds)))
        means = bottom[picks].mean(axis=1)
        ratios = top[picks].mean(axis=1)[means != 0] / means[means != 0]
        out.update(share=float(top.mean() / bottom.mean()), low=float(np.percentile(ratios, 2.5)),
                   high=float(np.percentile(ratios, 97.5)))
    return out


def table(figures: Figures, family: list[tuple[str, str]], also: list[tuple[str, str]]) -> dict:
    rows = {f"{arm} - {reference}": comparison(figures, arm, reference) for arm, reference in family}
    ps = {name: row["p"] for name, row in rows.items() if row["p"] is not None}
    for name, adjusted in (holm(ps) if ps else {}).items():
        rows[name]["p_holm"] = adjusted
    for arm, reference in also:
        rows[f"{arm} - {reference}"] = {**comparison(figures, arm, reference), "outside_family": True}
    means = {arm: mean_interval(list(by_seed.values())).to_dict() for arm, by_seed in figures.items() if by_seed}
    return {"comparisons": rows, "arm_means": means}


def render(title: str, result: dict) -> list[str]:
    lines = [f"## {title}", "", "| comparison | seeds | mean difference (95% interval) | p | Holm p | ahead / behind |",
             "| --- | ---: | --- | ---: | ---: | --- |"]
    for name, row in result["comparisons"].items():
        diff = row["difference"]
        if diff is None:
            lines.append(f"| `{name}` | 0 | - | - | - | - |")
            continue
        half = f" ± {100 * diff['half_width']:.2f}" if diff["half_width"] is not None else ""
        p = f"{row['p']:.3g}" if row["p"] is not None else "-"
        holm_p = "outside the family" if row.get("outside_family") else (
            f"{row['p_holm']:.3g}" if row.get("p_holm") is not None else "-")
        lines.append(f"| `{name}` | {len(row['seeds'])} | {100 * diff['mean']:+.2f}{half} | {p} | {holm_p} | "
                     f"{row['ahead']} / {row['behind']} |")
    lines += ["", "Per seed (valid %):", ""]
    arms = list(result["arm_means"])
    seeds = sorted({int(seed) for row in result["comparisons"].values() for seed in row["per_seed"]})
    lines += ["| seed | " + " | ".join(f"`{arm}`" for arm in arms) + " |", "| ---: |" + " ---: |" * len(arms)]
    by_arm: dict[str, dict[int, float]] = {}
    for row in result["comparisons"].values():
        for seed, figures in row["per_seed"].items():
            by_arm.setdefault(row["arm"], {})[int(seed)] = figures["arm"]
            by_arm.setdefault(row["reference"], {})[int(seed)] = figures["reference"]
    for seed in seeds:
        cells = [f"{100 * by_arm[arm][seed]:.2f}" if seed in by_arm.get(arm, {}) else "-" for arm in arms]
        lines.append(f"| {seed} | " + " | ".join(cells) + " |")
    means = " | ".join(f"{100 * result['arm_means'][arm]['mean']:.2f}" for arm in arms)
    lines += [f"| mean | {means} |", ""]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("compare", type=Path, nargs="+",
                        help="compare --json of the runs (several files: their seeds together, e.g. one per session)")
    parser.add_argument("--family", nargs=2, action="append", default=[], metavar=("ARM", "REFERENCE"),
                        help="a declared comparison (Holm over all --family ones)")
    parser.add_argument("--also", nargs=2, action="append", default=[], metavar=("ARM", "REFERENCE"),
                        help="a comparison reported outside the family")
    parser.add_argument("--share", nargs=4, metavar=("A", "B", "C", "D"),
                        help="report mean(A - B) / mean(C - D) with a bootstrap interval")
    parser.add_argument("--prefix", default="", help="the run names' prefix before the arm (second-draw files)")
    parser.add_argument("--second-draw", type=Path, nargs="*", default=[], help="second_draw.py's files")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args(argv)
    if not args.family:
        parser.error("at least one --family ARM REFERENCE (the declared comparisons)")
    family, also = [tuple(pair) for pair in args.family], [tuple(pair) for pair in args.also]
    results = {"test": table(test_figures(args.compare), family, also)}
    lines = render("Test set (2 agents, greedy valid %)", results["test"])
    if args.share:
        ratio = results["test"]["share"] = share(test_figures(args.compare), tuple(args.share))
        lines += [f"share {ratio['of']} on the test set over {len(ratio['seeds'])} seeds: " + (
            f"{ratio['share']:.2f} (95% bootstrap interval {ratio['low']:.2f} to {ratio['high']:.2f})"
            if ratio["reported"] else "not reported (the denominator's 95% interval does not lie above 0)"), ""]
    if args.second_draw:
        results["second_draw"] = table(second_draw_figures(args.second_draw, args.prefix), family, also)
        lines += render("Second test draw (2 agents, sides 3-6)", results["second_draw"])
    print("\n".join(lines))
    if args.json is not None:
        atomic_write(args.json, json.dumps(results, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
