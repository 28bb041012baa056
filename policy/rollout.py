"""Rollouts: run a policy over labelled instances, judge every plan in one batch, and record episodes.

This is the one place that turns plans (or parse failures) plus the judge's verdicts into replay episodes
(:func:`judge_episodes`; ``policy.evaluation.answer_and_record`` calls it for evaluation cells and the curriculum's
validation alike), and answers into verdicts alone (:func:`judge_answers`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from replays.types import Episode, InstanceLabels, Outcome
from simulator import constants as C
from simulator.generator import LabelledInstance
from simulator.judge import is_optimal, judge_plans
from simulator.types import JointPlan


@dataclass(frozen=True)
class Verdicts:
    """The judge's verdicts on a batch of answers, one entry per answer."""

    valid: np.ndarray
    """``(B,) bool``: the plan parsed and is valid."""
    optimal: np.ndarray
    """``(B,) bool``: valid with the instance's optimal makespan."""
    makespan: np.ndarray
    """``(B,) int64``: 0 where the plan did not parse."""
    sum_of_costs: np.ndarray
    """``(B,) int64``: 0 where the plan did not parse."""


def judge_answers(items: Sequence[LabelledInstance], plans: Sequence[JointPlan | None]) -> Verdicts:
    """Verdicts on parsed answers without building episodes (rates, sampled pass@1, rejection sampling): all parsed
    plans in one kernel call; a None plan (a parse failure) is invalid."""
    n = len(plans)
    verdicts = Verdicts(np.zeros(n, bool), np.zeros(n, bool), np.zeros(n, np.int64), np.zeros(n, np.int64))
    parsed = [i for i, plan in enumerate(plans) if plan is not None]
    parsed_plans = [plan for plan in plans if plan is not None]  # aligned with ``parsed``
    if parsed:
        result = judge_plans([items[i].instance for i in parsed], parsed_plans)
        labels = np.array([items[i].optimal_makespan for i in parsed])
        verdicts.valid[parsed] = result.valid
        verdicts.optimal[parsed] = is_optimal(result.valid, result.makespan, labels)
        verdicts.makespan[parsed] = result.makespan
        verdicts.sum_of_costs[parsed] = result.sum_of_costs
    return verdicts


def judge_episodes(
    items: Sequence[LabelledInstance],
    plans: Sequence[JointPlan | None],
    parse_errors: Sequence[str | None] | None = None,
    completions: Sequence[str | None] | None = None,
    prompts: Sequence[str | None] | None = None,
) -> list[Episode]:
    """Judge ``plans[i]`` on ``items[i]`` (all parsed plans in one kernel call) and build the episodes.

    A ``None`` plan is a parse failure: its episode has failure ``parse_error`` and the reason from
    ``parse_errors[i]``. ``optimal`` means valid with the instance's optimal makespan.
    """
    n = len(items)
    parse_errors = list(parse_errors) if parse_errors is not None else [None] * n
    completions = list(completions) if completions is not None else [None] * n
    prompts = list(prompts) if prompts is not None else [None] * n
    parsed = [i for i, plan in enumerate(plans) if plan is not None]
    parsed_plans = [plan for plan in plans if plan is not None]  # aligned with ``parsed``
    start = time.perf_counter()
    result = judge_plans([items[i].instance for i in parsed], parsed_plans, record=True) if parsed else None
    judge_seconds = (time.perf_counter() - start) / max(len(parsed), 1)
    where = {i: j for j, i in enumerate(parsed)}
    episodes = []
    for i, item in enumerate(items):
        inst = item.instance
        k = inst.n_agents
        if i not in where:
            positions = inst.starts[None].astype(np.int32)
            outcome = Outcome(False, C.PARSE_ERROR, 0, -1, -1, -1, 0, optimal=False)
            episodes.append(
                Episode(
                    instance=inst, labels=InstanceLabels.from_labelled(item), plan=None,
                    parse_error=parse_errors[i] or "no plan", positions=positions,
                    events=np.zeros((0, k), np.int8), outcome=outcome, prompt=prompts[i], completion=completions[i],
                )
            )
            continue
        j = where[i]
        # a parsed plan: the batch was judged, with record=True, so the traces are there
        assert result is not None and result.trace_pos is not None and result.trace_events is not None
        verdict = result.judgement(j)
        steps = verdict.makespan if verdict.valid else max(verdict.fail_step, 0)
        outcome = Outcome.from_judgement(verdict, item.optimal_makespan)
        episodes.append(
            Episode(
                instance=inst, labels=InstanceLabels.from_labelled(item), plan=plans[i], parse_error=None,
                positions=result.trace_pos[j, : steps + 1, :k].copy(),
                events=result.trace_events[j, :steps, :k].copy(),
                outcome=outcome, prompt=prompts[i], completion=completions[i],
                timings={"judge_s": judge_seconds},
            )
        )
    return episodes
