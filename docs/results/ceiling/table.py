"""The ceiling's tables: `lookahead` (one stage of hindsight) and `band` against `fixed`, and whose proposals won.

    mapf-lake compare --json --primary band RUNS/proto3-*-s30[1-6] > docs/results/ceiling/compare-s301-306.json
    python docs/results/ceiling/table.py docs/results/ceiling/compare-s301-306.json \
        --runs RUNS/proto3-lookahead-s30[1-6] --json docs/results/ceiling/table.json

Reads the ``compare --json`` file typed (``SeedComparison.from_dict``) and prints, over the seeds all three arms
have: each seed's test % (``test-small``, 2 agents, greedy valid) of ``fixed``, ``band`` and ``lookahead``; the three
paired differences (``lookahead - fixed``, ``band - fixed``, ``lookahead - band``), each with its mean, 95% interval
(Student t over seeds) and paired t p, Holm-adjusted over the three; and ``band``'s share of the ceiling's lead,
``mean(band - fixed) / mean(lookahead - fixed)``, with a 95% percentile bootstrap interval (10,000 resamples of the
seeds, seed 0; none when a resample's lead is not positive). From the lookahead runs' ``decision.json`` files
(``--runs``): at each stage boundary, which engineers' proposals won, and each proposer's evidence valid % minus
``fixed``'s candidate's, averaged over the runs. The verdict line applies the declaration
(``docs/results/ceiling/README.md``).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from curriculum.loop.folder import read_decision  # noqa: E402
from curriculum.loop.records import read_record  # noqa: E402
from curriculum.reports.report import SeedComparison  # noqa: E402
from curriculum.reports.stats import holm, mean_interval, paired_p_value  # noqa: E402
from engineer.lookahead import best_candidate, decision_candidates  # noqa: E402
from simulator.atomic import atomic_write  # noqa: E402

ARMS = ("fixed", "band", "lookahead")
PAIRS = (("lookahead", "fixed"), ("band", "fixed"), ("lookahead", "band"))
METRIC = "test"
RESAMPLES = 10_000


def test_figures(comparison: SeedComparison) -> dict[int, dict[str, float]]:
    """``{seed: {arm: test fraction}}`` over the seeds every arm of :data:`ARMS` has."""
    missing = [arm for arm in ARMS if arm not in comparison.arms]
    if missing:
        raise SystemExit(f"the comparison has no arm {', '.join(missing)} (it has {', '.join(comparison.arms)})")
    seeds = set.intersection(*(set(comparison.arms[arm].per_seed) for arm in ARMS))
    return {seed: {arm: comparison.arms[arm].per_seed[seed][METRIC] for arm in ARMS} for seed in sorted(seeds)}


def share_interval(figures: dict[int, dict[str, float]]) -> dict:
    """``band``'s share of the ceiling's lead and its percentile bootstrap interval over seeds."""
    def share(seeds: list[int]) -> float | None:
        lead = sum(figures[s]["lookahead"] - figures[s]["fixed"] for s in seeds)
        return None if lead <= 0 else sum(figures[s]["band"] - figures[s]["fixed"] for s in seeds) / lead

    seeds = sorted(figures)
    point = share(seeds)
    rng = random.Random(0)
    draws = [share([rng.choice(seeds) for _ in seeds]) for _ in range(RESAMPLES)] if len(seeds) > 1 else []
    usable = sorted(value for value in draws if value is not None)
    interval = None
    if point is not None and len(usable) == len(draws) and usable:
        interval = [usable[int(0.025 * len(usable))], usable[int(0.975 * len(usable)) - 1]]
    return {"share": point, "interval": interval, "resamples": len(draws),
            "resamples_without_lead": len(draws) - len(usable)}


def differences(figures: dict[int, dict[str, float]]) -> dict:
    out = {}
    for arm, reference in PAIRS:
        values = [row[arm] - row[reference] for row in figures.values()]
        out[f"{arm} - {reference}"] = {"difference": mean_interval(values).to_dict(), "p": paired_p_value(values),
                                       "ahead": sum(v > 0 for v in values), "behind": sum(v < 0 for v in values)}
    usable = {name: row["p"] for name, row in out.items() if row["p"] is not None}
    for name, adjusted in holm(usable).items():
        out[name]["p_holm"] = adjusted
    return out


def stage_wins(runs: list[Path]) -> dict:
    """Per stage boundary (the stage whose decision chose the next config): how often each engineer's proposal
    won, each proposer's mean evidence valid rate minus ``fixed``'s candidate's over the runs that tried it, and the
    winner's lead over ``fixed``'s candidate run by run (what the choice bought on the evidence set, to set beside
    what the test set says it bought)."""
    wins: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    margins: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    leads: dict[str, list[float]] = defaultdict(list)
    tried: dict[str, int] = defaultdict(int)
    for run in runs:
        for path in sorted(run.glob("stage-*/decision.json")):
            candidates = decision_candidates(read_decision(path), str(path))
            if not candidates:
                continue
            stage = path.parent.name
            tried[stage] += 1
            best = best_candidate(candidates)
            for name in best.proposed_by:
                wins[stage][name] += 1
            fixed = next(row.evidence_valid_rate for row in candidates if "fixed" in row.proposed_by)
            leads[stage].append(best.evidence_valid_rate - fixed)
            for row in candidates:
                for name in row.proposed_by:
                    margins[stage][name].append(row.evidence_valid_rate - fixed)
    return {stage: {"runs": tried[stage], "wins": dict(sorted(wins[stage].items())),
                    "margin_over_fixed": {name: sum(values) / len(values)
                                          for name, values in sorted(margins[stage].items())},
                    "winner_lead": leads[stage]}
            for stage in sorted(tried)}


def render(figures: dict[int, dict[str, float]], pairs: dict, share: dict, wins: dict) -> list[str]:
    lines = ["## Test set (`test-small`, 2 agents, greedy valid %)", "", "| seed | fixed | band | lookahead |",
             "| ---: | ---: | ---: | ---: |"]
    lines += [f"| {seed} | " + " | ".join(f"{100 * row[arm]:.2f}" for arm in ARMS) + " |"
              for seed, row in figures.items()]
    lines += ["", "| difference | mean | 95% interval | paired t p | Holm p | ahead / behind |",
              "| --- | ---: | --- | ---: | ---: | --- |"]
    for name, row in pairs.items():
        diff = row["difference"]
        interval = "-" if diff["half_width"] is None else \
            f"[{100 * (diff['mean'] - diff['half_width']):+.2f}, {100 * (diff['mean'] + diff['half_width']):+.2f}]"
        p = "-" if row["p"] is None else f"{row['p']:.4f}"
        p_holm = f"{row['p_holm']:.4f}" if "p_holm" in row else "-"
        lines.append(f"| {name} | {100 * diff['mean']:+.2f} | {interval} | {p} | {p_holm} | "
                     f"{row['ahead']} / {row['behind']} |")
    if share["share"] is None:
        lines += ["", "band's share of the ceiling's lead: none (the ceiling does not lead fixed on these seeds)"]
    else:
        interval = "no interval" if share["interval"] is None else \
            f"95% bootstrap interval [{share['interval'][0]:.2f}, {share['interval'][1]:.2f}]"
        lines += ["", f"band's share of the ceiling's lead: {share['share']:.2f} ({interval}; "
                      f"{share['resamples_without_lead']} of {share['resamples']} resamples without a lead)"]
    for stage, row in wins.items():
        lines += ["", f"## Candidates of {stage}'s decision ({row['runs']} runs)", "",
                  "| engineer | wins | evidence valid minus fixed's candidate (points) |", "| --- | ---: | ---: |"]
        lines += [f"| {name} | {row['wins'].get(name, 0)} | {100 * margin:+.2f} |"
                  for name, margin in row["margin_over_fixed"].items()]
        lead = row["winner_lead"]
        lines += ["", f"the winner's evidence valid minus fixed's candidate: mean {100 * sum(lead) / len(lead):+.2f} "
                      f"points (runs: {', '.join(f'{100 * value:+.2f}' for value in lead)})"]
    return lines


def verdict(pairs: dict, seeds: int) -> str:
    if seeds < 6:
        return f"verdict: none yet ({seeds} of the 6 declared seeds finished)"
    gap = pairs["lookahead - band"]["difference"]
    low, high = gap["mean"] - (gap["half_width"] or 0), gap["mean"] + (gap["half_width"] or 0)
    if low > 0:
        return ("verdict (as declared): headroom left: the ceiling leads band (its interval lies above 0); the winning "
                "candidates are the next engineer's design input, to be confirmed on other fresh seeds")
    if high < 0:
        return "verdict (as declared): band leads the ceiling (its interval lies below 0): the trial stage misleads"
    return "verdict (as declared): the headroom at this scale is spent: lookahead - band's interval contains 0"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("comparison", type=Path, help="compare --json of the fixed, band and lookahead runs")
    parser.add_argument("--runs", type=Path, nargs="*", default=[], help="the lookahead run folders")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args(argv)
    figures = test_figures(SeedComparison.from_dict(read_record(args.comparison, "compare --json output")))
    if not figures:
        raise SystemExit("no seed has all of fixed, band and lookahead")
    pairs, share, wins = differences(figures), share_interval(figures), stage_wins(args.runs)
    lines = render(figures, pairs, share, wins) + ["", verdict(pairs, len(figures))]
    print("\n".join(lines))
    if args.json is not None:
        results = {"seeds": sorted(figures), "per_seed": {str(s): row for s, row in figures.items()},
                   "differences": pairs, "band_share": share, "stages": wins, "verdict": lines[-1]}
        atomic_write(args.json, json.dumps(results, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
