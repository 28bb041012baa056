"""Subcommands owned by the curriculum: ``train``, ``report`` and ``compare``."""

from __future__ import annotations

import argparse
import shutil
import sys
from typing import TYPE_CHECKING

from curriculum.config import PRESET_SUMMARIES, PRESETS, parse_overrides
from engineer.engineers import compare_specs
from simulator.cli import add_command
from simulator.text import printable

if TYPE_CHECKING:
    from curriculum.reports.report import SeedComparison

# The comparison set of ``train --compare``: same budget and seeds, only the engineer differs.
COMPARE_ENGINEERS = compare_specs()  # one per registered engineer (engineer.engineers.ENGINEERS)
# Default arms beyond one per engineer: an engineer with options that a bare spec cannot say. ``gap-drop`` is the
# ``gap`` engineer that trains each size without the instances that need a wait while it fails them, deciding
# stage 1 too (docs/results/small.md, "An engineer that drops what the policy cannot learn yet"); ``gap-band`` the same
# that also trains each size on the plan lengths its validation solves sometimes but not mostly (docs/results/small.md,
# "The plan-length band on the `small` preset").
COMPARE_EXTRA_ARMS = {"gap-drop": {"engineer.spec": "gap", "engineer.options.remedy": "drop",
                                   "engineer.plan_first": True},
                      "gap-band": {"engineer.spec": "gap", "engineer.options.remedy": "drop",
                                   "engineer.options.lengths": "frontier", "engineer.plan_first": True}}


# Open-loop controls of ``gap-band`` (docs/results/controls/README.md): run only when named (``--arm band-replay``),
# never by default. ``band-replay`` writes at each decision what ``gap-band``'s run of the paired seed wrote there
# (the runs of ``--preset small --compare --seeds N``, beside its own; seed s reads s + 1 for odd s, s - 1 for even);
# ``band-first-only`` plans stage 1 as ``gap-band`` does and keeps that config; ``band-no-*`` are ``gap-band`` with
# one of its options at the ``gap`` engineer's default (``band-no-lengths`` has ``gap-drop``'s settings).
_BAND = COMPARE_EXTRA_ARMS["gap-band"]
CONTROL_ARMS = {
    "band-replay": {"engineer.spec": "replay-decisions", "engineer.options.source": "small-gap-band-s{seed}",
                    "engineer.options.pairing": "swap", "engineer.plan_first": True},
    "band-first-only": {**_BAND, "engineer.spec": "first-only"},
    "band-no-remedy": {key: value for key, value in _BAND.items() if key != "engineer.options.remedy"},
    "band-no-lengths": {key: value for key, value in _BAND.items() if key != "engineer.options.lengths"},
    "band-no-plan-first": {**_BAND, "engineer.plan_first": False},
}


def default_arms() -> dict[str, dict]:
    """The arms ``train --compare`` runs without ``--arm``: one per compared engineer, then the extra arms."""
    arms = {spec.replace(":", "-"): {"engineer.spec": spec} for spec in COMPARE_ENGINEERS}
    return {**arms, **COMPARE_EXTRA_ARMS}


# A real language model as the engineer of the tiny-policy presets (issue 60): SmolLM2-135M-Instruct, made offline
# from its registry wheel on first use (hf:@smollm2), its answer held to the answer schema (map sides of the CPU
# presets, a short rationale; the schema is not shown in the prompt, which keeps it within the model's window),
# planning stage 1 as gap-band does. Run only when named (--arm smollm2-engineer).
MODEL_ARMS = {
    "smollm2-engineer": {"engineer.spec": "llm:hf:@smollm2", "engineer.options.answer_mode": "constrained",
                         "engineer.options.show_schema": False, "engineer.options.sides": [3, 4, 5, 6],
                         "engineer.options.rationale_chars": 300, "engineer.options.max_new_tokens": 400,
                         "engineer.plan_first": True},
}


def named_arms() -> dict[str, dict]:
    """The arms ``--arm NAME`` picks by a bare name: the default arms, then :data:`CONTROL_ARMS` and
    :data:`MODEL_ARMS`."""
    return {**default_arms(), **CONTROL_ARMS, **MODEL_ARMS}


def _train(args: argparse.Namespace) -> int:
    import yaml

    from curriculum.config import load_run_config, preset
    from curriculum.reports.report import (compare_table, load_run, render_report, render_seed_comparison, seed_comparison,
                                   write_curves, write_plots)
    from curriculum.loop.folder import RunFolder
    from curriculum.training.run import Run, resume
    from curriculum.loop.sets import check_bands
    from curriculum.loop.sharing import share_warm_start

    from simulator.errors import ConfigError, in_file

    if not 1 <= args.seeds <= 100:
        raise ConfigError("--seeds", args.seeds, "1 <= seeds <= 100")
    if args.primary is not None and not args.compare:
        raise ConfigError("--primary", args.primary, "used with --compare (it names one of the compared arms)")
    if not args.compare and (args.seeds != 1 or args.arm):
        raise ConfigError("--seeds" if args.seeds != 1 else "--arm", args.seeds if args.seeds != 1 else args.arm[0],
                          "used with --compare (a single run has one seed: --set seed=N)")

    if args.settings:
        from curriculum.config import settings_rows
        from simulator.fields import format_rows

        print(format_rows(settings_rows(), width=min(shutil.get_terminal_size().columns, 100) - 2, stacked=True))
        return 0
    if args.resume:
        overrides = parse_overrides(args.set)
        if set(overrides) - {"stages"} or args.compare or args.name or args.output_dir:
            extra = sorted(set(overrides) - {"stages"})
            raise ConfigError("--resume", args.resume, "alone, or with --set stages=N to extend the run (its other "
                              "settings are the folder's run.yaml)" + (f"; got --set {', '.join(extra)}" if extra else ""))
        resume(args.resume, stages=overrides.get("stages"))
        print(render_report(load_run(args.resume)))
        return 0
    file_config = load_run_config(args.config) if args.config else None
    config = file_config if file_config is not None else preset(args.preset)
    overrides = parse_overrides(args.set)
    if args.name:
        overrides["name"] = args.name
    if args.output_dir:
        overrides["output_dir"] = args.output_dir
    if overrides:
        config = config.with_overrides(**overrides)
    if args.rehearse:
        from curriculum.loop.rehearsal import rehearsal_config

        config = rehearsal_config(config, log=lambda line: print(line, file=sys.stderr))
    # with --compare, every arm's full run config is built and validated before anything else (--print-config
    # included): an unknown arm or an override the run would refuse is refused at once, not after a warm start
    arms = _parse_arms(args.arm) if args.compare else {}
    if args.primary is not None and args.primary not in arms:
        raise ConfigError("--primary", args.primary, f"one of the arms: {', '.join(arms)}")
    seeds = [config.seed + offset for offset in range(args.seeds)]
    variants = {(seed, arm): _arm_variant(config, arm, seed, arm_overrides, args.seeds > 1)
                for seed in seeds for arm, arm_overrides in arms.items()}
    # an impossible makespan band: refused now, not after a warm start (each distinct set of stage configs once)
    for checked in {(run.initial_config, run.validation.config, run.warm_start.config): run
                    for run in [config, *variants.values()]}.values():
        try:
            check_bands(checked)
        except ConfigError as error:
            if file_config is not None and _size_from_file(error.field, file_config, checked):
                in_file(error, args.config)
            raise
    if args.print_config:
        print(yaml.safe_dump(config.to_dict(), sort_keys=False), end="")
        return 0
    if not args.compare:
        Run(config).execute()
        run = load_run(config.run_dir)
        print(render_report(run))
        write_plots(run, config.run_dir)
        return 0
    for variant in variants.values():  # a folder another run config made is refused before any arm trains
        RunFolder(variant, log=lambda line: None).check()
    runs = []
    for seed in seeds:
        # The seed's first arm trains the warm start; a stage any earlier arm of the seed trained with the same
        # settings and stage configs (stage 1 wherever only the engineers differ) is copied, not trained again.
        siblings: list = []
        for arm in arms:
            variant = variants[seed, arm]
            name = variant.name
            if siblings:
                share_warm_start(siblings[0].run_dir, variant.run_dir)
            print(f"== {name}", file=sys.stderr)
            Run(variant, siblings=siblings).execute()
            siblings.append(variant)
            runs.append(load_run(variant.run_dir))
            write_plots(runs[-1], variant.run_dir)
    if args.seeds == 1:
        for run in runs:
            print(render_report(run))
            print()
        print(compare_table(runs))
        print()
    result = seed_comparison(runs, primary=args.primary)
    print(render_seed_comparison(result))
    print(f"curves: {write_curves(runs, config.run_dir.parent / (config.name + '-compare'))}", file=sys.stderr)
    if args.primary is not None:
        print(verdict(result))
    return 0


def verdict(result: SeedComparison, metric: str = "test") -> str:
    """The comparison's last word on its pre-declared arm: did it beat the reference on the test set? Said plainly
    either way: a lead counts only with 2+ paired seeds, an interval above 0 and p < 0.05."""
    from curriculum.reports.report import COMPARE_METRICS

    primary, reference = result.primary, result.reference
    label = dict((key, label) for key, label, _ in COMPARE_METRICS)[metric]
    arm = result.arms.get(primary) if primary is not None else None
    diff = arm.vs_reference.get(metric) if arm is not None else None
    if not primary or not reference or diff is None:
        return f"verdict: no test-set comparison of {primary} against {reference} (no paired {label} figures)"
    lead = f"{100 * diff.interval.mean:+.1f} points of {label}"
    low, high = diff.interval.low, diff.interval.high
    if diff.n < 2 or low is None or high is None:
        return (f"verdict: {primary} vs {reference} on the test set: {lead} on one seed, which measures nothing "
                "(no interval). This run shows the loop at work; whether an engineer beats fixed is measured over "
                "seeds in docs/results/protocol/.")
    p = diff.p
    text = f"{lead}, 95% interval {100 * low:+.1f}..{100 * high:+.1f} over {diff.n} seeds"
    if low > 0 and p is not None and p < 0.05:
        return f"verdict: {primary} beat {reference} on the test set: {text} (p={p:.3g})."
    return (f"verdict: {primary} did NOT beat {reference} on the test set: {text}"
            + (f" (p={p:.3g})" if p is not None else "") + ".")


# Run-config keys an arm may not override: the comparison sets them per run itself (the seed from --seeds, the
# name and arm from the arm's name).
ARM_RESERVED_KEYS = ("seed", "name", "arm")
MAX_ARM_NAME = 100  # RunConfig.arm's bound


def _check_arm_name(name: str, spec: str, taken: dict, defaults: dict) -> None:
    from simulator.errors import ConfigError

    if "\n" in name or "\r" in name or any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise ConfigError("--arm", spec, "a name without a newline or other control characters")
    if len(name) > MAX_ARM_NAME:
        raise ConfigError("--arm", spec, f"a name of at most {MAX_ARM_NAME} characters (got {len(name)})")
    if "/" in name or "\\" in name or name in taken:
        raise ConfigError("--arm", spec, "NAME=KEY=VALUE[;KEY=VALUE...] with a new plain name (no '/' or '\\'), "
                          f"or a named arm ({', '.join(defaults)})")


def _size_from_file(field: str, file_config, checked) -> bool:
    """Whether ``field`` (``initial_config.sizes.6.min_makespan``, as :func:`check_bands` names a refused band)
    lies in a size the run config file set as ``checked`` has it (no ``--set`` or ``--arm`` changed it): the
    refusal is then the file's, and names it as the file's other refusals do."""
    from operator import attrgetter

    from curriculum.config import STAGE_CONFIG_FIELDS

    for where in STAGE_CONFIG_FIELDS:
        prefix = f"{where}.sizes."
        if not field.startswith(prefix):
            continue
        side = field[len(prefix):].partition(".")[0]
        stages = attrgetter(where)(file_config), attrgetter(where)(checked)
        if not side.isdigit() or any(stage is None for stage in stages):
            return False
        mine, run = (stage.sizes.get(int(side)) for stage in stages)
        return mine is not None and mine == run
    return False


def _arm_variant(config, arm: str, seed: int, overrides: dict, seeded_name: bool):
    """``config`` as arm ``arm`` of seed ``seed`` runs it (its name, arm, seed and overrides), validated as the run
    validates it; a refused override is a ConfigError naming ``--arm NAME`` and the key."""
    from simulator.errors import ConfigError

    name = f"{config.name}-{arm}" + (f"-s{seed}" if seeded_name else "")
    spec = overrides.get("engineer.spec")
    if spec is not None and spec != config.engineer.spec and "engineer.options" not in overrides:
        # the config's engineer options were written for its own engineer: an arm of another engineer starts from
        # none (``--arm fixed`` on ``smol-self``, whose options are the language model's), then takes its own
        overrides = {"engineer.options": {}, **overrides}
    try:
        return config.with_overrides(name=name, arm=arm, seed=seed, **overrides)
    except ConfigError as error:
        if error.field in ("name", "arm", "seed"):  # set by the comparison itself, not the arm's overrides
            raise
        raise ConfigError(f"--arm {arm}: {error.field}", error.value, error.allowed) from None


def _parse_arms(specs: list[str] | None) -> dict[str, dict]:
    """``--arm NAME=KEY=VALUE[;KEY=VALUE...]`` (or a bare NAME of :func:`named_arms`) -> {name: overrides}; none given:
    :func:`default_arms`. A name is at most 100 characters without '/', '\\' or control characters; a key
    appears once per arm and is not one of :data:`ARM_RESERVED_KEYS`; values are finite."""
    from simulator.errors import ConfigError

    if not specs:
        return default_arms()
    defaults = named_arms()
    arms: dict[str, dict] = {}
    for spec in specs:
        if "=" not in spec and spec in defaults and spec not in arms:  # a default arm by its name
            arms[spec] = defaults[spec]
            continue
        name, sep, rest = spec.partition("=")
        if not sep or not name or not rest:
            raise ConfigError("--arm", spec, "NAME=KEY=VALUE[;KEY=VALUE...], e.g. nofail=engineer.context=[behavior], "
                              f"or the name of a default arm or control arm ({', '.join(defaults)})")
        _check_arm_name(name, spec, arms, defaults)
        pairs = [part for part in rest.split(";") if part]
        keys = [pair.partition("=")[0] for pair in pairs]
        repeated = sorted({key for key in keys if keys.count(key) > 1})
        if repeated:
            raise ConfigError(f"--arm {name}", repeated[0], "each key once within an arm")
        overrides = parse_overrides(pairs, flag=f"--arm {name}")
        reserved = [key for key in overrides if key in ARM_RESERVED_KEYS]
        if reserved:
            raise ConfigError(f"--arm {name}", reserved[0], f"keys other than {', '.join(ARM_RESERVED_KEYS)}: the "
                              "comparison sets them for each run (--seeds N for seeds; the arm's name for name and "
                              "arm)")
        arms[name] = overrides
    return arms


def _report(args: argparse.Namespace) -> int:
    from curriculum.reports.report import load_run, render_report, write_plots

    from curriculum.reports.report import write_curves

    runs = [load_run(path) for path in args.run]
    for index, run in enumerate(runs):
        print(("\n" if index else "") + render_report(run))
        for path in write_plots(run, args.plots or run.dir):
            print(f"plot: {path}", file=sys.stderr)
    if len(runs) > 1:
        print(f"plot: {write_curves(runs, args.plots or args.run[0])}", file=sys.stderr)
    return 0


def _compare(args: argparse.Namespace) -> int:
    import json

    from curriculum.reports.report import compare_table, load_run, render_seed_comparison, seed_comparison

    runs = [load_run(path) for path in args.runs]
    result = seed_comparison(runs, reference=args.reference, primary=args.primary, allow_mixed=args.allow_mixed)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return 0
    if any(run.final is not None for run in runs):
        print(compare_table(runs))
        print()
    print(render_seed_comparison(result))
    trainers = arm_trainers(runs)
    if len(set(trainers.values())) > 1:
        print(printable(f"note: the arms train their stages with different trainers ("
                        f"{', '.join(f'{arm} {trainer}' for arm, trainer in trainers.items())}): a difference between "
                        f"them is the trainer's as much as the engineer's"))
    return 0


def arm_trainers(runs) -> dict[str, str]:
    """Each arm's stage trainer (``training.trainer`` of its runs' configs; several are joined with ``/``)."""
    from curriculum.reports.report import run_arm

    found: dict[str, list[str]] = {}
    for run in runs:
        names = found.setdefault(run_arm(run), [])
        if run.run_config.training.trainer not in names:
            names.append(run.run_config.training.trainer)
    return {arm: "/".join(names) for arm, names in found.items()}


def register(commands: argparse._SubParsersAction) -> None:
    train = add_command(
        commands, "train", _train,
        help="a curriculum run: warm start, then GRPO stages with the environment engineer in the loop",
        description=(
            "Run (or resume) a curriculum: generate the stage's instances from its config, train with TRL GRPO "
            "or rejection-sampling fine-tuning (training.trainer; reward = the plan judge), validate on held-out "
            "instances, write replays, summarise failures, let the engineer write the next stage's config; "
            "finally evaluate on a benchmark suite. --compare runs the comparison arms (default: one per engineer, "
            f"{', '.join(COMPARE_ENGINEERS)}, plus {', '.join(COMPARE_EXTRA_ARMS)}) with the same budget, for "
            "--seeds seeds. Example: mapf-lake train "
            "--preset small --compare --seeds 3 --arm rule=engineer.spec=rule --arm fixed=engineer.spec=fixed"
        ),
    )
    source = train.add_mutually_exclusive_group()
    source.add_argument("--preset", default="tiny", choices=list(PRESETS), metavar="PRESET",
                        help="; ".join(f"{name} ({PRESET_SUMMARIES[name]})" for name in PRESETS) + "; default tiny")
    source.add_argument("--config", help="run config YAML (start from --print-config)")
    source.add_argument("--resume", metavar="RUN", help="continue the run in this folder after a crash or kill; "
                        "with --set stages=N, give a run (a finished one too) more stages")
    train.add_argument("--compare", action="store_true", help="run the engineers' comparison set and print the table")
    train.add_argument("--seeds", type=int, default=1, help="with --compare: run every arm for N seeds (the run "
                       "seed, +1, ...; warm start shared per seed, a stage another arm already trained on the same "
                       "settings and stage configs copied) and print mean ± 95%% interval and paired "
                       "differences against fixed; rerun the same command to resume (default 1)")
    train.add_argument("--arm", action="append", metavar="NAME=KEY=VALUE[;KEY=VALUE]",
                       help="with --compare: a named arm of run-config overrides (repeat for more), e.g. "
                       "--arm fixed=engineer.spec=fixed --arm nofail=engineer.context=[behavior]; default: "
                       f"one arm per engineer ({', '.join(COMPARE_ENGINEERS)}) and {', '.join(COMPARE_EXTRA_ARMS)} "
                       "(the gap engineer with remedy drop, planning stage 1); a bare default arm's name picks it "
                       f"(--arm fixed --arm gap-band), as does an open-loop control's, run only when named "
                       f"({', '.join(CONTROL_ARMS)}: docs/results/controls/README.md) or a real model's "
                       f"({', '.join(MODEL_ARMS)})")
    train.add_argument("--primary", metavar="ARM", help="with --compare: the pre-declared comparison (this arm "
                       "against fixed): its p is not Holm-adjusted, and the run ends with a verdict line saying "
                       "plainly whether it beat fixed on the test set")
    train.add_argument("--name", help="run name (folder under output_dir)")
    train.add_argument("--output-dir", help="parent folder of runs (default runs)")
    train.add_argument("--set", nargs="*", action="extend", metavar="KEY=VALUE",
                       help="override fields, e.g. training.steps=10 stages=2 (repeated --set flags add up; "
                       "--settings lists every key)")
    train.add_argument("--print-config", action="store_true", help="print the run config as YAML and exit")
    train.add_argument("--settings", action="store_true", help="list every run config key --set takes, with its "
                       "default, the values it allows and what it does, and exit")
    train.add_argument("--rehearse", action="store_true",
                       help="rehearse the preset's exact path on a CPU in minutes: a miniature random Qwen3 on the "
                            "real tokenizer and chat template for hub models, 2 stages of 2 steps, 8 validation "
                            "instances, paper-quick evaluation; everything else as configured (run name + "
                            "'-rehearsal')")

    report = add_command(
        commands, "report", _report,
        help="per-stage metrics, config trajectory and PNG plots of a run",
        description=(
            "Prints per-stage metrics and the config trajectory; writes rates.png "
            "and mix.png into the run folder (or --plots DIR)."
        ),
    )
    report.add_argument("run", nargs="+", help="run folder(s); several: learning curves per arm over seeds too")
    report.add_argument("--plots", help="folder for the PNG plots (default: the (first) run folder)")

    compare = add_command(
        commands, "compare", _compare,
        help="paper-style table across runs (final evaluation)",
        description=(
            "Rows = runs, columns = map sizes (valid/optimal %), mean column; then "
            "the runs grouped by arm over seeds: mean ± 95% interval of the "
            "held-out validation rates, the lift over the warm start and the "
            "final suite, and paired differences against --reference with the "
            "p of a paired t test that each is 0, Holm-adjusted over the arms "
            "compared (the first metric's p is printed; --json has all). Each "
            "pair must come from one installation (the library versions in the "
            "runs' manifest.json)."
        ),
    )
    compare.add_argument("runs", nargs="+", help="run folders")
    compare.add_argument("--reference", default="fixed", help="arm the paired differences are taken against "
                         "(default fixed)")
    compare.add_argument("--primary", metavar="ARM", help="the arm whose comparison with --reference you declared "
                         "before looking at the runs: its p is reported unadjusted, as a single comparison, and the "
                         "Holm adjustment covers only the other arms (default: none; all arms are Holm-adjusted)")
    compare.add_argument("--allow-mixed", action="store_true", help="compare pairs of runs made on different "
                         "installations (library versions, e.g. torch) anyway, with a WARNING on each such arm: "
                         "its differences then mix library effects with the arm's (default: refuse)")
    compare.add_argument("--json", action="store_true", help="print the seed comparison as JSON (p, p_holm, "
                         "per-seed figures, primary, mixed installations)")
