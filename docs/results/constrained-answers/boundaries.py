"""SmolLM2's engineer answers on recorded boundaries: free text against answers held to the schema.

    python docs/results/constrained-answers/boundaries.py RUN [RUN ...] --model hf:@smollm2 --samples 3 \
        --json boundaries.json

For every decision a run folder recorded (``warm_start/decision.json``, the plan before stage 1, and
``stage-NN/decision.json``), the engineer's prompt is rebuilt from the record's own context text and the config it
edited, and the model answers it ``--samples`` times (seeds 0..) in each mode (``free``: prose and a YAML block,
repaired; ``constrained``: held to the answer schema). Per answer: whether a config document was read from it
(``parsed``), whether it needed no repair beyond reading it (``no_repair``), whether it changed anything
(``changed``; the table also counts answers whose only repair is the seed, which a constrained answer never writes),
whether the generator can fill the resulting config (``fillable``: the generator makes its instances,
at most 200), and the seconds. Prints the shares per mode and writes every answer. With ``--json``, the file is
rewritten after each answer and read back when the command is run again: answers already there are kept, not asked
again (a study killed half-way resumes; with every answer there, the model is not loaded and the table is printed
from the file). ``--model self`` answers each decision with the checkpoint that made it (the record's own engineer,
e.g. a ``smol-self`` run's ``stage-01/model``) and the run's own engineer options (``run.yaml``), as the self loop
asked it; any other ``--model`` answers every decision with that model and this script's options (rationale at most
300 characters, 400 new tokens). ``--seconds-left-out FILE``: a JSON list of ``{"run", "decision", "mode", "seed",
"why"}``, answers whose seconds are not a measure (the machine was paused or shared while they ran): they count in
every share, not in the seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

from simulator.atomic import atomic_write

READING_NOTES = ("took the config from the answer", "read the config from")  # how it was read, not a repair


def decision_files(run: Path) -> list[Path]:
    found = [path for path in (run / "warm_start" / "decision.json", run / "untrained" / "decision.json")
             if path.exists()]
    return found + sorted(run.glob("stage-*/decision.json"))


def fillable(config) -> bool:
    from simulator.errors import ConfigError
    from simulator.generator import generate

    try:
        generate(replace(config, samples=min(config.samples, 200)))
    except ConfigError:
        return False
    return True


def own_engineer(run: Path, record: dict, parser: argparse.ArgumentParser) -> tuple[str, dict]:
    """``--model self``: the model spec of the checkpoint that made ``record``'s decision and ``run``'s own
    engineer options; a record not made by an ``llm:hf:`` engineer, or a checkpoint that is gone, is refused."""
    from curriculum.config import load_run_config

    spec = str(record.get("engineer") or "")
    if not spec.startswith("llm:hf:"):
        parser.error(f"--model self: {run.name}'s decisions were not made by a checkpoint (engineer {spec!r})")
    if not Path(spec[len("llm:hf:"):]).is_dir():
        parser.error(f"--model self: {spec[len('llm:hf:'):]} (the checkpoint that made the decision) is gone")
    return spec[len("llm:"):], dict(load_run_config(run / "run.yaml").engineer.options)


def main(argv: list[str] | None = None) -> int:
    from engineer import make_engineer
    from simulator.config import StageConfig

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--model", default="hf:@smollm2", help="the answering model, or self: each decision's own "
                        "checkpoint with its run's engineer options")
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--modes", default="constrained,free")
    parser.add_argument("--decisions", default="", help="comma-separated decision folders to answer (e.g. "
                        "stage-01,stage-02: the boundaries after a stage); default: every recorded decision")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--seconds-left-out", type=Path, help="JSON list of answers (run, decision, mode, seed, "
                        "why) whose seconds are left out of the s/answer column")
    args = parser.parse_args(argv)
    left_out: set[tuple] = set()
    if args.seconds_left_out:
        try:
            listed = json.loads(args.seconds_left_out.read_text())
            left_out = {(row["run"], row["decision"], row["mode"], row["seed"]) for row in listed}
        except (OSError, ValueError, TypeError, KeyError) as exc:
            parser.error(f"--seconds-left-out {args.seconds_left_out}: not a JSON list of answers with run, decision, "
                         f"mode and seed ({exc})")

    from curriculum.reports.stats import mean_interval
    from policy.backends import make_backend

    backend, backend_model = None, None  # loaded for the first answer to ask
    options = {"show_schema": False, "sides": [3, 4, 5, 6], "rationale_chars": 300, "max_new_tokens": 400,
               "timeout_s": 900}
    rows = []
    if args.json and args.json.exists():
        try:
            rows = json.loads(args.json.read_text())
        except (OSError, ValueError) as exc:
            parser.error(f"--json {args.json} exists and is not this script's answers ({exc}); move it away")
        if not isinstance(rows, list) or not all(isinstance(row, dict) and {"run", "decision", "mode", "seed"} <= set(row)
                                                 for row in rows):
            parser.error(f"--json {args.json} exists and is not this script's answers; move it away")
    done = {(row["run"], row["decision"], row["mode"], row["seed"]) for row in rows}
    for run in args.runs:
        wanted = set(filter(None, args.decisions.split(",")))
        for path in decision_files(run):
            if wanted and path.parent.name not in wanted:
                continue
            record = json.loads(path.read_text())
            if not record.get("context_text"):
                continue
            context = SimpleNamespace(text=record["context_text"])
            config = StageConfig.from_dict(record["previous"])
            model, asked = args.model, options
            if args.model == "self":
                model, asked = own_engineer(run, record, parser)
            for mode in args.modes.split(","):
                for seed in range(args.samples):
                    if (run.name, path.parent.name, mode, seed) in done:
                        continue
                    if backend is None or backend_model != model:
                        backend, backend_model = None, model  # one model in memory at a time
                        backend = make_backend(model)
                    engineer = make_engineer(f"llm:{model}", backend=backend, **{**asked, "answer_mode": mode})
                    started = time.perf_counter()
                    decision = engineer.propose(context, config, seed=seed)
                    seconds = time.perf_counter() - started
                    repairs = [note for note in decision.repairs if not note.startswith(READING_NOTES)]
                    rows.append({"run": run.name, "decision": path.parent.name, "mode": mode, "seed": seed,
                                 "parsed": decision.proposal is not None, "accepted": decision.accepted,
                                 "no_repair": decision.proposal is not None and not repairs,
                                 "changed": bool(decision.diff),
                                 "fillable": decision.accepted and fillable(decision.config),
                                 "seconds": round(seconds, 1), "reason": decision.reason, "repairs": repairs,
                                 "diff": decision.diff, "completion_tokens": decision.details.get("completion_tokens")})
                    print(json.dumps(rows[-1])[:300], file=sys.stderr, flush=True)
                    if args.json:
                        atomic_write(args.json, json.dumps(rows, indent=1))
    print(f"{'mode':<12} {'answers':>7} {'parsed':>7} {'no repair':>9} {'but seed':>8} {'changed':>8} {'fillable':>8} "
          f"{'s/answer':>8}")
    for mode in args.modes.split(","):
        mine = [row for row in rows if row["mode"] == mode]
        if not mine:
            continue
        share = {key: sum(row[key] for row in mine) / len(mine) for key in ("parsed", "no_repair", "changed",
                                                                             "fillable")}
        # a constrained answer never writes the seed (the schema leaves it to the stage loop): repairs besides it
        share["but_seed"] = sum(row["parsed"] and not [note for note in row.get("repairs", [])
                                                       if not note.startswith("seed: missing")]
                                for row in mine) / len(mine)
        # seconds per answer: each prompt's mean over its samples, then the mean and 95% interval over prompts
        prompts: dict[tuple[str, str], list[float]] = {}
        timed = [row for row in mine if (row["run"], row["decision"], row["mode"], row["seed"]) not in left_out]
        for row in timed:
            prompts.setdefault((row["run"], row["decision"]), []).append(row["seconds"])
        seconds = mean_interval([sum(values) / len(values) for values in prompts.values()])
        gone = len(mine) - len(timed)
        skipped = f"; the seconds of {gone} answer{'s' * (gone != 1)} left out" if gone else ""
        print(f"{mode:<12} {len(mine):>7} {share['parsed']:>7.0%} {share['no_repair']:>9.0%} {share['but_seed']:>8.0%} "
              f"{share['changed']:>8.0%} "
              f"{share['fillable']:>8.0%} {seconds.format(scale=1.0, digits=1)} ({len(prompts)} prompts{skipped})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
