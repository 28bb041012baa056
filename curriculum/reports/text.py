"""One run as text (``mapf-lake report``): the test set's score, the evidence set per stage with the trainer's
figures and the engineer's decision, where each stage's time went, and the config trajectory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from curriculum.reports.load import RunRecord
from simulator.text import percent


def _test_set_lines(run: RunRecord) -> list[str]:
    """The final evaluation's rates per agent count (and its sampled pass@1), or that it has not run yet."""
    if run.final is None:
        return ["test set: not scored yet (the final evaluation runs after the last stage)"]
    final, sampled = run.final, run.final_sampled
    lines = [f"test set ({final.suite}; read by nothing but this score), valid% / optimal%: " + ", ".join(
        f"{k} agents {100 * valid:.1f} / {100 * optimal:.1f}" for k in final.agents()
        for valid, optimal in [final.mean(k)])]
    if sampled is not None and sampled.cells:
        by_agents: dict[int, list[float]] = {}
        for (count, _), cell in sampled.cells.items():
            by_agents.setdefault(count, []).append(cell.valid_rate)
        lines.append(f"test set sampled pass@1 ({sampled.k} samples each): " + ", ".join(
            f"{k} agents {100 * sum(v) / len(v):.1f}" for k, v in by_agents.items()))
    return lines


def _figure(value: Any, spec: str) -> str:
    """A trainer's figure in ``spec``, ``-`` where the trainer did not report it."""
    return format(value, spec) if isinstance(value, (int, float)) else "-"


def _stage_lines(run: RunRecord) -> list[str]:
    """The evidence set's rates before training and after each stage, with the stage's trainer figures and the
    engineer's decision."""
    lines = ["evidence set (what the engineer saw), per stage:",
             f"{'stage':>10} {'valid%':>7} {'optimal%':>9} {'train reward':>13} {'zero-var groups':>16} "
             f"{'s/step':>7} {'tokens':>7}  engineer"]
    for name, rates in (("untrained", run.untrained), ("warm_start", run.warm_start)):
        if rates is not None:
            lines.append(f"{name.replace('_', ' '):>10} {100 * rates.valid_rate:>7.1f} {100 * rates.optimal_rate:>9.1f}")
    for record in run.stages:
        scores, train, decision = record.scores, record.train, record.decision
        lines.append(
            f"{record.stage:>10} {100 * scores.valid_rate:>7.1f} {100 * scores.optimal_rate:>9.1f} "
            f"{_figure(train.reward_mean, '>13.3f')} {_figure(train.zero_variance_share, '>16.2f')} "
            f"{_figure(train.step_seconds, '>7.2f')} {_figure(train.completion_tokens_mean, '>7.1f')}  "
            f"{decision.outcome}: {'; '.join(decision.diff) or 'no change'}"
        )
    return lines


def _timing_lines(run: RunRecord) -> list[str]:
    """Where each timed stage's seconds went (a stage copied from a sibling arm was timed there)."""
    timed = [record for record in run.stages if record.timings.seconds()]
    shared = [record for record in timed if record.shared_from]
    timed = [record for record in timed if not record.shared_from]
    if not timed:
        return []
    from curriculum.training.run import loop_overhead

    lines = ["where each stage's time went (seconds; loop = outside training and the model's answers):"]
    for record in timed:
        t = record.timings
        loop = percent(loop_overhead(t))
        lines.append(f"  stage {record.stage}: train {t.train or 0:.0f}, validation {t.validation or 0:.0f}"
                     f", judging {t.judging or 0:.1f}, instances {t.instances or 0:.1f}, records "
                     f"{t.records or 0:.1f}, engineer {t.engineer or 0:.1f}; loop {loop}")
    for record in shared:
        lines.append(f"  stage {record.stage}: copied from {Path(record.shared_from or '').name} (timed there)")
    return lines


def _trajectory_lines(run: RunRecord) -> list[str]:
    """Each stage's config: agents, and per size its data ratio (hole / wait ratio)."""
    lines = ["config trajectory (data_ratio per size; hole/wait ratio):"]
    for record in run.stages:
        mix = ", ".join(f"{size}: {spec.data_ratio:.2f} ({spec.hole_ratio:.2f}/{spec.wait_ratio:.2f})"
                        for size, spec in record.config.sizes.items())
        agents = record.config.agents
        lines.append(f"  stage {record.stage}: agents {list(agents) if isinstance(agents, tuple) else agents}; {mix}")
    return lines


def render_report(run: RunRecord) -> str:
    """The run as text: its name, engineer and model, then the test set, the evidence set per stage, the stages'
    timings and the config trajectory."""
    head = f"run {Path(run.dir).name}: engineer {run.run_config.engineer.spec}, model {run.run_config.model}"
    return "\n".join([head, *_test_set_lines(run), *_stage_lines(run), *_timing_lines(run), *_trajectory_lines(run)])


__all__ = ["render_report"]
