"""Reports of runs: per-stage metrics, the config trajectory, PNG plots, and the paper-style table across runs."""

from __future__ import annotations

import json
from pathlib import Path

from simulator.errors import ConfigError


def load_run(run_dir: str | Path) -> dict:
    """Everything a report needs from a run folder: stages, untrained/warm-start scores, final table."""
    run_dir = Path(run_dir)
    if not (run_dir / "manifest.json").exists():
        raise ConfigError("run", str(run_dir), "a run folder made by mapf-lake train (with manifest.json)")
    stages = []
    for path in sorted(run_dir.glob("stage-*/stage.json")):
        stages.append(json.loads(path.read_text()))
    out = {"dir": str(run_dir), "manifest": json.loads((run_dir / "manifest.json").read_text()), "stages": stages}
    for part in ("untrained", "warm_start"):
        summary = run_dir / part / "summary.json"
        if summary.exists():
            data = json.loads(summary.read_text())
            out[part] = {"valid_rate": data["valid_rate"], "optimal_rate": data["optimal_rate"]}
    table = run_dir / "final" / "table.json"
    if table.exists():
        out["final"] = json.loads(table.read_text())
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
        scores, train, decision = record["scores"], record["train"], record["decision"]

        def fmt(value, spec):
            return format(value, spec) if isinstance(value, (int, float)) else "-"

        lines.append(
            f"{record['stage']:>10} {100 * scores['valid_rate']:>7.1f} {100 * scores['optimal_rate']:>9.1f} "
            f"{fmt(train.get('reward_mean'), '>13.3f')} {fmt(train.get('zero_variance_share'), '>16.2f')} "
            f"{fmt(train.get('step_seconds'), '>7.2f')} {fmt(train.get('completion_tokens_mean'), '>7.1f')}  "
            f"{'accepted' if decision.get('accepted') else 'kept'}: {'; '.join(decision.get('diff') or []) or 'no change'}"
        )
    lines.append("config trajectory (data_ratio per size; hole/wait ratio):")
    for record in run["stages"]:
        sizes = record["config"]["sizes"]
        mix = ", ".join(f"{size}: {spec['data_ratio']:.2f} ({spec['hole_ratio']:.2f}/{spec['wait_ratio']:.2f})"
                        for size, spec in sizes.items())
        lines.append(f"  stage {record['stage']}: agents {record['config']['agents']}; {mix}")
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
        labels.append(f"stage {record['stage']}")
        valid.append(100 * record["scores"]["valid_rate"])
        optimal.append(100 * record["scores"]["optimal_rate"])
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
        sizes = sorted({int(s) for r in run["stages"] for s in r["config"]["sizes"]})
        fig, ax = plt.subplots(figsize=(6, 3.5))
        bottom = [0.0] * len(run["stages"])
        for size in sizes:
            shares = [r["config"]["sizes"].get(str(size), {}).get("data_ratio", 0.0) for r in run["stages"]]
            ax.bar([f"stage {r['stage']}" for r in run["stages"]], shares, bottom=bottom, label=f"{size}x{size}")
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
    lines = [f"final evaluation, valid% / optimal% ({finished[0]['final']['suite']})",
             f"{'run':<24}" + "".join(f"{f'{s}x{s}':>11}" for s in sizes) + f"{'mean':>11}"]
    for run in finished:
        cells = run["final"]["cells"]
        row = []
        values = []
        for size in sizes:
            matching = [v for k, v in cells.items() if int(k.split("x")[1]) == size]
            if matching:
                v = sum(c["valid_rate"] for c in matching) / len(matching)
                o = sum(c["optimal_rate"] for c in matching) / len(matching)
                values.append((v, o))
                row.append(f"{100 * v:.0f}/{100 * o:.0f}")
            else:
                row.append("-")
        mean = (f"{100 * sum(v for v, _ in values) / len(values):.1f}/{100 * sum(o for _, o in values) / len(values):.1f}"
                if values else "-")
        lines.append(f"{Path(run['dir']).name:<24}" + "".join(f"{cell:>11}" for cell in row) + f"{mean:>11}")
    return "\n".join(lines)
