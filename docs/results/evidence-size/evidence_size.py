"""How large must the engineer's evidence set be for a choice among candidates to be skill rather than luck?

    python docs/results/evidence-size/evidence_size.py RUNS/esize-lookahead-s80[1-3] --per-side 1000 \
        --sizes 400,800,1600,3200 --resamples 2000 --work RUNS/evidence-size \
        --json docs/results/evidence-size/figures.json

A study split over sessions (a machine that keeps no run folder between them) scores each session's runs into its
own file, then pools the files: ``evidence_size.py --join part-s801.json --join part-s802.json ... --json
figures.json`` (the parts must share ``--per-side``, ``--sizes``, ``--resamples`` and ``--seed``; a run's
subsets come from a random stream set by ``--seed`` and the boundary alone, never by the other runs, so the pooled
figures are those of one invocation over all the runs).

At each boundary of each ``lookahead`` run, every candidate's trial checkpoint (``stage-NN/candidates/``: the same
checkpoint trained one stage on each engineer's proposal) answers two fresh draws from the evidence set's own
distribution, ``A`` and ``B`` (``--per-side`` instances per side each, their own draw seeds). Removed by content
before any model answers: the test suite, the run's evidence set, everything the run and any candidate trained on,
and from ``B`` everything in ``A``. Greedy answers, the run's decoding; no test-set answer is read. Each
candidate's answers are kept per instance under ``--work`` (a killed study resumes there).

Then, for each evidence size ``n`` of ``--sizes``: ``--resamples`` times, ``n`` instances of ``A`` are drawn
(stratified: ``n / sides`` per side, without replacement), the candidate with the best valid rate on them is chosen
(the first of equals, ``fixed``'s candidate first, as the lookahead chooses), and what the choice is worth is read
on all of ``B``: the chosen candidate's valid rate minus ``fixed``'s candidate's. Reported per size, pooled over the
boundaries: that lead (mean over resamples, then mean and 95% interval over boundaries), the share of choices that
are ``B``'s best candidate, the mean Spearman correlation between the ``n``-instance rates and ``B``'s, and the
evidence cost of one boundary at that size (each candidate's measured seconds per instance times ``n``, summed over
the candidates, beside the trial training's seconds). Also per boundary: every candidate's rates on ``A`` and ``B``
and its paired difference from ``fixed``'s candidate on ``B`` with its standard error, so the spread of what the
candidates are truly worth can be read against the noise of a given size.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from curriculum.config import load_run_config  # noqa: E402
from curriculum.loop.records import read_record  # noqa: E402
from curriculum.loop.sets import RunSets, training_seed  # noqa: E402
from curriculum.loop.validation import EvaluationModels  # noqa: E402
from curriculum.reports.stats import mean_interval  # noqa: E402
from curriculum.training.run import candidate_folder  # noqa: E402
from policy.prompts import get_style  # noqa: E402
from policy.rollout import judge_answers  # noqa: E402
from simulator.atomic import atomic_write  # noqa: E402
from simulator.generator import generate  # noqa: E402

DRAW_SEEDS = {"A": 0xE51_2E_A, "B": 0xE51_2E_B}  # the draws' own seeds; content exclusion keeps them apart


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CEILING = _load(ROOT / "docs" / "results" / "ceiling" / "second_evidence.py", "second_evidence")
PROTOCOL3 = _load(ROOT / "docs" / "results" / "protocol3" / "second_draw.py", "second_draw")


def draws(run: Path, per_side: int):
    """The run's config, its lookahead boundaries and the two draws (A, B) with what must not be in them removed."""
    config = load_run_config(run / "run.yaml")
    sets = RunSets.build(config.evaluation_suite, config.evidence_config, config.validation.samples)
    trained, evidence_keys, _, _ = PROTOCOL3.trained_keys(run)
    removed = set(trained | evidence_keys)
    found = list(CEILING.boundaries(run))
    for _, following, candidates in found:
        for row in candidates:
            seeded = replace(row.config, seed=training_seed(config.seed, following))
            removed |= {item.instance.content_key() for item in sets.training(seeded).instances}
    evidence = config.evidence_config
    out = {}
    for name, seed in DRAW_SEEDS.items():
        drawn = generate(replace(evidence, samples=per_side * len(evidence.sizes), seed=seed), exclude=sets.test)
        out[name] = [item for item in drawn.instances if item.instance.content_key() not in removed]
        removed |= {item.instance.content_key() for item in out[name]}  # B never repeats A
    return config, found, out


def answers(models, config, model: Path, items, cache: Path) -> tuple[np.ndarray, float]:
    """Per-instance validity of ``model``'s greedy answers on ``items`` and seconds per instance (cached)."""
    if cache.exists():
        saved = np.load(cache)
        if saved["valid"].shape == (len(items),):
            return saved["valid"], float(saved["seconds_per_instance"])
    started = time.perf_counter()
    policy = models.evaluation_policy(str(model))
    valid = np.asarray(judge_answers(items, policy.answer(items, seed=config.seed).plans).valid, dtype=bool)
    per_instance = (time.perf_counter() - started) / max(len(items), 1)
    cache.parent.mkdir(parents=True, exist_ok=True)
    partial = cache.with_name(cache.stem + ".partial.npz")
    np.savez(partial, valid=valid, seconds_per_instance=per_instance)
    partial.replace(cache)
    return valid, per_instance


def trial_seconds(folder: Path) -> float | None:
    """The trial's training seconds from its checkpoint mark (None where the mark has none)."""
    seconds = read_record(folder / "model" / "checkpoint_done.json", "checkpoint mark").get("seconds")
    return float(seconds) if isinstance(seconds, (int, float)) else None


def choose(rates: np.ndarray, fixed: int = 0) -> int:
    """The lookahead's choice: the first of the best, and ``fixed``'s candidate on a tie with it (the lookahead
    tries ``fixed``'s first, so its ``max`` keeps it; here it is named, not assumed to be first)."""
    best = int(np.argmax(rates))
    return fixed if rates[fixed] == rates[best] else best


def size_figures(a: np.ndarray, b: np.ndarray, sides: np.ndarray, fixed: int, n: int, resamples: int,
                 rng: np.random.Generator) -> dict:
    """``a``, ``b``: candidates x instances validity on A and B; ``sides``: each A instance's side."""
    b_rates = b.mean(axis=1)
    pools = [np.flatnonzero(sides == side) for side in np.unique(sides)]
    per_side = n // len(pools)
    if any(len(pool) < per_side for pool in pools):
        raise SystemExit(f"--sizes {n}: draw A holds fewer than {per_side} instances of some side; raise --per-side")
    leads, best, rhos = [], [], []
    for _ in range(resamples):
        pick = np.concatenate([rng.choice(pool, per_side, replace=False) for pool in pools])
        rates = a[:, pick].mean(axis=1)
        chosen = choose(rates, fixed)
        leads.append(b_rates[chosen] - b_rates[fixed])
        best.append(b_rates[chosen] == b_rates.max())
        rho = CEILING.spearman(list(rates), list(b_rates))
        if rho is not None:
            rhos.append(rho)
    return {"n": per_side * len(pools), "lead_on_b": float(np.mean(leads)), "chose_b_best": float(np.mean(best)),
            "spearman": float(np.mean(rhos)) if rhos else None}


def score_run(run: Path, args, log=print) -> dict:
    config, found, drawn = draws(run, args.per_side)
    models = EvaluationModels(config, get_style(config.prompt_style))
    out = {"run": run.name, "kept": {name: len(items) for name, items in drawn.items()}, "boundaries": []}
    sides = np.array([item.instance.grid.shape[0] for item in drawn["A"]])
    for stage, following, candidates in found:
        valid = {"A": [], "B": []}
        seconds, trained_seconds, rows = [], [], []
        for row in candidates:
            seeded = replace(row.config, seed=training_seed(config.seed, following))
            folder = candidate_folder(run / f"stage-{following:02d}", seeded)
            if not (folder / "model").is_dir():
                raise SystemExit(f"{folder / 'model'}: the trial's checkpoint is missing (candidates/ not kept?)")
            for name in ("A", "B"):
                cache = args.work / run.name / f"stage-{following:02d}" / f"{folder.name}-{name}.npz"
                answered, per_instance = answers(models, config, folder / "model", drawn[name], cache)
                valid[name].append(answered)
                seconds.append(per_instance)
            trained_seconds.append(trial_seconds(folder))
            rows.append({"proposed_by": list(row.proposed_by), "evidence": row.evidence_valid_rate,
                         "a": float(valid["A"][-1].mean()), "b": float(valid["B"][-1].mean())})
            log(f"{run.name} before stage {following}: {'+'.join(row.proposed_by)} evidence "
                f"{100 * row.evidence_valid_rate:.1f}% A {100 * rows[-1]['a']:.1f}% B {100 * rows[-1]['b']:.1f}%")
        a, b = np.stack(valid["A"]), np.stack(valid["B"])
        fixed = next(i for i, row in enumerate(rows) if "fixed" in row["proposed_by"])
        for i, row in enumerate(rows):
            diff = b[i].astype(float) - b[fixed].astype(float)
            row["b_minus_fixed"] = float(diff.mean())
            row["b_minus_fixed_se"] = float(diff.std(ddof=1) / np.sqrt(len(diff)))
        rng = np.random.default_rng([args.seed, stage, len(out["boundaries"])])
        sizes = [size_figures(a, b, sides, fixed, n, args.resamples, rng) for n in args.sizes]
        per_instance = float(np.mean(seconds))
        for figures in sizes:
            figures["evidence_seconds"] = per_instance * figures["n"] * len(rows)
        out["boundaries"].append({
            "stage": stage, "candidates": rows, "sizes": sizes, "seconds_per_instance": per_instance,
            "trial_training_seconds": sum(s for s in trained_seconds if s is not None),
            "run_winner_lead_on_b": rows[choose(np.array([r["evidence"] for r in rows]), fixed)]["b"] - rows[fixed]["b"],
            "oracle_lead_on_b": float(b.mean(axis=1).max() - rows[fixed]["b"])})
    return out


def pooled(runs: list[dict], sizes: list[int]) -> list[dict]:
    found = [boundary for run in runs for boundary in run["boundaries"]]
    rows = []
    for index, n in enumerate(sizes):
        at = [boundary["sizes"][index] for boundary in found]
        rhos = [row["spearman"] for row in at if row["spearman"] is not None]
        rows.append({"n": at[0]["n"] if at else n, "boundaries": len(at),
                     "lead_on_b": mean_interval([row["lead_on_b"] for row in at]).to_dict(),
                     "chose_b_best": float(np.mean([row["chose_b_best"] for row in at])),
                     "spearman_mean": float(np.mean(rhos)) if rhos else None,
                     "evidence_seconds_mean": float(np.mean([row["evidence_seconds"] for row in at])),
                     "trial_training_seconds_mean": float(np.mean([b["trial_training_seconds"] for b in found]))})
    return rows


def joined_runs(path: Path, settings: dict, sizes: list[int]) -> list[dict]:
    """The scored runs of an earlier ``--json`` file, refused (one line naming the file and the setting) unless it was
    written with the same draw seeds, ``--per-side``, ``--resamples``, ``--seed`` and ``--sizes``."""
    document = read_record(path, "evidence-size figures", ("runs", *settings))
    for key, value in settings.items():
        if document[key] != value:
            raise SystemExit(f"{path}: {key} is {document[key]!r}, this pooling's is {value!r} (rerun it with the same)")
    for run in document["runs"]:
        found = [row["n"] for row in run["boundaries"][0]["sizes"]] if run["boundaries"] else sizes
        if found != sizes:
            raise SystemExit(f"{path}: {run['run']} was read at sizes {found}, this pooling's are {sizes}")
    return document["runs"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="*", type=Path, help="lookahead run folders (their candidates/ kept)")
    parser.add_argument("--join", type=Path, action="append", default=[], metavar="JSON",
                        help="pool the runs of an earlier --json file of this script (repeatable; same settings)")
    parser.add_argument("--per-side", type=int, default=1000, help="instances per side of each draw before removal")
    parser.add_argument("--sizes", default="400,800,1600,3200", help="evidence sizes to read, comma-separated")
    parser.add_argument("--resamples", type=int, default=2000, help="subsets drawn per size and boundary")
    parser.add_argument("--seed", type=int, default=0, help="the subsets' random seed")
    parser.add_argument("--work", type=Path, help="folder for the cached per-instance answers (needed with runs)")
    parser.add_argument("--json", type=Path, required=True, help="where to write the figures")
    args = parser.parse_args(argv)
    try:
        args.sizes = [int(part) for part in args.sizes.split(",") if part]
    except ValueError:
        parser.error(f"--sizes {args.sizes!r}: comma-separated integers, e.g. 400,800,1600")
    if not args.sizes or not all(4 <= n <= 400_000 for n in args.sizes):
        parser.error(f"--sizes {args.sizes}: each size in [4, 400000]")
    if not 1 <= args.per_side <= 100_000 or not 1 <= args.resamples <= 1_000_000:
        parser.error("--per-side in [1, 100000], --resamples in [1, 1000000]")
    if not args.runs and not args.join:
        parser.error("lookahead run folders to score, or --join files to pool (or both)")
    if args.runs and args.work is None:
        parser.error("--work FOLDER: where the runs' per-instance answers are cached")
    settings = {"draw_seeds": DRAW_SEEDS, "per_side": args.per_side, "resamples": args.resamples, "seed": args.seed}
    joined = [run for path in args.join for run in joined_runs(path, settings, args.sizes)]
    runs = joined + [score_run(run, args) for run in args.runs]
    names = [run["run"] for run in runs]
    if len(set(names)) != len(names):
        parser.error(f"a run is pooled twice: {sorted({name for name in names if names.count(name) > 1})}")
    table = pooled(runs, args.sizes)
    document = {**settings, "pooled": table, "runs": runs}
    atomic_write(args.json, json.dumps(document, indent=1) + "\n")
    print(f"{'n':>6} {'lead on B (points)':>24} {'B-best':>7} {'Spearman':>9} {'evidence s':>11} {'trials s':>9}")
    for row in table:
        lead = row["lead_on_b"]
        print(f"{row['n']:>6} {100 * lead['mean']:+8.2f} ± {100 * (lead['half_width'] or 0):5.2f} "
              f"{'':>7}{row['chose_b_best']:>7.0%} {row['spearman_mean'] or float('nan'):>9.2f} "
              f"{row['evidence_seconds_mean']:>11.0f} {row['trial_training_seconds_mean']:>9.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
