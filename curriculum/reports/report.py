"""Reports of runs: per-stage metrics, the config trajectory, PNG plots, and the paper-style table across runs."""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from curriculum.loop.records import StageRecord, read_record
from curriculum.reports.stats import Interval
from policy.evaluation import EvalTable, SampledPass1
from engineer.evidence import StageEvidence
from simulator.config import MAX_STAGE_AGENTS
from simulator.documents import checked_int as _checked_int
from simulator.documents import check_value, read_mapping
from simulator.documents import read_key as _get
from simulator.documents import checked_real as _checked_real
from simulator.errors import ConfigError, short_repr
from simulator.tables import format_rate_table
from simulator.text import counted, percent, printable




def _damaged(path: Path, what: str, error: ConfigError) -> ConfigError:
    """``error`` (naming a key inside the record) as one ConfigError that names the file first."""
    return ConfigError(str(path), "a damaged record", f"the {what} mapf-lake train writes (restore it, or start a "
                       "new run)", " ".join(str(error).split())[:300])


def _rate(value, where: str) -> float:
    """A share: a finite number in [0, 1] (a rate of 7 would print as 700%, NaN as nan)."""
    return _checked_real(value, where, 0.0, 1.0)


def _check_manifest(manifest: dict) -> None:
    """What report and compare read of the manifest, typed: run_config.engineer.spec, model, seed, arm, the
    initial config's agents, and the versions of the installation(s) the run was made with."""
    config = _get(manifest, "run_config", "", "mapping")
    _get(_get(config, "engineer", "run_config", "mapping"), "spec", "run_config.engineer", "str")
    _get(config, "model", "run_config", "str")
    _checked_int(config.get("seed"), "run_config.seed", 0, 2**31 - 1)  # RunConfig.seed's range
    if config.get("arm") is not None and not isinstance(config["arm"], str):
        raise ConfigError("run_config.arm", config["arm"], "a string (the comparison arm)")
    initial = _get(config, "initial_config", "run_config", "mapping", optional=True) or {}
    agents = initial.get("agents")
    if agents is not None:
        counts = agents if isinstance(agents, list) and len(agents) == 2 else [agents]
        for count in counts:
            _checked_int(count, "run_config.initial_config.agents", 1, MAX_STAGE_AGENTS)
    extended = _get(manifest, "extended", "", "list", optional=True) or []
    for where, entry in [("", manifest)] + [(f"extended[{index}]", entry) for index, entry in enumerate(extended)]:
        versions = _get(entry, "versions", where, "mapping", optional=True) or {}
        for name, version in versions.items():
            if version is not None and not isinstance(version, str):
                raise ConfigError(f"{where + '.' if where else ''}versions.{short_repr(name, 40)}", version,
                                  "a version string, or null (not installed)")
        machine = _get(entry, "machine", where, "mapping", optional=True) or {}
        at = f"{where + '.' if where else ''}machine"
        capability = machine.get("torch_cpu_capability")
        if capability is not None and not isinstance(capability, str):
            raise ConfigError(f"{at}.torch_cpu_capability", capability, "a string (AVX512, AVX2, ...), or null")
        for name, value in (_get(machine, "kernel_env", at, "mapping", optional=True) or {}).items():
            if not isinstance(value, str):
                raise ConfigError(f"{at}.kernel_env.{short_repr(name, 40)}", value, "the variable's value, a string")


def _record(path: Path, what: str, keys: tuple[str, ...], check) -> dict:
    """The record at ``path`` as a document, ``check(data)`` passed (read as :func:`_read_table` reads)."""
    def checked(data: Any, where: str) -> dict:
        check(data)
        return data

    return _read_table(path, what, keys, checked)


Table = TypeVar("Table")


def _read_table(path: Path, what: str, keys: tuple[str, ...], read: Callable[[Any, str], Table]) -> Table:
    """The record at ``path`` read by :func:`curriculum.loop.records.read_record` (a regular file, bounded, a JSON
    object with ``keys``) as ``read(data, "")`` makes it: a ConfigError of ``read`` is re-raised naming the file."""
    data = read_record(path, what, keys)
    try:
        return read(data, "")
    except ConfigError as error:
        raise _damaged(path, what, error) from None


def _stage_record(path: Path) -> StageRecord:
    data = read_record(path, "stage record", ("stage", "scores", "train", "decision", "config"))
    try:
        record = StageRecord.from_dict(data, "")
    except ConfigError as error:
        raise _damaged(path, "stage record", error) from None
    except (TypeError, ValueError, OverflowError, RecursionError) as error:  # a shape from_dict does not check
        raise _damaged(path, "stage record", ConfigError("stage record", type(error).__name__, "readable",
                                                         str(error))) from None
    folder = path.parent.name[len("stage-"):]
    if folder.isdigit() and int(folder) != record.stage:  # stage-01/ holding another stage's record
        raise _damaged(path, "stage record", ConfigError("stage", record.stage, f"{int(folder)} (its folder's "
                                                         f"number, {path.parent.name})"))
    return record


def _validation_summary(path: Path) -> StageEvidence:
    data = read_record(path, "validation summary", ("valid_rate", "optimal_rate"))
    try:
        evidence = StageEvidence.from_dict(data, "")
        for key in ("valid_rate", "optimal_rate"):
            _rate(getattr(evidence.failures, key), key)
    except ConfigError as error:
        raise _damaged(path, "validation summary", error) from None
    return evidence


@dataclass(frozen=True)
class Rates:
    """A validation summary's headline rates on the evidence set (the untrained model's, or the warm start's)."""

    valid_rate: float
    optimal_rate: float


@dataclass
class RunRecord:
    """A run folder as :func:`load_run` reads it, every record checked. The stage records are typed
    (:class:`curriculum.loop.records.StageRecord`); the manifest and the final tables stay the documents they are
    on disk, checked for the keys the report and the comparison read.

    Fields:
        dir: the run folder.
        manifest: ``manifest.json`` (its ``run_config`` the run's config document, ``versions``, ``extended``).
        stages: the finished stages in order, 1..N.
        untrained, warm_start: the evidence-set rates before training and after the warm start, where recorded.
        final: ``final/table.json``, the test set's table (:class:`policy.evaluation.EvalTable`); None before the
            final evaluation.
        final_sampled: ``final/sampled.json``, the test set's sampled pass@1 (:class:`SampledPass1`), where
            recorded.
    """

    dir: str
    manifest: dict[str, Any]
    stages: list[StageRecord]
    untrained: Rates | None = None
    warm_start: Rates | None = None
    final: EvalTable | None = None
    final_sampled: SampledPass1 | None = None

    @property
    def run_config(self) -> dict[str, Any]:
        """The run's config document (the manifest's ``run_config``)."""
        return self.manifest["run_config"]

    @property
    def start(self) -> Rates | None:
        """The rates the stages started from: the warm start's, else the untrained model's."""
        return self.warm_start or self.untrained


def load_run(run_dir: str | Path) -> RunRecord:
    """Everything a report needs from a run folder: stages, untrained/warm-start scores, final table. Each record
    is read by :func:`curriculum.loop.records.read_record` (a regular file of at most ``MAX_RECORD_BYTES``: a FIFO or a
    link to /dev/zero is refused before it is opened) and checked for the types and ranges the report and the
    comparison read; a missing, corrupt or ill-typed record raises ConfigError naming the file and the key."""
    run_dir = Path(run_dir)
    manifest_path = run_dir / "manifest.json"
    if not (manifest_path.exists() or manifest_path.is_symlink()):
        raise ConfigError("run", str(run_dir), "a run folder made by mapf-lake train (with manifest.json)")
    manifest = _record(manifest_path, "run manifest", ("run_config",), _check_manifest)
    stages = [_stage_record(path) for path in sorted(run_dir.glob("stage-*/stage.json"))]
    numbers = sorted(int(path.parent.name[len("stage-"):]) for path in run_dir.glob("stage-*/stage.json")
                     if path.parent.name[len("stage-"):].isdigit())
    if numbers != list(range(1, len(numbers) + 1)):  # a gap: the stages after it trained from a model not shown
        gaps = sorted(set(range(1, max(numbers) + 1)) - set(numbers))
        raise ConfigError("run", str(run_dir), "stages numbered 1..N without a gap (restore the missing stage)",
                          f"stage-{gaps[0]:02d}/stage.json is missing" if gaps else f"stage numbers {numbers}")
    out = RunRecord(dir=str(run_dir), manifest=manifest, stages=stages)
    for part in ("untrained", "warm_start"):
        summary = run_dir / part / "summary.json"
        if summary.exists() or summary.is_symlink():
            failures = _validation_summary(summary).failures
            setattr(out, part, Rates(failures.valid_rate, failures.optimal_rate))
    table = run_dir / "final" / "table.json"
    if table.exists() or table.is_symlink():
        out.final = _read_table(table, "final table", ("cells", "mean", "suite"), EvalTable.from_dict)
        sampled = run_dir / "final" / "sampled.json"
        if sampled.exists() or sampled.is_symlink():
            out.final_sampled = _read_table(sampled, "test-set sampled pass@1", ("cells", "k"), SampledPass1.from_dict)
    return out


def render_report(run: RunRecord) -> str:
    lines = [f"run {Path(run.dir).name}: engineer {run.run_config['engineer']['spec']}, "
             f"model {run.run_config['model']}"]
    if run.final is not None:
        final, sampled = run.final, run.final_sampled
        lines.append(f"test set ({final.suite}; read by nothing but this score), valid% / optimal%: " + ", ".join(
            f"{k} agents {100 * valid:.1f} / {100 * optimal:.1f}" for k in final.agents()
            for valid, optimal in [final.mean(k)]))
        if sampled is not None and sampled.cells:
            by_agents: dict[int, list[float]] = {}
            for (count, _), cell in sampled.cells.items():
                by_agents.setdefault(count, []).append(cell.valid_rate)
            lines.append(f"test set sampled pass@1 ({sampled.k} samples each): " + ", ".join(
                f"{k} agents {100 * sum(v) / len(v):.1f}" for k, v in by_agents.items()))
    else:
        lines.append("test set: not scored yet (the final evaluation runs after the last stage)")
    lines.append("evidence set (what the engineer saw), per stage:")
    lines.append(f"{'stage':>10} {'valid%':>7} {'optimal%':>9} {'train reward':>13} {'zero-var groups':>16} "
                 f"{'s/step':>7} {'tokens':>7}  engineer")
    for name, rates in (("untrained", run.untrained), ("warm_start", run.warm_start)):
        if rates is not None:
            lines.append(f"{name.replace('_', ' '):>10} {100 * rates.valid_rate:>7.1f} {100 * rates.optimal_rate:>9.1f}")
    for record in run.stages:
        scores, train, decision = record.scores, record.train, record.decision

        def fmt(value, spec):
            return format(value, spec) if isinstance(value, (int, float)) else "-"

        lines.append(
            f"{record.stage:>10} {100 * scores.valid_rate:>7.1f} {100 * scores.optimal_rate:>9.1f} "
            f"{fmt(train.reward_mean, '>13.3f')} {fmt(train.zero_variance_share, '>16.2f')} "
            f"{fmt(train.step_seconds, '>7.2f')} {fmt(train.completion_tokens_mean, '>7.1f')}  "
            f"{decision.outcome}: {'; '.join(decision.diff) or 'no change'}"
        )
    timed = [record for record in run.stages if record.timings.seconds()]
    shared = [record for record in timed if record.shared_from]
    timed = [record for record in timed if not record.shared_from]
    if timed:
        from curriculum.loop.run import loop_overhead

        lines.append("where each stage's time went (seconds; loop = outside training and the model's answers):")
        for record in timed:
            t = record.timings
            loop = percent(loop_overhead(t))
            lines.append(f"  stage {record.stage}: train {t.train or 0:.0f}, validation {t.validation or 0:.0f}"
                         f", judging {t.judging or 0:.1f}, instances {t.instances or 0:.1f}, records "
                         f"{t.records or 0:.1f}, engineer {t.engineer or 0:.1f}; loop {loop}")
        for record in shared:
            lines.append(f"  stage {record.stage}: copied from {Path(record.shared_from or '').name} (timed there)")
    lines.append("config trajectory (data_ratio per size; hole/wait ratio):")
    for record in run.stages:
        mix = ", ".join(f"{size}: {spec.data_ratio:.2f} ({spec.hole_ratio:.2f}/{spec.wait_ratio:.2f})"
                        for size, spec in record.config.sizes.items())
        agents = record.config.agents
        lines.append(f"  stage {record.stage}: agents {list(agents) if isinstance(agents, tuple) else agents}; {mix}")
    return "\n".join(lines)


def write_plots(run: RunRecord, out_dir: str | Path) -> list[Path]:
    """``rates.png`` (valid and optimal rate per stage) and ``mix.png`` (data-ratio mix per stage)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    labels, valid, optimal = [], [], []
    for name, rates in (("untrained", run.untrained), ("warm_start", run.warm_start)):
        if rates is not None:
            labels.append(name.replace("_", " "))
            valid.append(100 * rates.valid_rate)
            optimal.append(100 * rates.optimal_rate)
    for record in run.stages:
        labels.append(f"stage {record.stage}")
        valid.append(100 * record.scores.valid_rate)
        optimal.append(100 * record.scores.optimal_rate)
    paths = []
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(labels, valid, marker="o", label="valid %")
    ax.plot(labels, optimal, marker="s", label="optimal %")
    ax.set_ylim(0, 100)
    ax.set_ylabel("validation %")
    ax.set_title(f"{Path(run.dir).name}: validation per stage")
    ax.legend()
    fig.tight_layout()
    paths.append(out_dir / "rates.png")
    fig.savefig(paths[-1], dpi=100)
    plt.close(fig)
    if run.stages:
        sizes = sorted({side for r in run.stages for side in r.config.sizes})
        fig, ax = plt.subplots(figsize=(6, 3.5))
        bottom = [0.0] * len(run.stages)
        for size in sizes:
            shares = [r.config.sizes[size].data_ratio if size in r.config.sizes else 0.0 for r in run.stages]
            ax.bar([f"stage {r.stage}" for r in run.stages], shares, bottom=bottom, label=f"{size}x{size}")
            bottom = [b + s for b, s in zip(bottom, shares)]
        ax.set_ylabel("data ratio")
        ax.set_title("map-size mix per stage")
        ax.legend(fontsize="small")
        fig.tight_layout()
        paths.append(out_dir / "mix.png")
        fig.savefig(paths[-1], dpi=100)
        plt.close(fig)
    return paths


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
    return run.run_config.get("arm") or run.run_config["engineer"]["spec"]


def run_seed(run: RunRecord) -> int:
    return int(run.run_config["seed"])


def run_installation(run: RunRecord) -> dict[str, str | None]:
    """The library versions a run was made with: its manifest's ``versions`` ({name: version}; None = not
    installed; {} when the manifest has none, an old or hand-made run). A run extended later under other versions
    (``manifest["extended"]``) was made on several installations: each package whose version changed reads
    ``"2.12.0 then 2.13.0"``, so such a run matches only a run extended across the same change."""
    manifest = run.manifest
    history = [manifest.get("versions") or {}]
    history += [entry.get("versions") or {} for entry in manifest.get("extended", [])]
    names = list(dict.fromkeys(name for versions in history for name in versions))
    out: dict[str, str | None] = {}
    for name in names:  # control characters escaped: a newline in a version would forge a line of the comparison
        seen = list(dict.fromkeys(versions.get(name, "unknown") for versions in history))
        version = seen[0] if len(seen) == 1 else " then ".join(str(version) for version in seen)
        out[printable(name)] = None if version is None else printable(version)
    return out


def installation_difference(arm: dict[str, str | None], reference: dict[str, str | None]) -> list[str]:
    """What differs between two :func:`run_installation` results, e.g. ``["torch 2.13.0 vs 2.12.0"]`` (empty when
    they are the same; a side without versions reads as unknown)."""
    if arm == reference:
        return []
    if not arm or not reference:
        return [f"versions {'recorded' if arm else 'unknown'} vs {'recorded' if reference else 'unknown'}"]
    return [f"{name} {arm.get(name, 'unknown')} vs {reference.get(name, 'unknown')}"
            for name in dict.fromkeys([*arm, *reference]) if arm.get(name, "unknown") != reference.get(name, "unknown")]


def run_kernels(run: RunRecord) -> dict[str, str] | None:
    """What chose a run's CPU kernels, from its manifest's ``machine``: ``torch_cpu_capability`` (torch's CPU
    kernels: ``AVX512``, ``AVX2``, ...) and each kernel variable of :data:`curriculum.loop.folder.KERNEL_ENV` that was
    set (``ONEDNN_MAX_CPU_ISA``, ``OMP_NUM_THREADS``, ...). Per-seed figures depend on them (AVX-512/AMX and AVX2
    kernels round differently). None for a manifest written before they were recorded (no
    ``torch_cpu_capability``): such a run compares on its versions alone, as before. A run extended later on other
    kernels reads ``"AVX512 then AVX2"``, as :func:`run_installation` reads versions."""
    manifest = run.manifest
    history = [manifest.get("machine")] + [entry.get("machine") for entry in manifest.get("extended", [])]
    recorded = [machine for machine in history if isinstance(machine, Mapping) and "torch_cpu_capability" in machine]
    if not recorded or recorded[0] is not history[0]:
        return None
    facts = [{"torch_cpu_capability": str(machine["torch_cpu_capability"] or "unknown"),
              **{str(name): str(value) for name, value in (machine.get("kernel_env") or {}).items()}}
             for machine in recorded]
    out: dict[str, str] = {}
    for name in dict.fromkeys(name for fact in facts for name in fact):
        seen = list(dict.fromkeys(fact.get(name, "unset") for fact in facts))
        out[printable(name)] = printable(" then ".join(seen))
    return out


def kernel_difference(arm: dict[str, str] | None, reference: dict[str, str] | None) -> list[str]:
    """What differs between two :func:`run_kernels` results, e.g. ``["torch_cpu_capability AVX512 vs AVX2",
    "ONEDNN_MAX_CPU_ISA unset vs AVX2"]``; empty when they agree or either run did not record them."""
    if arm is None or reference is None:
        return []
    return [f"{name} {arm.get(name, 'unset')} vs {reference.get(name, 'unset')}"
            for name in dict.fromkeys([*arm, *reference]) if arm.get(name, "unset") != reference.get(name, "unset")]


def _training_agents(run: RunRecord) -> set[int]:
    """Agent counts of the run's training data: its initial config's ``agents`` (a count or ``[min, max]``)."""
    agents = (run.run_config.get("initial_config") or {}).get("agents", 2)
    if isinstance(agents, (list, tuple)) and len(agents) == 2 and all(isinstance(a, int) for a in agents):
        return set(range(agents[0], agents[1] + 1))
    return {agents} if isinstance(agents, int) else {2}


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
            seeds=tuple(_checked_int(seed, f"{where}.seeds[{index}]", 0, 2**31 - 1) for index, seed in enumerate(seeds)),
            per_seed={_checked_int(int(seed) if str(seed).isdigit() else seed, f"{where}.per_seed.{short_repr(seed, 20)}",
                                  0, 2**31 - 1):
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
                   tuple(_checked_int(seed, f"{where}.seeds[{index}]", 0, 2**31 - 1) for index, seed in enumerate(seeds)),
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
    from curriculum.reports.stats import holm, mean_interval, paired_p_value, paired_values

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
    import textwrap

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


def write_curves(runs: list[RunRecord], out_dir: str | Path) -> Path:
    """``curves.png``: the evidence set's greedy valid rate per stage (0 = warm start), one line per arm (mean over
    seeds) with a band of the 95% interval; sampled pass@1 dashed where recorded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    from curriculum.reports.stats import mean_interval

    def curve(run: RunRecord, key: str) -> dict[int, float]:
        points = {}
        if run.start is not None and key == "valid_rate":
            points[0] = run.start.valid_rate
        for record in run.stages:
            if getattr(record.scores, key) is not None:
                points[record.stage] = getattr(record.scores, key)
        return points

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4))
    arms: dict[str, list[RunRecord]] = {}
    for run in runs:
        arms.setdefault(run_arm(run), []).append(run)
    for index, (arm, members) in enumerate(arms.items()):
        color = f"C{index % 10}"
        for key, style in (("valid_rate", "-"), ("sampled_valid_rate", "--")):
            curves = [curve(run, key) for run in members]
            stages = sorted({stage for c in curves for stage in c})
            if not stages:
                continue
            means, lows, highs = [], [], []
            for stage in stages:
                stats = mean_interval([100 * c[stage] for c in curves if stage in c])
                means.append(stats.mean)
                lows.append(stats.low if stats.low is not None else stats.mean)
                highs.append(stats.high if stats.high is not None else stats.mean)
            label = f"{arm} ({counted(len(members), 'seed')})" if key == "valid_rate" else f"{arm} pass@1"
            ax.plot(stages, means, style, marker="o" if style == "-" else None, color=color, label=label)
            if style == "-":
                ax.fill_between(stages, lows, highs, color=color, alpha=0.15)
    ax.set_xlabel("stage (0 = warm start)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # stages are whole numbers: no tick at 0.25
    ax.set_ylabel("evidence valid %")
    ax.set_title("validation per stage: mean and 95% interval over seeds")
    ax.legend(fontsize="small")
    fig.tight_layout()
    path = out_dir / "curves.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
