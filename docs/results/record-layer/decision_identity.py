"""Every engineer's decision on recorded stages, captured so two versions of the code can be held to byte identity.

    PYTHONPATH=TREE python docs/results/record-layer/decision_identity.py OUT RUN [RUN ...]

For each stage folder of each run (``stage-NN`` holding ``validation.mlr`` and ``config.yaml``) and each engineer
that decides from a stage's evidence alone (every registered one but ``llm:``, ``lookahead``, which trains a trial
stage, ``replay-decisions``, which reads another run, and ``first-only``, which decides only inside a run), plus
``gap`` with ``band``'s options, this runs
``mapf-lake engineer --replays STAGE/validation.mlr --config STAGE/config.yaml --engineer E --seed 0 --show-context``
in this process (the tree on ``PYTHONPATH`` is the code measured) and writes what it printed, the next config and
the decision record under ``OUT/RUN/STAGE/E`` (the decision's own timing masked: ``"seconds"`` and ``in X s``). Run it with the code before a change and after, then ``diff -r`` the
two ``OUT`` folders: no difference means every engineer read the same evidence and decided the same. The run
folders are only read.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
from pathlib import Path

ENGINEERS = {
    "fixed": [], "random": [], "rule": [], "learnability": [], "bandit": [], "mutate": [], "progress": [], "gap": [],
    "window": [], "target": [], "replay": [], "failures": [],
    "gap-band": ["--engineer", "gap", "--option", "remedy=drop", "--option", "lengths=frontier"],
}


def main() -> int:
    from curriculum.cli import main as cli

    out, runs = Path(sys.argv[1]), [Path(arg) for arg in sys.argv[2:]]
    for run in runs:
        for stage in sorted(run.glob("stage-*")):
            if not (stage / "validation.mlr").is_file() or not (stage / "config.yaml").is_file():
                continue
            for name, extra in ENGINEERS.items():
                folder = out / run.name / stage.name / name
                folder.mkdir(parents=True, exist_ok=True)
                argv = ["engineer", "--replays", str(stage / "validation.mlr"), "--config", str(stage / "config.yaml"),
                        "--seed", "0", "--show-context", "--out", str(folder / "next.yaml"),
                        "--record", str(folder / "decision.json"), "--force"]
                argv += extra or ["--engineer", name]
                printed, errors = io.StringIO(), io.StringIO()
                with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(errors):
                    try:
                        status = cli(argv)
                    except SystemExit as stop:
                        status = stop.code
                text = printed.getvalue() + "\n--- stderr\n" + errors.getvalue() + f"\n--- status {status}\n"
                text = re.sub(r" in [0-9.]+ s\b", " in (time) s", text)
                (folder / "printed.txt").write_text(text.replace(str(run), "RUN").replace(str(folder), "OUT"))
                record = folder / "decision.json"
                if record.is_file():
                    record.write_text(re.sub(r'"seconds": [-+0-9.e]+', '"seconds": "(time)"', record.read_text()))
            print(f"{run.name}/{stage.name}: {len(ENGINEERS)} engineers", file=sys.stderr)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    sys.exit(main())
