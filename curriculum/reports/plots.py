"""A run's plots (``rates.png``: validation per stage; ``mix.png``: the map-size mix per stage) and the curves of
several runs by arm (``curves.png``), drawn with matplotlib's Agg backend (no display needed)."""

from __future__ import annotations

from pathlib import Path

from curriculum.reports.compare import run_arm
from curriculum.reports.load import RunRecord
from curriculum.reports.stats import mean_interval
from simulator.text import counted


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


def write_curves(runs: list[RunRecord], out_dir: str | Path) -> Path:
    """``curves.png``: the evidence set's greedy valid rate per stage (0 = warm start), one line per arm (mean over
    seeds) with a band of the 95% interval; sampled pass@1 dashed where recorded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

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


__all__ = ["write_curves", "write_plots"]
