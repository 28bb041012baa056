"""Reports of runs: per-stage metrics, the config trajectory, PNG plots, and the paper-style table across runs."""

from __future__ import annotations

import json
from pathlib import Path

from curriculum.records import StageRecord
from engineer.evidence import StageEvidence
from simulator.errors import ConfigError
from simulator.tables import format_rate_table


def _read_json(path: Path, what: str, keys: tuple[str, ...] = ()) -> dict:
    """A JSON object from ``path`` with ``keys`` present, or ConfigError naming the file (never a traceback)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ConfigError(str(path), "unreadable", f"the {what} mapf-lake train wrote (JSON)",
                          " ".join(str(exc).split())[:200]) from None
    missing = [key for key in keys if not isinstance(data, dict) or key not in data]
    if missing:
        raise ConfigError(str(path), "incomplete", f"the {what} mapf-lake train wrote", f"no {missing[0]!r}")
    return data


def _stage_record(path: Path) -> StageRecord:
    data = _read_json(path, "stage record", ("stage", "scores", "train", "decision", "config"))
    try:
        return StageRecord.from_dict(data, str(path))
    except (ConfigError, TypeError, ValueError) as error:
        raise ConfigError(str(path), "incomplete", "the stage record mapf-lake train wrote",
                          " ".join(str(error).split())[:200]) from None


def _validation_summary(path: Path) -> StageEvidence:
    data = _read_json(path, "validation summary", ("valid_rate", "optimal_rate"))
    try:
        return StageEvidence.from_dict(data, str(path))
    except ConfigError as error:
        raise ConfigError(str(path), "incomplete", "the validation summary mapf-lake train wrote",
                          " ".join(str(error).split())[:200]) from None


def load_run(run_dir: str | Path) -> dict:
    """Everything a report needs from a run folder: stages, untrained/warm-start scores, final table. A missing
    or corrupt record raises ConfigError naming the file."""
    run_dir = Path(run_dir)
    if not (run_dir / "manifest.json").is_file():
        raise ConfigError("run", str(run_dir), "a run folder made by mapf-lake train (with manifest.json)")
    manifest = _read_json(run_dir / "manifest.json", "run manifest", ("run_config",))
    config = manifest["run_config"]
    if not isinstance(config, dict) or not isinstance(config.get("engineer"), dict) or "seed" not in config:
        raise ConfigError(str(run_dir / "manifest.json"), "incomplete", "the run manifest mapf-lake train wrote",
                          "its run_config lacks engineer or seed")
    stages = [_stage_record(path) for path in sorted(run_dir.glob("stage-*/stage.json"))]
    out = {"dir": str(run_dir), "manifest": manifest, "stages": stages}
    for part in ("untrained", "warm_start"):
        summary = run_dir / part / "summary.json"
        if summary.exists():
            failures = _validation_summary(summary).failures
            out[part] = {"valid_rate": failures.valid_rate, "optimal_rate": failures.optimal_rate}
    table = run_dir / "final" / "table.json"
    if table.exists():
        out["final"] = _read_json(table, "final table", ("cells", "mean", "suite"))
    return out


def render_report(run: dict) -> str:
    lines = [f"run {Path(run['dir']).name}: engineer {run['manifest']['run_config']['engineer']['spec']}, "
             f"model {run['manifest']['run_config']['model']}"]
    lines.append(f"{'stage':>10} {'valid%':>7} {'optimal%':>9} {'train reward':>13} {'zero-var groups':>16} "
                 f"{'s/step':>7} {'tokens':>7}  engineer")
    for name in ("untrained", "warm_start"):
        if name in run:
            lines.append(f"{name.replace('_', ' '):>10} {100 * run[name]['valid_rate']:>7.1f} {100 * run[name]['optimal_rate']:>9.1f}")
    for record in run["stages"]:
        scores, train, decision = record.scores, record.train, record.decision

        def fmt(value, spec):
            return format(value, spec) if isinstance(value, (int, float)) else "-"

        lines.append(
            f"{record.stage:>10} {100 * scores.valid_rate:>7.1f} {100 * scores.optimal_rate:>9.1f} "
            f"{fmt(train.get('reward_mean'), '>13.3f')} {fmt(train.get('zero_variance_share'), '>16.2f')} "
            f"{fmt(train.get('step_seconds'), '>7.2f')} {fmt(train.get('completion_tokens_mean'), '>7.1f')}  "
            f"{decision.outcome}: {'; '.join(decision.diff) or 'no change'}"
        )
    timed = [record for record in run["stages"] if record.timings]
    shared = [record for record in timed if record.shared_from]
    timed = [record for record in timed if not record.shared_from]
    if timed:
        from curriculum.run import loop_overhead

        lines.append("where each stage's time went (seconds; loop = outside training and the model's answers):")
        for record in timed:
            t = record.timings
            share = loop_overhead(t)
            loop = f"{100 * share:.1f}%" if share is not None else "n/a"
            lines.append(f"  stage {record.stage}: train {t.get('train', 0):.0f}, validation {t.get('validation', 0):.0f}"
                         f", judging {t.get('judging', 0):.1f}, instances {t.get('instances', 0):.1f}, records "
                         f"{t.get('records', 0):.1f}, engineer "
                         f"{t.get('engineer', 0):.1f}; loop {loop}")
        for record in shared:
            lines.append(f"  stage {record.stage}: copied from {Path(record.shared_from).name} (timed there)")
    lines.append("config trajectory (data_ratio per size; hole/wait ratio):")
    for record in run["stages"]:
        mix = ", ".join(f"{size}: {spec.data_ratio:.2f} ({spec.hole_ratio:.2f}/{spec.wait_ratio:.2f})"
                        for size, spec in record.config.sizes.items())
        agents = record.config.agents
        lines.append(f"  stage {record.stage}: agents {list(agents) if isinstance(agents, tuple) else agents}; {mix}")
    if "final" in run:
        final = run["final"]
        lines.append(f"final evaluation on {final['suite']}: " + ", ".join(
            f"{k} agents {100 * v['valid_rate']:.1f}% / {100 * v['optimal_rate']:.1f}%" for k, v in final["mean"].items()))
    return "\n".join(lines)


def write_plots(run: dict, out_dir: str | Path) -> list[Path]:
    """``rates.png`` (valid and optimal rate per stage) and ``mix.png`` (data-ratio mix per stage)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    labels, valid, optimal = [], [], []
    for name in ("untrained", "warm_start"):
        if name in run:
            labels.append(name.replace("_", " "))
            valid.append(100 * run[name]["valid_rate"])
            optimal.append(100 * run[name]["optimal_rate"])
    for record in run["stages"]:
        labels.append(f"stage {record.stage}")
        valid.append(100 * record.scores.valid_rate)
        optimal.append(100 * record.scores.optimal_rate)
    paths = []
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(labels, valid, marker="o", label="valid %")
    ax.plot(labels, optimal, marker="s", label="optimal %")
    ax.set_ylim(0, 100)
    ax.set_ylabel("validation %")
    ax.set_title(f"{Path(run['dir']).name}: validation per stage")
    ax.legend()
    fig.tight_layout()
    paths.append(out_dir / "rates.png")
    fig.savefig(paths[-1], dpi=100)
    plt.close(fig)
    if run["stages"]:
        sizes = sorted({side for r in run["stages"] for side in r.config.sizes})
        fig, ax = plt.subplots(figsize=(6, 3.5))
        bottom = [0.0] * len(run["stages"])
        for size in sizes:
            shares = [r.config.sizes[size].data_ratio if size in r.config.sizes else 0.0 for r in run["stages"]]
            ax.bar([f"stage {r.stage}" for r in run["stages"]], shares, bottom=bottom, label=f"{size}x{size}")
            bottom = [b + s for b, s in zip(bottom, shares)]
        ax.set_ylabel("data ratio")
        ax.set_title("map-size mix per stage")
        ax.legend(fontsize="small")
        fig.tight_layout()
        paths.append(out_dir / "mix.png")
        fig.savefig(paths[-1], dpi=100)
        plt.close(fig)
    return paths


def compare_table(runs: list[dict]) -> str:
    """Rows = runs, columns = map sizes (valid/optimal %), mean column; from each run's final evaluation."""
    finished = [run for run in runs if "final" in run]
    if not finished:
        raise ConfigError("runs", [run["dir"] for run in runs], "runs with a final evaluation (final/table.json)")
    sizes = sorted({int(key.split("x")[1]) for run in finished for key in run["final"]["cells"]})
    rows = []
    for run in finished:
        cells = run["final"]["cells"]
        by_size = {}
        for size in sizes:
            matching = [v for k, v in cells.items() if int(k.split("x")[1]) == size]
            if matching:
                by_size[size] = (sum(c["valid_rate"] for c in matching) / len(matching),
                                 sum(c["optimal_rate"] for c in matching) / len(matching))
        rows.append((f"{Path(run['dir']).name:<24}", by_size))
    return format_rate_table(f"final evaluation, valid% / optimal% ({finished[0]['final']['suite']})",
                             f"{'run':<24}", rows, sizes, mean_decimals=1)


# --- comparisons over seeds -------------------------------------------------------------------------------------

# Figures compared across arms, read from each run's last stage (held-out validation) and final evaluation.
COMPARE_METRICS = (
    ("valid", "valid %", "greedy valid rate on the held-out validation set after the last stage"),
    ("optimal", "optimal %", "greedy optimal rate on the same set"),
    ("pass1", "pass@1 %", "sampled pass@1 at the training temperature (validation.sampled_k samples each)"),
    ("lift", "lift", "valid minus the warm start's valid rate (what the stages added)"),
    ("final", "final %", "mean valid rate of the final evaluation suite"),
)


def run_arm(run: dict) -> str:
    """The comparison arm a run belongs to: its ``arm`` field, else its engineer spec."""
    config = run["manifest"]["run_config"]
    return config.get("arm") or config["engineer"]["spec"]


def run_seed(run: dict) -> int:
    return int(run["manifest"]["run_config"]["seed"])


def run_figures(run: dict) -> dict[str, float]:
    """The :data:`COMPARE_METRICS` of one run that it has (a run without finished stages has none)."""
    out: dict[str, float] = {}
    if run["stages"]:
        scores = run["stages"][-1].scores
        out["valid"] = scores.valid_rate
        out["optimal"] = scores.optimal_rate
        if scores.sampled_valid_rate is not None:
            out["pass1"] = scores.sampled_valid_rate
        start = run.get("warm_start") or run.get("untrained")
        if start:
            out["lift"] = scores.valid_rate - start["valid_rate"]
    if "final" in run:
        cells = run["final"]["cells"].values()
        out["final"] = sum(c["valid_rate"] for c in cells) / len(cells)
    return out


def seed_comparison(runs: list[dict], reference: str = "fixed") -> dict:
    """Per arm and metric: mean and 95% interval over seeds; per arm: the paired difference against
    ``reference`` (by seed) of every metric. Arms keep the order they first appear in."""
    from curriculum.stats import mean_interval, paired_difference

    by_arm: dict[str, dict[int, dict[str, float]]] = {}
    for run in runs:
        arm, seed = run_arm(run), run_seed(run)
        if seed in by_arm.setdefault(arm, {}):
            raise ConfigError("runs", run["dir"], f"one run per arm and seed (arm {arm!r} has seed {seed} twice)")
        by_arm[arm][seed] = run_figures(run)
    arms = {}
    for arm, seeds in by_arm.items():
        entry: dict = {"seeds": sorted(seeds), "metrics": {}, "vs_reference": {}}
        for key, _, _ in COMPARE_METRICS:
            values = {seed: figures[key] for seed, figures in seeds.items() if key in figures}
            if values:
                entry["metrics"][key] = mean_interval(list(values.values())).to_dict()
            if arm != reference and reference in by_arm:
                ref = {seed: f[key] for seed, f in by_arm[reference].items() if key in f}
                diff = paired_difference(values, ref)
                if diff is not None:
                    entry["vs_reference"][key] = diff.to_dict()
        arms[arm] = entry
    return {"reference": reference if reference in by_arm else None, "arms": arms}


def _cell(stats: dict | None, signed: bool = False) -> str:
    from curriculum.stats import Interval

    if not stats:
        return "-"
    return Interval(stats["mean"], stats["half_width"], stats["n"]).format(signed=signed)


def render_seed_comparison(result: dict) -> str:
    """The comparison as text: one row per arm, mean ± 95% half width over seeds, paired differences (a space
    always parts two cells, however wide an interval)."""
    shown = [key for key, _, _ in COMPARE_METRICS
             if any(key in entry["metrics"] for entry in result["arms"].values())]
    labels = {key: label for key, label, _ in COMPARE_METRICS}
    reference = result["reference"]
    lines = ["mean ± 95% interval over seeds (Student t), held-out validation; pass@1 sampled"]
    head = f"{'arm':<13}{'seeds':>5}" + "".join(f" {labels[key]:>11}" for key in shown)
    lines.append(head)
    for arm, entry in result["arms"].items():
        lines.append(f"{arm[:12]:<13}{len(entry['seeds']):>5}"
                     + "".join(f" {_cell(entry['metrics'].get(key)):>11}" for key in shown))
    if reference:
        lines.append(f"paired difference against {reference} (same seeds), points")
        lines.append(f"{'arm':<13}{'pairs':>5}" + "".join(f" {labels[key]:>11}" for key in shown))
        for arm, entry in result["arms"].items():
            if arm == reference:
                continue
            pairs = max((d["n"] for d in entry["vs_reference"].values()), default=0)
            lines.append(f"{arm[:12]:<13}{pairs:>5}"
                         + "".join(f" {_cell(entry['vs_reference'].get(key), signed=True):>11}" for key in shown))
    seeds = sorted({seed for entry in result["arms"].values() for seed in entry["seeds"]})
    lines.append(f"seeds: {', '.join(map(str, seeds))}")
    return "\n".join(lines)


def write_curves(runs: list[dict], out_dir: str | Path) -> Path:
    """``curves.png``: held-out greedy valid rate per stage (0 = warm start), one line per arm (mean over seeds)
    with a band of the 95% interval; sampled pass@1 dashed where recorded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from curriculum.stats import mean_interval

    def curve(run: dict, key: str) -> dict[int, float]:
        points = {}
        start = run.get("warm_start") or run.get("untrained")
        if start and key == "valid_rate":
            points[0] = start["valid_rate"]
        for record in run["stages"]:
            if getattr(record.scores, key) is not None:
                points[record.stage] = getattr(record.scores, key)
        return points

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4))
    arms: dict[str, list[dict]] = {}
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
            label = f"{arm} ({len(members)} seeds)" if key == "valid_rate" else f"{arm} pass@1"
            ax.plot(stages, means, style, marker="o" if style == "-" else None, color=color, label=label)
            if style == "-":
                ax.fill_between(stages, lows, highs, color=color, alpha=0.15)
    ax.set_xlabel("stage (0 = warm start)")
    ax.set_ylabel("held-out valid %")
    ax.set_title("validation per stage: mean and 95% interval over seeds")
    ax.legend(fontsize="small")
    fig.tight_layout()
    path = out_dir / "curves.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
