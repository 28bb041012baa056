"""Score one seed's trained models on a second, larger draw of the test distribution that no arm trained on.

    python docs/results/protocol3/second_draw.py RUNS/proto3-fixed-s301 RUNS/proto3-band-s301 \
        --per-cell 1000 --work RUNS/second-draw --json second-draw-s301.json

The draw: 2 agents on sides 3-6, hole ratio 0.2, wait ratio 0.3 (the ``test-small`` 2-agent cells' distribution),
``--per-cell`` instances per side from the draw's own seed, generated with ``test-small`` excluded by content. Before
any model answers, every instance that any of the given runs trained on (its warm start and every stage, regenerated
from the run's records as the run generated them), and every instance of their evidence sets, is removed by content:
all runs of the seed are scored on the same instances, none of which any of them saw. Each run's last checkpoint
answers greedily through ``mapf-lake eval --instances`` (its replays are kept under ``--work``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from curriculum.config import load_run_config
from curriculum.loop.records import StageRecord, read_record
from curriculum.loop.sets import RunSets, test_keys, training_seed
from simulator.atomic import atomic_write
from simulator.config import SizeSpec, StageConfig
from simulator.generator import generate, to_jsonl

DRAW_SEED = 0x5EC0_D0D0  # the draw's own seed; content exclusion, not the seed, keeps it apart
SIDES = (3, 4, 5, 6)


def trained_keys(run_dir: Path) -> tuple[frozenset[bytes], frozenset[bytes], str, int]:
    """Content keys of everything the run trained on and of its evidence set, the run's last checkpoint and its
    answers' token limit."""
    config = load_run_config(run_dir / "run.yaml")
    sets = RunSets.build(config.evaluation_suite, config.evidence_config, config.validation.samples)
    keys: set[bytes] = set()
    if config.warm_start.enabled:
        ws = config.warm_start
        warm = replace(ws.config or config.stage_one, samples=ws.samples, seed=training_seed(config.seed, 0))
        keys |= {item.instance.content_key() for item in sets.training(warm).instances}
    last = None
    for stage in range(1, config.stages + 1):
        path = run_dir / f"stage-{stage:02d}" / "stage.json"
        record = StageRecord.from_dict(read_record(path, "stage record"), str(path))
        if record.decision.engineer in ("replay", "failures"):
            raise SystemExit(f"{path}: an engineer that hands instances over; this script regenerates configs only")
        keys |= {item.instance.content_key() for item in sets.training(record.config).instances}
        last = run_dir / f"stage-{stage:02d}" / "model"
    if last is None or not last.is_dir():
        raise SystemExit(f"{run_dir}: no finished stage with a model")
    return frozenset(keys), sets.evidence_keys, str(last), config.validation.max_new_tokens


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="the run folders of one seed (every arm)")
    parser.add_argument("--per-cell", type=int, default=1000, help="instances drawn per side before removal")
    parser.add_argument("--work", type=Path, required=True, help="folder for the draw and the replays")
    parser.add_argument("--json", type=Path, required=True, help="where to write the figures")
    args = parser.parse_args(argv)

    removed: set[bytes] = set()
    checkpoints = {}
    for run in args.runs:
        trained, evidence, model, tokens = trained_keys(run)
        removed |= trained | evidence
        checkpoints[run.name] = (model, tokens)
    draw_config = StageConfig(agents_min=2, agents_max=2, samples=args.per_cell * len(SIDES), seed=DRAW_SEED,
                              sizes={side: SizeSpec(1 / len(SIDES), 0.2, 0.3) for side in SIDES})
    drawn = generate(draw_config, exclude=test_keys("test-small")).instances
    kept = [item for item in drawn if item.instance.content_key() not in removed]
    args.work.mkdir(parents=True, exist_ok=True)
    draw_file = args.work / f"draw-{'-'.join(sorted(run.name for run in args.runs))}.jsonl"
    draw_file.write_bytes(to_jsonl(kept))
    per_side = {side: sum(item.size == side for item in kept) for side in SIDES}
    figures: dict = {"runs": [str(run) for run in args.runs], "draw_seed": DRAW_SEED, "per_cell_drawn": args.per_cell,
                     "kept_per_side": {str(side): count for side, count in per_side.items()},
                     "removed_as_trained_or_evidence": len(drawn) - len(kept), "valid": {}}
    for run in args.runs:
        out = args.work / run.name
        result = subprocess.run([sys.executable, "-m", "curriculum.cli", "eval", "--policy",
                                 f"hf:{checkpoints[run.name][0]}", "--instances", str(draw_file), "--out", str(out),
                                 "--json", "--max-new-tokens", str(checkpoints[run.name][1])], capture_output=True, text=True, check=True)
        table = json.loads(result.stdout)
        figures["valid"][run.name] = table
    atomic_write(args.json, json.dumps(figures, indent=1) + "\n")
    for name, table in figures["valid"].items():
        print(f"{name}: valid {100 * table['mean']['2']['valid_rate']:.2f}% over the kept draw (mean of the sides)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
