"""Did the lookahead choose on skill or on luck? Every trial candidate scored again on a second, fresh evidence draw.

    python docs/results/ceiling/second_evidence.py RUNS/proto3-lookahead-s30[1-6] --per-side 300 \
        --json docs/results/ceiling/second-evidence.json

At each stage boundary of each ``lookahead`` run, the candidates' trial checkpoints (``stage-NN/candidates/``) were
scored on the run's 400-instance evidence set and the best one kept. This script draws, per run, a second set from
the evidence set's own distribution (its stage config with ``--per-side`` instances per side and the draw's own
seed), removes by content the test suite, the run's evidence set, everything the run trained on (warm start and
stages) and everything any candidate trained on, and lets every candidate's checkpoint answer it greedily (the run's
own decoding). Per boundary it reports each candidate's two rates; over all boundaries: the winner's lead over
``fixed``'s candidate on the evidence set (what it was chosen on) and on the second draw (what the lead is worth), with
mean and 95% interval (Student t over the boundaries), how often the evidence winner is also the second draw's best,
and the rank correlation of the two rates across each boundary's candidates. It reads no test-set answer.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from curriculum.config import load_run_config  # noqa: E402
from curriculum.loop.folder import read_decision  # noqa: E402
from curriculum.training.run import candidate_folder  # noqa: E402
from curriculum.loop.sets import RunSets, training_seed  # noqa: E402
from curriculum.loop.validation import EvaluationModels  # noqa: E402
from curriculum.reports.stats import mean_interval  # noqa: E402
from engineer.lookahead import best_candidate, decision_candidates  # noqa: E402
from policy.prompts import get_style  # noqa: E402
from policy.rollout import judge_answers  # noqa: E402
from simulator.atomic import atomic_write  # noqa: E402
from simulator.generator import generate  # noqa: E402

def _protocol3_second_draw():
    """Protocol 3's second-draw script, whose ``trained_keys`` knows what a run trained on."""
    path = ROOT / "docs" / "results" / "protocol3" / "second_draw.py"
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


DRAW_SEED = 0x5EC0_E71D  # the draw's own seed; content exclusion, not the seed, keeps it apart


def ranks(values: list[float]) -> list[float]:
    """Ranks from 1, ties sharing their mean rank."""
    order = sorted(range(len(values)), key=values.__getitem__)
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(a: list[float], b: list[float]) -> float | None:
    """Spearman's rank correlation (None when either side is constant or has fewer than 3 values)."""
    if len(a) < 3:
        return None
    ra, rb = ranks(a), ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va, vb = sum((x - ma) ** 2 for x in ra), sum((y - mb) ** 2 for y in rb)
    return None if va == 0 or vb == 0 else cov / (va * vb) ** 0.5


def boundaries(run: Path):
    """``(stage, following, candidates)`` for every lookahead decision of ``run`` that tried candidates."""
    for path in sorted(run.glob("stage-*/decision.json")):
        candidates = decision_candidates(read_decision(path), str(path))
        if candidates:
            stage = int(path.parent.name.split("-")[1])
            yield stage, stage + 1, candidates


def second_draw(run: Path, per_side: int):
    """The run's config, its lookahead boundaries and the second draw: ``per_side`` instances per side of the
    evidence set's config (the draw's own seed), less the test suite, the evidence set, the run's own training
    instances (warm start and stages) and every candidate's trial instances, by content."""
    config = load_run_config(run / "run.yaml")
    sets = RunSets.build(config.evaluation_suite, config.evidence_config, config.validation.samples)
    trained, evidence_keys, _, _ = _protocol3_second_draw().trained_keys(run)  # warm start and stages
    removed = set(trained | evidence_keys)
    found = list(boundaries(run))
    for _, following, candidates in found:
        for row in candidates:
            seeded = replace(row.config, seed=training_seed(config.seed, following))
            removed |= {item.instance.content_key() for item in sets.training(seeded).instances}
    evidence = config.evidence_config
    draw = replace(evidence, samples=per_side * len(evidence.sizes), seed=DRAW_SEED)
    drawn = generate(draw, exclude=sets.test).instances
    return config, found, drawn, [item for item in drawn if item.instance.content_key() not in removed]


def score_run(run: Path, per_side: int, log=print) -> dict:
    config, found, drawn, items = second_draw(run, per_side)
    models = EvaluationModels(config, get_style(config.prompt_style))
    out = {"run": run.name, "drawn": len(drawn), "kept": len(items), "boundaries": []}
    for stage, following, candidates in found:
        rows = []
        for row in candidates:
            seeded = replace(row.config, seed=training_seed(config.seed, following))
            model = candidate_folder(run / f"stage-{following:02d}", seeded) / "model"
            if not model.is_dir():
                raise SystemExit(f"{model}: the trial's checkpoint is missing (was the run's candidates/ folder kept?)")
            policy = models.evaluation_policy(str(model))
            valid = judge_answers(items, policy.answer(items, seed=config.seed).plans).valid
            rows.append({"proposed_by": list(row.proposed_by), "evidence": row.evidence_valid_rate,
                         "second_draw": float(valid.mean())})
            log(f"{run.name} before stage {following}: {'+'.join(row.proposed_by)} evidence "
                f"{100 * row.evidence_valid_rate:.1f}% second draw {100 * valid.mean():.1f}%")
        winner = best_candidate(candidates)
        win = next(r for r in rows if r["proposed_by"] == list(winner.proposed_by))
        fixed = next(r for r in rows if "fixed" in r["proposed_by"])
        best_second = max(r["second_draw"] for r in rows)
        out["boundaries"].append({
            "stage": stage, "candidates": rows, "winner": winner.proposed_by,
            "winner_lead_evidence": win["evidence"] - fixed["evidence"],
            "winner_lead_second_draw": win["second_draw"] - fixed["second_draw"],
            "winner_best_on_second_draw": win["second_draw"] == best_second,
            "spearman": spearman([r["evidence"] for r in rows], [r["second_draw"] for r in rows]),
            "spearman_without_random": spearman([r["evidence"] for r in rows if "random" not in r["proposed_by"]],
                                                [r["second_draw"] for r in rows if "random" not in r["proposed_by"]])})
    return out


def pooled(runs: list[dict]) -> dict:
    found = [b for run in runs for b in run["boundaries"]]

    def interval(key: str) -> dict:
        return mean_interval([b[key] for b in found]).to_dict()

    def mean_of(key: str) -> float | None:
        values = [b[key] for b in found if b[key] is not None]
        return sum(values) / len(values) if values else None

    return {"boundaries": len(found), "winner_lead_evidence": interval("winner_lead_evidence"),
            "winner_lead_second_draw": interval("winner_lead_second_draw"),
            "winner_best_on_second_draw": sum(b["winner_best_on_second_draw"] for b in found),
            "spearman_mean": mean_of("spearman"), "spearman_without_random_mean": mean_of("spearman_without_random")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="lookahead run folders (their candidates/ kept)")
    parser.add_argument("--per-side", type=int, default=300, help="instances drawn per side before removal")
    parser.add_argument("--json", type=Path, required=True, help="where to write the figures")
    args = parser.parse_args(argv)
    if not 1 <= args.per_side <= 100_000:
        raise SystemExit(f"--per-side {args.per_side}: an integer in [1, 100000]")
    runs = [score_run(run, args.per_side) for run in args.runs]
    summary = pooled(runs)
    document = {"draw_seed": DRAW_SEED, "per_side": args.per_side, "runs": runs, "pooled": summary}
    atomic_write(args.json, json.dumps(document, indent=1) + "\n")
    lead_e, lead_s = summary["winner_lead_evidence"], summary["winner_lead_second_draw"]
    print(f"{summary['boundaries']} boundaries: the winner's lead over fixed's candidate, evidence "
          f"{100 * lead_e['mean']:+.2f} ± {100 * (lead_e['half_width'] or 0):.2f} points, second draw "
          f"{100 * lead_s['mean']:+.2f} ± {100 * (lead_s['half_width'] or 0):.2f}; the winner best on the second draw "
          f"{summary['winner_best_on_second_draw']} of {summary['boundaries']}; mean Spearman "
          f"{summary['spearman_mean']}, without random {summary['spearman_without_random_mean']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
