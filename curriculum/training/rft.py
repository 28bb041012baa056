"""One rejection-sampling fine-tuning stage (expert iteration): in each round the current checkpoint samples its
share of the stage's instances, the plan judge keeps each instance's best valid sample, and the supervised warm
start (:func:`curriculum.training.sft.warm_start`) trains on the kept (prompt, own plan) pairs.

Beside the stage's model it writes :data:`curriculum.loop.records.OUTCOMES_FILE`: each sampled instance's own
``[valid samples, samples]`` by its content key in hex (``{"outcomes": {...}}``), what the ``replay`` engineer scores
an instance by (``engineer.material``).
"""

from __future__ import annotations

import json
import math
import random
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from curriculum.loop.records import OUTCOMES_FILE, RoundFigures, TrainingReport, mean_figure
from curriculum.training.callbacks import load_reward_state
from curriculum.training.common import (_checkpoint_done, _mark_checkpoint, _read_report,
                                        _read_round_mark, _round_figures, quiet_libraries)
from curriculum.training.sft import warm_start
from policy.prompts import PromptStyle
from policy.rewards import StageReward, group_key
from simulator.atomic import atomic_write
from simulator.generator import LabelledInstance
from simulator.types import JointPlan


def _best_valid_plans(items: Sequence[LabelledInstance], plans: Sequence, generations: int,
                      *signals, outcomes: dict[str, list[int]] | None = None) -> tuple[list, RoundFigures]:
    """For each instance (``generations`` consecutive samples each), the best valid sampled plan or None.

    Best = least makespan, then least sum of costs, then fewest written actions. Returns the kept plans per
    instance and the round's figures: sampled valid rate (the reward mean of a 0/1 reward), the share of
    instances whose samples all agree (all valid or all invalid: a GRPO group with zero reward variance), and
    the share of instances with at least one valid sample (the ones that teach anything), and for the instances
    that need a wait (when there are any) their number, sampled valid rate and how many kept a plan. Each of ``signals``
    (``policy.rewards.StageReward``) tallies each instance's samples as one group of the 0/1 valid reward: the
    stage's training signal per map size, as a GRPO stage records it. ``outcomes`` (when given) gains each
    instance's own ``[valid samples, samples]``, keyed by its content key in hex (added up over repeats)."""
    import numpy as np

    from policy.rollout import judge_answers

    verdicts = judge_answers([item for item in items for _ in range(generations)], plans)
    valid, makespan, cost = verdicts.valid, verdicts.makespan, verdicts.sum_of_costs
    if generations >= 2 and len(items):
        keys = [group_key(item.instance) for item in items]
        for signal in signals:
            signal.record_groups(keys, valid, valid)
    kept: list[JointPlan | None] = []  # per instance, its best valid sampled plan
    agree = 0
    for index in range(len(items)):
        lo, hi = index * generations, (index + 1) * generations
        group = valid[lo:hi]
        agree += int(group.all() or not group.any())
        if outcomes is not None:
            tally = outcomes.setdefault(items[index].instance.content_key().hex(), [0, 0])
            tally[0] += int(group.sum())
            tally[1] += len(group)
        choices = [j for j in range(lo, hi) if valid[j]]
        if not choices:
            kept.append(None)
            continue
        best = min(choices, key=lambda j: (makespan[j], cost[j], int(plans[j].lengths.sum()), j))
        kept.append(plans[best])
    figures = RoundFigures(sampled_valid_rate=float(valid.mean()) if len(valid) else 0.0,
                           zero_variance_share=agree / max(len(items), 1),
                           solved_share=sum(plan is not None for plan in kept) / max(len(items), 1))
    waiting = [index for index, item in enumerate(items) if item.needs_wait]
    if waiting:  # the skill apart: how often the samples solve the instances that need a wait
        rows = np.asarray(valid[:len(items) * generations], bool).reshape(len(items), generations)[waiting]
        figures = replace(figures, needs_wait=len(waiting), needs_wait_sampled_valid_rate=float(rows.mean()),
                          needs_wait_kept=int(rows.any(axis=1).sum()))
    return kept, figures


def rft_stage(training, model_dir: str, items: Sequence[LabelledInstance], style: PromptStyle, out_dir: Path, *,
              seed: int, cpu_threads: int | None = None, save: bool = True) -> TrainingReport:
    """One rejection-sampling fine-tuning stage (expert iteration): RL with a filtered positive signal.

    The generation budget is GRPO's at equal ``steps``: ``steps x prompts_per_step`` prompts, ``generations``
    samples each at ``temperature``. They are spent in ``rounds`` rounds; in each, the current checkpoint samples
    its share of the stage's instances, the plan judge keeps each instance's best valid sample (no solver plan is
    ever used), and TRL's ``SFTTrainer`` trains on the kept (prompt, own plan) pairs for ``epochs`` passes at
    ``learning_rate`` (cosine to 0 within the round); a round that keeps fewer than ``rft_min_kept`` plans does
    not fine-tune (a handful of plans, passed over many times, is over-fitted). Each round's checkpoint is saved
    under ``out_dir/round-NN`` and skipped on resume; the last one becomes ``out_dir/model``. Returns the same metric
    keys as :func:`curriculum.training.grpo.grpo_stage` (``reward_mean`` is the sampled valid rate,
    ``zero_variance_share`` the share of instances whose samples all agree, ``signal`` each map size's groups of
    samples scored like GRPO's groups of a 0/1 valid reward, for the engineer, with ``rounds``: each round's own
    ``by_size``, in order) plus per-round figures; each sampled instance's own ``[valid, samples]`` goes to
    ``out_dir/outcomes.json`` (:data:`OUTCOMES_FILE`)."""
    final = out_dir / "model"
    if _checkpoint_done(final):
        return _read_report(final)
    quiet_libraries()
    total_prompts = training.steps * training.prompts_per_step
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    chosen = [items[order[i % len(order)]] for i in range(total_prompts)]
    per_round = math.ceil(total_prompts / training.rft_rounds)
    signal = StageReward({"valid": 1.0}, training.generations)  # the stage's groups per map size, for the engineer
    outcomes: dict[str, list[int]] = {}  # each instance's own samples, for an engineer that scores instances
    current = model_dir
    figures: list[RoundFigures] = []
    start = time.perf_counter()
    for round_index in range(training.rft_rounds):
        round_items = chosen[round_index * per_round:(round_index + 1) * per_round]
        if not round_items:
            break
        done = out_dir / f"round-{round_index + 1:02d}" / "model"
        if _checkpoint_done(done):
            figures.append(_finished_round(done, signal, outcomes))
        else:
            figures.append(_rft_round(training, current, round_items, round_index, style, out_dir, seed=seed,
                                      cpu_threads=cpu_threads, signal=signal, outcomes=outcomes))
        current = str(done)
    seconds = time.perf_counter() - start
    info = _rft_report(training.steps, seconds, figures, signal)
    if save:
        final.mkdir(parents=True, exist_ok=True)
        shutil.copytree(current, final, dirs_exist_ok=True, ignore=shutil.ignore_patterns("checkpoint_done.json"))
        atomic_write(out_dir / OUTCOMES_FILE, json.dumps({"outcomes": outcomes}, sort_keys=True))
        _mark_checkpoint(final, info.to_dict())
    return info


def _finished_round(done: Path, signal: StageReward, outcomes: dict[str, list[int]]) -> RoundFigures:
    """A round finished before a resume: its figures from its mark, whose tallies (up to and including the round)
    ``signal`` takes over and whose outcomes (cumulative up to the round, as the tallies are) go into ``outcomes``."""
    finished, mark = _read_round_mark(done / "checkpoint_done.json")
    load_reward_state(signal, mark.get("signal_state") or {}, f"{done}/checkpoint_done.json")
    for key, (valid, samples) in (mark.get("outcomes") or {}).items():
        outcomes[key] = [valid, samples]
    return finished


def _rft_round(training, current: str, round_items: Sequence[LabelledInstance], round_index: int,
               style: PromptStyle, out_dir: Path, *, seed: int, cpu_threads: int | None, signal: StageReward,
               outcomes: dict[str, list[int]]) -> RoundFigures:
    """One round from the checkpoint ``current``: sample ``training.generations`` plans per instance, keep each
    instance's best valid one (tallied into ``signal`` and ``outcomes``), fine-tune on the kept pairs (or, with fewer
    than ``training.rft_min_kept``, copy the checkpoint unchanged) into ``out_dir/round-NN/model``, and mark it
    finished with the round's figures, the stage's tallies and outcomes so far. Returns the round's figures."""
    from policy.backends import HFBackend, Sampling
    from policy.policies import ModelPolicy

    folder = out_dir / f"round-{round_index + 1:02d}"
    done = folder / "model"
    generations, rounds = training.generations, training.rft_rounds
    began = time.perf_counter()
    policy = ModelPolicy(f"hf:{current}", style,
                         Sampling(max_new_tokens=training.max_completion_length, temperature=training.temperature,
                                  seed=seed * 1000 + round_index, batch_size=64),
                         backend=HFBackend(current, cpu_threads=cpu_threads))
    repeated = [item for item in round_items for _ in range(generations)]
    plans = policy.answer(repeated, seed=seed).plans
    # the stage's tallies, and this round's alone: how each size's sampled rate moves from round to round
    round_signal = StageReward({"valid": 1.0}, generations)
    kept, round_figures = _best_valid_plans(round_items, plans, generations, signal, round_signal, outcomes=outcomes)
    pairs = [replace(item, plan=plan) for item, plan in zip(round_items, kept) if plan is not None]
    round_figures = replace(round_figures, round=round_index + 1, prompts=len(round_items), kept=len(pairs),
                            sample_seconds=time.perf_counter() - began,
                            signal_by_size=round_signal.signal().by_size if round_signal.state() else None)
    if len(pairs) >= training.rft_min_kept:
        sft_steps = max(math.ceil(len(pairs) * training.rft_epochs / training.rft_batch_size), 1)
        # A fresh Adam moves every weight by about the learning rate per step whatever its gradient; a
        # linear warm-up over the first tenth keeps a converged checkpoint from being knocked off its optimum.
        info = warm_start(current, pairs, style, folder, steps=sft_steps, batch_size=training.rft_batch_size,
                          learning_rate=training.learning_rate, max_length=512, seed=seed + round_index,
                          cpu_threads=cpu_threads, warmup_steps=sft_steps // 10,
                          label=f"RFT {out_dir.name} round {round_index + 1}/{rounds}")
        round_figures = replace(round_figures, sft_steps=sft_steps, last_loss=info.figure("last_loss"))
        shutil.rmtree(folder / "trainer", ignore_errors=True)
    else:  # nothing (or too little) valid to learn from: the checkpoint stays as it was
        if pairs:
            print(f"RFT {out_dir.name} round {round_index + 1}/{rounds}: {len(pairs)} kept plans, fewer than "
                  f"training.rft_min_kept={training.rft_min_kept}: no fine-tuning this round", file=sys.stderr)
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copytree(current, done, dirs_exist_ok=True, ignore=shutil.ignore_patterns("checkpoint_done.json"))
        round_figures = replace(round_figures, sft_steps=0, last_loss=None)
    _mark_checkpoint(done, {"round": round_figures.to_dict(), "signal_state": signal.state(),
                            "outcomes": outcomes}, _round_figures)
    return round_figures


def _rft_report(steps: int, seconds: float, figures: list[RoundFigures], signal: StageReward) -> TrainingReport:
    """The stage's report from its rounds' figures and the stage's tallies (each round's own groups per side in
    ``signal.rounds``)."""
    round_sides = tuple(f.signal_by_size for f in figures if f.signal_by_size)  # each round's own groups per side
    return TrainingReport(
        steps=steps, seconds=seconds, step_seconds=seconds / max(steps, 1),
        reward_mean=mean_figure(figures, "sampled_valid_rate"),
        zero_variance_share=mean_figure(figures, "zero_variance_share"),
        signal=replace(signal.signal(trainer="rft"), rounds=round_sides) if signal.state() else None,
        figures={"trainer": "rft", "solved_share": mean_figure(figures, "solved_share"),
                 "rounds": [f.to_dict() for f in figures],
                 "reward_first": figures[0].sampled_valid_rate if figures else None,
                 "reward_last": figures[-1].sampled_valid_rate if figures else None})
