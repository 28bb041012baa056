"""Transfer sweep: does a model trained without some agent count still solve boards with it?

    .venv/bin/python docs/results/transfer/sweep.py --work DIR --json OUT [--arm NAME ...] [--seed S] [--steps N]

Each arm trains the ``small`` preset's tiny model (or the arm's wider one) from its seeded initialisation by the preset's supervised warm
start (its warm-start config: 8,000 certified instances with optimal plans on sizes 3..6, 400 steps) with the arm's
mix of agent counts, then answers the preset's test set (``test-small``: 100 instances per cell, 2 and 3 agents,
sizes 3..6; kept out of the training instances by content) greedily. The figure is each agent count's valid %
(the mean over its cells, as ``compare`` reports ``test`` and ``transfer``).

Arms (``--arm``, repeatable; default all):

* ``two``: 2 agents only, the preset's own warm start (the transfer column every run reports today);
* ``mixP``: P% of the instances with 3 agents (``mix05``, ``mix10``, ``mix25``, ``mix50``), the rest with 2: the
  3-agent share a warm start needs for the skill to be there at all;
* ``rev-two``, ``rev-mix05``, ``rev-mix10``, ``rev-mix50``: the same in the ``compact-nb-rev`` prompt style (the
  agents' lines last agent first, so each agent's line sits at a distance from its answer line that does not move
  with the count);
* ``shuf-two``, ``shuf-mix05``, ``shuf-mix10``, ``shuf-mix50``: the same in the ``compact-nb-shuf`` style (the
  agents' lines in an order drawn from each board's content, answers in agent order: no fixed distance to learn,
  only the label);
* ``copy-two``, ``copy-mix05``, ``copy-mix10``, ``copy-mix50``: the same in the ``compact-nb-copy`` style (each
  answer line copies its agent's prompt line before the actions), with room for its longer answers (256-token
  warm-start examples, 192 new tokens: four agents' lines on 6x6; the 400-step rows were answered with 128, room
  for three);
* ``wide-two``, ``wide-mix50``: ``two`` and ``mix50`` with the wider embedded model (``small`` shape, ~3.2 M
  parameters): whether mixing the counts fails for want of capacity.

``--steps N`` trains the warm start N steps instead of the preset's (its folder and result row are kept apart from
the preset-length one: ``ARM-sS-Nsteps``). ``--suite test-small-4`` answers ``test-small`` plus 4-agent cells
(a finished arm's model is read back and answers it into ``test-test-small-4``; its row is kept beside the
``test-small`` one). Each arm's folder under ``--work`` is kept and reused (a finished arm is read back), so a killed sweep resumes.
The result JSON holds, per arm: its share, seed and steps, the valid and optimal % per agent count, and the
failure counts of the 3-agent answers (an answer that names too few agents is ``parse_error``).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from simulator.atomic import atomic_write  # noqa: E402

# arm -> (share of warm-start instances with 3 agents, run-config overrides: the prompt style and the lengths its
# longer answers need)
REV = {"prompt_style": "compact-nb-rev"}
SHUF = {"prompt_style": "compact-nb-shuf"}
COPY = {"prompt_style": "compact-nb-copy", "warm_start.max_length": 256, "validation.max_new_tokens": 192}
ARMS = {"two": (0.0, {}), "mix05": (0.05, {}), "mix10": (0.10, {}), "mix25": (0.25, {}), "mix50": (0.50, {}),
        "rev-two": (0.0, REV), "rev-mix05": (0.05, REV), "rev-mix10": (0.10, REV), "rev-mix50": (0.50, REV),
        "shuf-two": (0.0, SHUF), "shuf-mix05": (0.05, SHUF), "shuf-mix10": (0.10, SHUF), "shuf-mix50": (0.50, SHUF),
        "copy-two": (0.0, COPY), "copy-mix05": (0.05, COPY), "copy-mix10": (0.10, COPY), "copy-mix50": (0.50, COPY),
        "wide-two": (0.0, {"model": "small"}), "wide-mix50": (0.50, {"model": "small"})}


def warm_start_items(config, share: float, suite: str | None = None):
    """The warm start's instances with ``share`` of them on 3 agents (the rest on 2), the test set (and ``suite``)
    excluded."""
    from curriculum.loop.sets import test_keys, training_seed
    from simulator.generator import generate

    base = replace(config.warm_start.config, seed=training_seed(config.seed, 0))
    protected = test_keys(config.evaluation_suite) | (test_keys(suite) if suite else frozenset())
    three = round(base.samples * share)
    parts = []
    if three < base.samples:
        parts += generate(replace(base, agents_min=2, agents_max=2, samples=base.samples - three),
                          exclude=protected).instances
    if three:
        # its own seed: the same seed with another agent count would draw the same maps
        parts += generate(replace(base, agents_min=3, agents_max=3, samples=three, seed=base.seed + 1),
                          exclude=protected).instances
    return parts


def run_arm(name: str, share: float, overrides: dict, work: Path, seed: int, steps: int | None,
            suite: str | None = None) -> dict:
    from curriculum.config import preset
    from curriculum.loop.validation import EvaluationModels
    from curriculum.training.sft import warm_start
    from policy.evaluation import evaluate
    from policy.models import init_tiny_model
    from policy.prompts import get_style, save_checkpoint_style

    config = preset("small").with_overrides(seed=seed, **overrides)
    style = get_style(config.prompt_style)
    ws = config.warm_start
    folder = work / (f"{name}-s{seed}" + (f"-{steps}steps" if steps else ""))
    init = folder / "model-init"
    if not (init / "config.json").exists():
        init_tiny_model(init, seed=seed, shape=config.model)
        save_checkpoint_style(init, style.name)
    items = warm_start_items(config, share, suite)
    print(f"{name}: warm start on {len(items)} instances "
          f"({sum(item.instance.n_agents == 3 for item in items)} with 3 agents)", file=sys.stderr)
    report = warm_start(str(init), items, style, folder / "warm_start", steps=steps or ws.steps,
                        batch_size=ws.batch_size, learning_rate=ws.learning_rate, max_length=ws.max_length,
                        seed=seed, cpu_threads=config.cpu_threads, label=f"{name} warm start")
    policy = EvaluationModels(config, style).evaluation_policy(str(folder / "warm_start" / "model"))
    suite = suite or config.evaluation_suite
    table = evaluate(policy, suite, folder / ("test" if suite == config.evaluation_suite else f"test-{suite}"),
                     seed=seed, run_id=name,
                     ignored_policy_keys=("spec",))
    by_agents = {}
    for agents in table.agents():
        cells = [rates for (count, _), rates in table.rates.items() if count == agents]
        by_agents[str(agents)] = {"valid": 100 * sum(c[0] for c in cells) / len(cells),
                                  "optimal": 100 * sum(c[1] for c in cells) / len(cells),
                                  "cells": {f"{agents}x{side}": round(100 * rates[0], 2)
                                            for (count, side), rates in table.rates.items() if count == agents}}
    return {"arm": name, "share_3_agents": share, "prompt_style": style.name, "seed": seed, "steps": steps or ws.steps,
            "suite": suite,
            "last_loss": report.figure("last_loss"), "by_agents": by_agents, "failures": table.failures}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", required=True, help="folder of the arms' models and test replays (reused)")
    parser.add_argument("--json", required=True, help="the result file (written after each arm)")
    parser.add_argument("--arm", action="append", choices=sorted(ARMS), help="an arm (repeat; default all)")
    parser.add_argument("--seed", type=int, default=0, help="run seed: model initialisation and instances")
    parser.add_argument("--steps", type=int, default=None, help="warm-start steps (default: the preset's)")
    parser.add_argument("--suite", default=None,
                        help="the test suite to answer (default: the preset's, test-small; test-small-4 adds 4 agents)")
    args = parser.parse_args(argv)
    work, out = Path(args.work), Path(args.json)
    work.mkdir(parents=True, exist_ok=True)
    from curriculum.loop.records import read_record

    results = read_record(out, "sweep results") if out.exists() else {"command": " ".join(sys.argv), "arms": []}
    for name in args.arm or list(ARMS):
        row = run_arm(name, *ARMS[name], work, args.seed, args.steps, args.suite)
        results["arms"] = [r for r in results["arms"]
                           if (r["arm"], r["seed"], r["steps"], r["suite"])
                           != (name, args.seed, row["steps"], row["suite"])] + [row]
        atomic_write(out, json.dumps(results, indent=1, sort_keys=True) + "\n")
        print(f"{name}: " + ", ".join(f"{agents} agents valid {figures['valid']:.1f}%"
                                      for agents, figures in row["by_agents"].items()), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
