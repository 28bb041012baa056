"""Runs compared: the paper-style table of the runs' test sets (:func:`compare_table`) and the runs grouped by arm
over seeds (:func:`seed_comparison`: each arm's figures (:data:`COMPARE_METRICS`) with their mean and 95% interval,
and its paired differences against a reference arm with p values, Holm-adjusted over the arms), as text
(:func:`render_seed_comparison`) and as ``compare --json``'s document (:class:`SeedComparison`)."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curriculum.config import RunConfig
from curriculum.reports.installation import installation_difference, kernel_difference, run_installation, run_kernels
from curriculum.reports.load import RunRecord
from curriculum.reports.stats import Interval, holm, mean_interval, paired_p_value, paired_values
from simulator.documents import check_value, read_mapping
from simulator.documents import checked_real as _checked_real
from simulator.documents import read_key as _get
from simulator.errors import ConfigError, short_repr
from simulator.fields import allowed_of
from simulator.tables import format_rate_table
from simulator.text import printable


def compare_table(runs: list[RunRecord]) -> str:
    """Rows = runs (one per agent count when the test set has several: ``2a``, ``3a``), columns = map sizes
    (valid/optimal %), mean column, and the row's ``cvar10`` (:func:`cells_cvar10`: valid % of the worst 10% of the
    row's test cells); from each run's final evaluation on its test set."""
    finished = [(run, run.final) for run in runs if run.final is not None]
    if not finished:
        raise ConfigError("runs", [run.dir for run in runs], "runs with a final evaluation (final/table.json)")
    sizes = sorted({size for _, final in finished for size in final.sizes()})
    agent_counts = sorted({agents for _, final in finished for agents in final.agents()})
    rows, tails = [], []
    for run, final in finished:
        for agents in agent_counts:
            by_size = {size: final.rates[agents, size][:2] for size in sizes if (agents, size) in final.rates}
            if by_size:
                name = printable(Path(run.dir).name)
                label = f"{name[:20]} {agents}a" if len(agent_counts) > 1 else name
                rows.append((f"{label:<24}", by_size))
                tail = final.only({agents}).cvar10_valid()
                tails.append("" if tail is None else f"{100 * tail:.1f}")
    lines = format_rate_table(f"test set ({printable(finished[0][1].suite)}), valid% / optimal%, by run"
                              + (" and agents" if len(agent_counts) > 1 else "")
                              + "; cvar10: valid% of the row's worst 10% of cells",
                              f"{'run':<24}", rows, sizes, mean_decimals=1).split("\n")
    lines[1] += f"{'cvar10':>9}"
    for index, text in enumerate(tails):
        lines[2 + index] += f"{text:>9}"
    return "\n".join(lines)


# --- comparisons over seeds -------------------------------------------------------------------------------------

# Figures compared across arms, read from each run's last stage (held-out validation) and final evaluation.
COMPARE_METRICS = (
    ("test", "test %", "greedy valid rate on the test set (read by nothing but this score), its cells with the "
     "agent counts the run trains on"),
    ("test_opt", "test opt %", "greedy optimal rate on the same test cells"),
    ("test_pass1", "test p@1 %", "sampled pass@1 on the same test cells (validation.sampled_k samples each)"),
    ("transfer", "transfer %", "greedy valid rate on the test cells with other agent counts (trained on 2 agents, "
     "tested on 3: the paper's transfer)"),
    ("test_cvar", "test CVaR %", "greedy valid rate of the worst 10% of the same test cells as test % (the rule "
     "of eval's cvar10_valid): the tail the mean hides"),
    ("valid", "seen %", "what the engineer saw: greedy valid rate on the evidence (validation) set after the last "
     "stage"),
    ("pass1", "seen p@1 %", "sampled pass@1 on the evidence set"),
    ("lift", "seen lift", "evidence valid rate minus the warm start's (what the stages added, as the engineer saw it)"),
)
TEST_METRICS = ("test", "test_opt", "test_pass1", "transfer", "test_cvar")
"""The figures read from the test set; the others come from the evidence set the engineer read."""


def run_arm(run: RunRecord) -> str:
    """The comparison arm a run belongs to: its ``arm`` field, else its engineer spec."""
    return run.run_config.arm or run.run_config.engineer.spec


def run_seed(run: RunRecord) -> int:
    return run.run_config.seed


def _training_agents(run: RunRecord) -> set[int]:
    """Agent counts of the run's training data: its initial config's ``agents`` (a count or ``[min, max]``)."""
    initial = run.run_config.stage_one
    return set(range(initial.agents_min, initial.agents_max + 1))


def run_figures(run: RunRecord) -> dict[str, float]:
    """The :data:`COMPARE_METRICS` of one run that it has (a run without finished stages has none): the test set's
    from its final evaluation (cells ``AxS``; trained agent counts -> ``test`` and ``test_cvar``
    (:func:`cells_cvar10`), others -> ``transfer``), the evidence set's from its last stage."""
    out: dict[str, float] = {}
    if run.stages:
        scores = run.stages[-1].scores
        out["valid"] = scores.valid_rate
        if scores.sampled_valid_rate is not None:
            out["pass1"] = scores.sampled_valid_rate
        if run.start is not None:
            out["lift"] = scores.valid_rate - run.start.valid_rate
    if run.final is not None:
        trained = _training_agents(run)
        own = run.final.only(trained)
        other = [valid for (agents, _), (valid, _, _) in run.final.rates.items() if agents not in trained]
        if own.rates:
            out["test"] = sum(valid for valid, _, _ in own.rates.values()) / len(own.rates)
            out["test_opt"] = sum(optimal for _, optimal, _ in own.rates.values()) / len(own.rates)
        if other:
            out["transfer"] = sum(other) / len(other)
        tail = own.cvar10_valid()
        if tail is not None:
            out["test_cvar"] = tail
        sampled = [cell.valid_rate for (agents, _), cell in run.final_sampled.cells.items() if agents in trained] \
            if run.final_sampled is not None else []
        if sampled:
            out["test_pass1"] = sum(sampled) / len(sampled)
    return out


_SEED = allowed_of(RunConfig, "seed")


def _seed(value: Any, where: str) -> int:
    """A seed as RunConfig's ``seed`` declares it; else ConfigError naming ``where``."""
    if value is None or not _SEED.admits(value):
        raise ConfigError(where, value, str(_SEED))
    return int(value)


@dataclass(frozen=True)
class PairedDifference:
    """An arm's paired differences against the reference on one metric, over the seeds both have: their mean and
    95% interval, ``p`` (paired t that the mean is 0; None under 2 pairs) and ``p_holm`` (``p`` adjusted by Holm over
    the arms compared on the metric; the pre-declared primary arm's is its ``p``)."""

    interval: Interval
    p: float | None
    p_holm: float | None = None

    @property
    def n(self) -> int:
        return self.interval.n

    def to_dict(self) -> dict[str, Any]:
        return {**self.interval.to_dict(), "p": self.p, "p_holm": self.p_holm}

    @classmethod
    def from_dict(cls, data: Any, where: str = "difference") -> "PairedDifference":
        p, p_holm = (_get(data, name, where, "number", optional=True) for name in ("p", "p_holm"))
        return cls(Interval.from_dict(data, where), _checked_real(p, f"{where}.p", 0.0, 1.0) if p is not None else None,
                   _checked_real(p_holm, f"{where}.p_holm", 0.0, 1.0) if p_holm is not None else None)


@dataclass(frozen=True)
class ArmComparison:
    """One arm over its seeds: the figures of each seed, each metric's mean and interval, and the paired
    differences against the reference (empty for the reference itself)."""

    seeds: tuple[int, ...]
    per_seed: Mapping[int, Mapping[str, float]]
    metrics: Mapping[str, Interval]
    vs_reference: Mapping[str, PairedDifference]

    def to_dict(self) -> dict[str, Any]:
        return {"seeds": list(self.seeds), "metrics": {key: value.to_dict() for key, value in self.metrics.items()},
                "vs_reference": {key: value.to_dict() for key, value in self.vs_reference.items()},
                "per_seed": {seed: dict(figures) for seed, figures in self.per_seed.items()}}

    @classmethod
    def from_dict(cls, data: Any, where: str = "arm") -> "ArmComparison":
        """Read :meth:`to_dict`'s document (``per_seed`` is empty in files written before it was kept)."""
        seeds = _get(data, "seeds", where, "list")
        per_seed = _get(data, "per_seed", where, "mapping", optional=True) or {}
        return cls(
            seeds=tuple(_seed(seed, f"{where}.seeds[{index}]") for index, seed in enumerate(seeds)),
            per_seed={_seed(int(seed) if str(seed).isascii() and str(seed).isdigit() else seed,
                            f"{where}.per_seed.{short_repr(seed, 20)}"):
                      {str(name): _checked_real(value, f"{where}.per_seed.{seed}.{name}", -1e12, 1e12)
                       for name, value in _get(per_seed, str(seed), f"{where}.per_seed", "mapping").items()}
                      for seed in per_seed},
            metrics=read_mapping(_get(data, "metrics", where, "mapping"), f"{where}.metrics", Interval.from_dict),
            vs_reference=read_mapping(_get(data, "vs_reference", where, "mapping"), f"{where}.vs_reference",
                                      PairedDifference.from_dict))


@dataclass(frozen=True)
class MixedPairs:
    """An arm whose pairs with the reference span installations or CPU kernels (``--allow-mixed``)."""

    arm: str
    seeds: tuple[int, ...]
    differing: tuple[str, ...]
    dirs: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"arm": self.arm, "seeds": list(self.seeds), "differing": list(self.differing), "dirs": list(self.dirs)}

    @classmethod
    def from_dict(cls, data: Any, where: str = "mixed") -> "MixedPairs":
        def texts(name: str) -> tuple[str, ...]:
            return tuple(check_value(item, f"{where}.{name}[{index}]", "str")
                         for index, item in enumerate(_get(data, name, where, "list")))

        seeds = _get(data, "seeds", where, "list")
        return cls(_get(data, "arm", where, "str"),
                   tuple(_seed(seed, f"{where}.seeds[{index}]") for index, seed in enumerate(seeds)),
                   texts("differing"), texts("dirs"))


@dataclass(frozen=True)
class SeedComparison:
    """Runs grouped by arm over seeds (:func:`seed_comparison`); :meth:`to_dict` is ``compare --json``."""

    reference: str | None
    """The arm the differences are taken against; None when no run of it is among the runs."""
    primary: str | None
    """The pre-declared arm, if any."""
    arms: Mapping[str, ArmComparison]
    """In the order the arms first appear."""
    holm_arms: Mapping[str, tuple[str, ...]]
    """Per metric, the arms of its Holm family."""
    mixed_installations: tuple[MixedPairs, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"reference": self.reference, "primary": self.primary,
                "arms": {arm: entry.to_dict() for arm, entry in self.arms.items()},
                "holm_arms": {key: list(arms) for key, arms in self.holm_arms.items()},
                "mixed_installations": [entry.to_dict() for entry in self.mixed_installations]}

    @classmethod
    def from_dict(cls, data: Any, where: str = "") -> "SeedComparison":
        """Read ``compare --json``'s document back (files written before ``primary``, ``holm_arms`` or
        ``mixed_installations`` existed read them as None or empty; other keys a results file adds are left)."""
        holm_arms = _get(data, "holm_arms", where, "mapping", optional=True) or {}
        mixed = _get(data, "mixed_installations", where, "list", optional=True) or []
        return cls(
            reference=_get(data, "reference", where, "str", optional=True),
            primary=_get(data, "primary", where, "str", optional=True),
            arms=read_mapping(_get(data, "arms", where, "mapping"), f"{where}.arms" if where else "arms",
                              ArmComparison.from_dict),
            holm_arms={str(key): tuple(check_value(arm, f"holm_arms.{key}[{index}]", "str")
                                       for index, arm in enumerate(check_value(arms, f"holm_arms.{key}", "list")))
                       for key, arms in holm_arms.items()},
            mixed_installations=tuple(MixedPairs.from_dict(entry, f"mixed_installations[{index}]")
                                      for index, entry in enumerate(mixed)))


def _mixed_pairs(arm: str, reference: str, seeds: list[int], run_of: dict[tuple[str, int], RunRecord]) -> MixedPairs:
    """The seeds where ``arm``'s run and the reference's come from different installations or kernels."""
    mixed_seeds: list[int] = []
    differing: list[str] = []
    dirs: list[str] = []
    for seed in seeds:
        mine, theirs = run_of[arm, seed], run_of[reference, seed]
        found = (installation_difference(run_installation(mine), run_installation(theirs))
                 + kernel_difference(run_kernels(mine), run_kernels(theirs)))
        if found:
            mixed_seeds.append(seed)
            dirs += [str(mine.dir), str(theirs.dir)]
            differing += [text for text in found if text not in differing]
    return MixedPairs(arm, tuple(mixed_seeds), tuple(differing), tuple(dirs))


def seed_comparison(runs: list[RunRecord], reference: str = "fixed", primary: str | None = None,
                    allow_mixed: bool = False) -> SeedComparison:
    """Per arm and metric: mean and 95% interval over seeds; per arm and seed: the figures themselves
    (``per_seed``); per arm: the paired difference against ``reference`` (by seed) of every metric with ``p``, the
    two-sided p of a paired t test that it is 0 (None under 2 pairs), and ``p_holm``, that p adjusted by Holm over
    the arms compared against the reference on the same metric (``holm_arms`` names them per metric; metrics are
    not corrected against each other, so read the first one). Arms keep the order they first appear in.

    ``primary``: the arm whose comparison with the reference was declared before the runs were looked at. It is
    a single comparison: its ``p_holm`` is its raw ``p``, and the Holm family is the other arms. An arm that is not
    compared against the reference: ConfigError.

    Each pair compared (an arm's run and the reference's run of one seed) must come from one installation
    (:func:`run_installation`) and one set of CPU kernels (:func:`run_kernels`, where both runs recorded it), else a
    difference mixes library effects with the arm's: ConfigError, or with ``allow_mixed`` the arm is listed in
    ``mixed_installations`` for the text to flag."""
    by_arm: dict[str, dict[int, dict[str, float]]] = {}
    run_of: dict[tuple[str, int], RunRecord] = {}
    for run in runs:
        arm, seed = run_arm(run), run_seed(run)
        if seed in by_arm.setdefault(arm, {}):
            raise ConfigError("runs", run.dir, f"one run per arm and seed (arm {arm!r} has seed {seed} twice)")
        by_arm[arm][seed] = run_figures(run)
        run_of[arm, seed] = run
    compared = [arm for arm in by_arm if arm != reference] if reference in by_arm else []
    if primary is not None and primary not in compared:
        raise ConfigError("--primary", primary, f"one of the arms compared against {printable(reference)}: "
                          + printable(", ".join(compared) or f"none (no run of {reference} among {', '.join(by_arm)})"))
    mixed = [entry for entry in (_mixed_pairs(arm, reference, sorted(set(by_arm[arm]) & set(by_arm[reference])), run_of)
                                 for arm in compared) if entry.seeds]
    if mixed and not allow_mixed:
        differing = list(dict.fromkeys(text for entry in mixed for text in entry.differing))
        raise ConfigError("runs", list(dict.fromkeys(path for entry in mixed for path in entry.dirs)),
                          f"runs made on one installation (differing: {', '.join(differing[:3])}"
                          f"{' ...' if len(differing) > 3 else ''}): rerun on one installation, or pass --allow-mixed "
                          "to mark them")
    differences: dict[str, dict[str, tuple[Interval, float | None]]] = {}
    metrics: dict[str, dict[str, Interval]] = {}
    for arm, seeds in by_arm.items():
        metrics[arm], differences[arm] = {}, {}
        for key, _, _ in COMPARE_METRICS:
            values = {seed: figures[key] for seed, figures in seeds.items() if key in figures}
            if values:
                metrics[arm][key] = mean_interval(list(values.values()))
            if arm in compared:
                paired = paired_values(values, {seed: f[key] for seed, f in by_arm[reference].items() if key in f})
                if paired:
                    differences[arm][key] = (mean_interval(paired), paired_p_value(paired))
    holm_arms: dict[str, tuple[str, ...]] = {}
    adjusted: dict[str, dict[str, float]] = {}
    for key, _, _ in COMPARE_METRICS:
        family = {arm: p for arm in compared if arm != primary and key in differences[arm]
                  for p in [differences[arm][key][1]] if p is not None}
        adjusted[key] = holm(family)
        if family:
            holm_arms[key] = tuple(family)
    arms = {arm: ArmComparison(
        seeds=tuple(sorted(seeds)), per_seed={seed: dict(seeds[seed]) for seed in sorted(seeds)},
        metrics=metrics[arm],
        vs_reference={key: PairedDifference(interval, p, p if arm == primary else adjusted[key].get(arm))
                      for key, (interval, p) in differences[arm].items()})
        for arm, seeds in by_arm.items()}
    return SeedComparison(reference if reference in by_arm else None, primary, arms, holm_arms, tuple(mixed))


def _cell(stats: Interval | PairedDifference | None, signed: bool = False) -> str:
    if stats is None:
        return "-"
    interval = stats.interval if isinstance(stats, PairedDifference) else stats
    return interval.format(signed=signed)


def _p_text(p: float | None) -> str:
    """A p value for the table: 3 decimals, ``<0.001`` below that, ``-`` for none (fewer than 2 pairs)."""
    if p is None:
        return "-"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _wrapped(text: str) -> list[str]:
    return textwrap.wrap(text, width=80, subsequent_indent="  ", break_on_hyphens=False)


def _p_lines(result: SeedComparison, key: str, label: str) -> list[str]:
    """The p values of the paired differences on ``key`` (the headline metric): the pre-declared primary arm's
    raw p on its own line, the other arms' raw and Holm-adjusted p in a small table."""
    reference, primary = result.reference, result.primary
    rows = {arm: entry.vs_reference[key] for arm, entry in result.arms.items() if key in entry.vs_reference}
    shown_reference = printable(reference)
    if not rows:
        return []
    family = len(result.holm_arms.get(key, ()))
    over = f"Holm-adjusted over {family} arm{'s' if family != 1 else ''}"
    lines = []
    if primary in rows:
        lines += _wrapped(f"primary comparison (pre-declared): {printable(primary)} vs {shown_reference}, "
                          f"p={_p_text(rows[primary].p)} ({label}, unadjusted"
                          + (", 2+ pairs needed)" if rows[primary].n < 2 else ")"))
        if len(rows) > 1:
            lines += _wrapped(f"the rest: p (paired t on {label}, {over})")
    else:
        lines += _wrapped(f"p (paired t on {label}, {over}; 2+ pairs needed)")
    others = [arm for arm in rows if arm != primary]
    if others:
        lines.append(f"{'arm':<13}{'pairs':>5} {'p':>8} {'p Holm':>8}")
        for arm in others:
            diff = rows[arm]
            lines.append(f"{printable(arm)[:12]:<13}{diff.n:>5} {_p_text(diff.p):>8} "
                         f"{_p_text(diff.p_holm):>8}")
    return lines


def render_seed_comparison(result: SeedComparison) -> str:
    """The comparison as text: one row per arm, mean ± 95% half width over seeds, paired differences (a space
    always parts two cells, however wide an interval), the p of the paired differences on the headline metric
    (the first of :data:`COMPARE_METRICS` shown) and a WARNING for each arm whose pairs span installations
    (its row in the difference table ends in ``!``). Lines are at most 80 characters while arm cells fit. Every
    string read from the runs (arm names, the reference, installation differences) is printed through
    :func:`~simulator.text.printable`: a control character in a manifest cannot forge a line."""
    shown = [key for key, _, _ in COMPARE_METRICS
             if any(key in entry.metrics for entry in result.arms.values())]
    labels = {key: label for key, label, _ in COMPARE_METRICS}
    reference = result.reference
    mixed = {entry.arm: entry for entry in result.mixed_installations}
    lines = ["mean ± 95% interval over seeds (Student t); greedy unless p@1 (sampled pass@1)"]
    blocks = [("test set (read by nothing but this score)", [key for key in shown if key in TEST_METRICS]),
              ("evidence set (what the engineer saw)", [key for key in shown if key not in TEST_METRICS])]
    blocks = [(title, keys) for title, keys in blocks if keys]

    def table(title: str, count: str, keys: list[str], rows: list[tuple[str, int, list[str]]]) -> None:
        lines.append(title)
        lines.append(f"{'arm':<13}{count:>5}" + "".join(f" {labels[key]:>11}" for key in keys))
        lines.extend(f"{name:<13}{n:>5}" + "".join(f" {cell:>11}" for cell in cells) for name, n, cells in rows)

    arms = result.arms
    for title, keys in blocks:
        table(f"{title}:", "seeds", keys,
              [(printable(arm)[:12], len(entry.seeds), [_cell(entry.metrics.get(key)) for key in keys])
               for arm, entry in arms.items()])
    if reference:
        for title, keys in blocks:
            differences = []
            for arm, entry in arms.items():
                if arm == reference:
                    continue
                vs = entry.vs_reference
                pairs = max((vs[key].n for key in keys if key in vs), default=0)
                name = f"{printable(arm)[:11]}!" if arm in mixed else printable(arm)[:12]
                differences.append((name, pairs, [_cell(vs.get(key), signed=True) for key in keys]))
            table(f"paired difference against {printable(reference)} (same seeds), points, {title.split(' (')[0]}",
                  "pairs",
                  keys, differences)
        if shown:
            lines += _p_lines(result, shown[0], labels[shown[0]])
        for arm, pairs_mixed in mixed.items():
            lines += _wrapped(f"WARNING: arm {printable(arm)}'s pairs span installations "
                              f"({printable('; '.join(pairs_mixed.differing))}; "
                              f"seed{'s' if len(pairs_mixed.seeds) > 1 else ''} "
                              f"{', '.join(map(str, pairs_mixed.seeds))}): "
                              f"its differences against {printable(reference)} "
                              "mix library effects with the engineer's")
    seeds = sorted({seed for entry in result.arms.values() for seed in entry.seeds})
    lines.append(f"seeds: {', '.join(map(str, seeds))}")
    return "\n".join(lines)


__all__ = ["COMPARE_METRICS", "TEST_METRICS", "ArmComparison", "MixedPairs", "PairedDifference", "SeedComparison",
           "compare_table", "render_seed_comparison", "run_arm", "run_figures", "run_seed", "seed_comparison"]
