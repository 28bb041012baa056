"""Greedy answers of a checkpoint on the first N of the held-out instances `bench lift --preset small` validates on:
valid rate, failure categories, and (compact-xy) how many answers write a cell that differs from their moves.

    python docs/results/representation/probe.py MODEL_DIR compact-xy 400
"""

import collections
import sys
from dataclasses import replace

from curriculum.benches.lift import VALIDATION_SEED
from curriculum.config import preset
from policy.backend_base import Sampling
from policy.backend_hf import HFBackend
from policy.policies import ModelPolicy
from policy.prompts import get_style
from policy.rollout import judge_episodes
from simulator.failures import FAILURES
from simulator.generator import generate

model, style_name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
items = generate(replace(preset("small").validation.config, samples=n, seed=VALIDATION_SEED)).instances
style = get_style(style_name)
policy = ModelPolicy(f"hf:{model}", style, Sampling(max_new_tokens=96, temperature=0.0, seed=0, batch_size=64),
                     backend=HFBackend(model, cpu_threads=1))
answers = policy.answer(items, seed=0)
episodes = judge_episodes(items, answers.plans, answers.parse_errors)
names = {kind.code: kind.name for kind in FAILURES}
print("valid", sum(e.outcome.valid for e in episodes) / len(episodes))
print("failures", dict(collections.Counter(names.get(e.outcome.failure, e.outcome.failure) for e in episodes)))
if style.answer_for is not None:
    parsed = [(item, plan, text) for item, plan, text in zip(items, answers.plans, answers.completions) if plan is not None]
    wrong = sum(style.write_answer(item.instance, plan).strip() != text.strip() for item, plan, text in parsed)
    print("answers whose cells differ from their moves", wrong, "of", len(parsed))
