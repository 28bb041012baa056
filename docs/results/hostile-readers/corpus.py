"""Issue 47's measure: every command that reads a path, fed hostile files, run as a user runs it.

Builds a hostile corpus in a temporary folder and runs each case as a real ``mapf-lake`` subprocess
(``sys.executable -m curriculum.cli ...`` from the repository root, 10 s each, ``SDL_VIDEODRIVER=dummy``, stdin
empty). Each case records its command, exit status, seconds, whether stderr holds a ``Traceback``, stderr's line
count, whether it hung, and for output cases whether the target changed (bytes before and after) or a fresh output
was left behind.

Classes:
    ok          hostile input refused with exit status 2 and exactly one stderr line; or a valid input (a BOM, CRLF
                line ends, ``--force``) accepted with exit status 0 (``play``: its app started, see below)
    traceback   stderr holds a Python traceback
    hang        still running after 10 s (killed)
    multi-line  refused with exit status 2 but more (or fewer) than one stderr line
    exit-N      refused with another non-zero exit status (and no traceback)
    silent      exit status 0 on hostile input (a misread)
    refused-valid  a valid input refused
    damaged     an existing output target changed, or a fresh output left behind by a refused command

``play`` is interactive (Textual); it has no non-interactive path, but it reads and certifies its file before the
app starts. So a ``play`` case runs with the app's terminal output captured: a refusal exits 2 before the app
starts; a file that was accepted starts the app, which draws its first screen (the alternate-screen escape
``ESC[?1049h`` on stdout). The case is then stopped and counted as accepted (exit 0 for the classes). No ``play``
case needs a real TTY.

Run from the repository root: ``.venv/bin/python docs/results/hostile-readers/corpus.py`` (``--jobs N`` cases at
once, default 2; ``--only TEXT`` keeps the cases whose command holds TEXT; ``--no-write`` prints only).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from plugin_cases import SCRIPT, build_outputs, build_plugins, make_plugin_fixtures
from plugin_cases import json_with

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
TIMEOUT = 10.0
SCRIPT_TIMEOUT = 60.0  # a user script loads torch, transformers and a model before its case
SECRET = "sk-hostile-0123456789abcdef"  # user_script.py's API key, which its endpoint quotes back
ALT_SCREEN = b"\x1b[?1049h"  # Textual's first write: the app started, so play's reader accepted the file

# The documented limits (simulator/files.py), bytes.
MIB = 1 << 20
MAX_CONFIG = 4 * MIB
MAX_INSTANCE = 16 * MIB
MAX_INSTANCES = 1 << 30
MAX_MAP = 1 * MIB
MAX_SCEN = 16 * MIB
MAX_RECORD = 64 * MIB  # run-folder records (curriculum/loop/records.py)
BIG = "9" * 5000  # an integer of 5,000 digits
DEEP = 10_000


@dataclass
class Case:
    command: str  # the reader, e.g. "gen --config"
    kind: str  # the hostile kind, e.g. "fifo"
    argv: list[str]
    expect: str = "refuse"  # "refuse" (hostile), "accept" (valid) or "no-leak" (either, the key never written)
    unchanged: str | list[str] | None = None  # existing outputs that must keep their bytes
    absent: list[str] = field(default_factory=list)  # fresh outputs that must not exist after a refusal
    tty: bool = False  # play: the app starting means the file was accepted
    script: bool = False  # argv runs user_script.py (a user's training script), not mapf-lake


@dataclass
class Result:
    command: str
    kind: str
    argv: str
    expect: str
    status: int | None
    seconds: float
    traceback: bool
    stderr_lines: int
    hung: bool
    app_started: bool
    target_changed: bool | None
    left_behind: list[str]
    names_file: bool
    stderr: str
    leaked: list[str] = field(default_factory=list)  # where the API key of the endpoint cases was found
    cls: str = ""


# --------------------------------------------------------------------------------------------- the corpus
class Corpus:
    """Writes the files into ``root`` and collects the cases."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cases: list[Case] = []
        self.counter = 0

    def path(self, name: str) -> Path:
        self.counter += 1
        folder = self.root / f"c{self.counter:04d}"
        folder.mkdir()
        return folder / name

    def out(self, name: str) -> str:
        """A fresh output path (not created)."""
        self.counter += 1
        folder = self.root / f"o{self.counter:04d}"
        folder.mkdir()
        return str(folder / name)

    def add(self, command: str, kind: str, argv: list[str], **extra) -> None:
        self.cases.append(Case(command, kind, [str(a) for a in argv], **extra))

    # --- hostile files --------------------------------------------------------------------------------------
    def make(self, name: str, kind: str, valid: bytes | None = None, limit: int | None = None,
             content: bytes | None = None) -> Path:
        """A file named ``name`` of the given hostile ``kind``."""
        target = self.path(name)
        if kind == "missing":
            return target
        if kind == "fifo":
            os.mkfifo(target)
        elif kind == "dev-zero":
            target.symlink_to("/dev/zero")
        elif kind == "dev-null":
            target.symlink_to("/dev/null")
        elif kind == "directory":
            target.mkdir()
        elif kind == "dangling-link":
            target.symlink_to(target.parent / "nowhere")
        elif kind == "link-loop":
            target.symlink_to(target)
        elif kind == "unreadable":
            target.write_bytes(valid or b"x")
            target.chmod(0)
        elif kind == "empty":
            target.write_bytes(b"")
        elif kind == "over-limit":  # sparse: costs no disk
            with open(target, "wb") as handle:
                handle.truncate(limit + 1)
        elif kind == "nul-at-limit":
            with open(target, "wb") as handle:
                handle.truncate(limit)
        elif kind == "bom":
            target.write_bytes(b"\xef\xbb\xbf" + valid)
        elif kind == "crlf":
            target.write_bytes(valid.replace(b"\n", b"\r\n"))
        elif kind == "not-utf8":
            target.write_bytes(b"\xff\xfe\xc3\x28" + valid)
        elif kind == "utf16":
            target.write_bytes(valid.decode().encode("utf-16"))
        elif kind == "binary":
            target.write_bytes(hashlib.sha512(b"hostile").digest() * 64)
        elif kind == "nul-byte":
            target.write_bytes(valid[:10] + b"\x00" + valid[10:])  # in the first line: play --load reads that one
        elif kind == "truncated":
            target.write_bytes(valid[: len(valid) // 2])
        else:
            target.write_bytes(content)
        return target


GENERIC = ["missing", "fifo", "dev-zero", "dev-null", "directory", "dangling-link", "link-loop", "empty",
           "over-limit", "not-utf8", "binary", "nul-byte", "bom"]
GENERIC_BINARY = ["missing", "fifo", "dev-zero", "dev-null", "directory", "link-loop", "empty", "over-limit",
                  "binary", "truncated"]


# --- valid documents --------------------------------------------------------------------------------------------
STAGE_YAML = """agents: 2
samples: 4
seed: 1
sizes:
  '4':
    data_ratio: 1.0
    hole_ratio: 0.2
    wait_ratio: 0.3
"""
STAGE = {"agents": 2, "samples": 4, "seed": 1, "sizes": {"4": {"data_ratio": 1.0, "hole_ratio": 0.2,
                                                               "wait_ratio": 0.3}}}
MAP = """type octile
height 4
width 6
map
..@.@.
.T...T
..S...
OW..G.
"""
SCEN = """version 1
0\tlake-6x4.map\t6\t4\t0\t0\t5\t3\t8
0\tlake-6x4.map\t6\t4\t5\t2\t0\t0\t7
1\tlake-6x4.map\t6\t4\t0\t1\t3\t2\t4
1\tlake-6x4.map\t6\t4\t2\t1\t3\t2\t2
"""
SOLVE_TEXT = "A0 .  G1\nH  .  .\nA1 .  G0\n"


def yaml_with(**changes) -> str:
    """The stage config with top-level keys (or ``size__key`` for sizes.4.key) replaced by raw YAML text."""
    top = {"agents": "2", "samples": "4", "seed": "1"}
    size = {"data_ratio": "1.0", "hole_ratio": "0.2", "wait_ratio": "0.3"}
    for key, value in changes.items():
        if key.startswith("size__"):
            size[key[6:]] = value
        else:
            top[key] = value
    lines = [f"{k}: {v}" for k, v in top.items()] + ["sizes:", "  '4':"] + [f"    {k}: {v}" for k, v in size.items()]
    return "\n".join(lines) + "\n"


def build(corpus: Corpus, fixtures: dict) -> None:  # one long table of cases
    add, make, out = corpus.add, corpus.make, corpus.out
    good_map, good_scen, good_jsonl = fixtures["map"], fixtures["scen"], fixtures["jsonl"]
    good_mlr, good_run = fixtures["mlr"], fixtures["run"]
    record = fixtures["record"]  # one valid instance record (a dict)

    # --- 1. every path-taking reader against the generic hostile files ---------------------------------------
    slots = [  # (command, file name, valid bytes, limit, argv with {F})
        ("gen --config", "f.yaml", STAGE_YAML.encode(), MAX_CONFIG, ["gen", "--config", "{F}", "--quiet"]),
        ("gen --config", "f.json", json.dumps(STAGE).encode(), MAX_CONFIG, ["gen", "--config", "{F}", "--quiet"]),
        ("gen --map", "f.map", MAP.encode(), MAX_MAP, ["gen", "--map", "{F}", "--scen", good_scen, "--quiet"]),
        ("gen --scen", "f.scen", SCEN.encode(), MAX_SCEN, ["gen", "--map", good_map, "--scen", "{F}", "--quiet"]),
        ("eval --instances", "f.jsonl", good_jsonl.read_bytes(), MAX_INSTANCES,
         ["eval", "--policy", "oracle", "--instances", "{F}", "--out", "{OUT}"]),
        ("eval --config", "f.yaml", STAGE_YAML.encode(), MAX_CONFIG,
         ["eval", "--policy", "oracle", "--config", "{F}", "--out", "{OUT}"]),
        ("play --load", "f.jsonl", good_jsonl.read_bytes(), MAX_INSTANCES, ["play", "--load", "{F}"]),
        ("play --load", "f.json", json.dumps(record).encode(), MAX_INSTANCES, ["play", "--load", "{F}"]),
        ("play --load", "f.txt", SOLVE_TEXT.encode(), MAX_INSTANCES, ["play", "--load", "{F}"]),
        ("play --map", "f.map", MAP.encode(), MAX_MAP, ["play", "--map", "{F}", "--scen", good_scen]),
        ("play --scen", "f.scen", SCEN.encode(), MAX_SCEN, ["play", "--map", good_map, "--scen", "{F}"]),
        ("solve", "f.txt", SOLVE_TEXT.encode(), MAX_INSTANCE, ["solve", "{F}"]),
        ("solve", "f.json", json.dumps({k: record[k] for k in ("grid", "starts", "goals")}).encode(), MAX_INSTANCE,
         ["solve", "{F}"]),
        ("export --config", "f.yaml", STAGE_YAML.encode(), MAX_CONFIG, ["export", "--config", "{F}", "--out", "{OUT}"]),
        ("rollout --config", "f.yaml", STAGE_YAML.encode(), MAX_CONFIG,
         ["rollout", "--policy", "oracle", "--config", "{F}", "--out", "{OUT}"]),
        ("train --config", "f.yaml", fixtures["run_yaml"], MAX_CONFIG, ["train", "--config", "{F}", "--print-config"]),
        ("engineer --history", "f.json", b'[]', MAX_CONFIG,
         ["engineer", "--replays", good_mlr, "--history", "{F}", "--out", "{OUT}"]),
        ("engineer --config", "f.yaml", STAGE_YAML.encode(), MAX_CONFIG,
         ["engineer", "--replays", good_mlr, "--config", "{F}", "--out", "{OUT}"]),
    ]
    text_kinds = GENERIC + ["crlf"]
    for command, name, valid, limit, argv in slots:
        for kind in text_kinds:
            if kind == "crlf" and name.endswith((".json", ".jsonl")) and "history" not in command:
                continue
            f = make(name, kind, valid=valid, limit=limit)
            fresh = out("out.yaml" if command.startswith("engineer") else
                        "out.jsonl" if command.startswith("export") else "out")
            expect = "accept" if kind in ("bom", "crlf") else "refuse"
            absent = [] if expect == "accept" or "{OUT}" not in argv else [fresh]
            add(command, kind, [str(a).replace("{F}", str(f)).replace("{OUT}", fresh) for a in argv], expect=expect,
                absent=absent, tty=command.startswith("play"))
    # an instances file exactly at the limit: 1 GiB of NUL bytes (sparse), for the readers that take 1 GiB
    for command, argv in (("eval --instances", ["eval", "--policy", "oracle", "--instances", "{F}", "--out", "{OUT}"]),
                          ("play --load", ["play", "--load", "{F}"])):
        f = make("f.jsonl", "nul-at-limit", limit=MAX_INSTANCES)
        fresh = out("out")
        add(command, "nul-at-limit", [str(a).replace("{F}", str(f)).replace("{OUT}", fresh) for a in argv],
            absent=[fresh] if "eval" in command else [], tty="play" in command)

    # replay files: summarize, watch, engineer --replays, play --load .mlr
    mlr_bytes = good_mlr.read_bytes()
    mlr_slots = [
        ("summarize", ["summarize", "{F}"]),
        ("watch --png", ["watch", "{F}", "--png", "{OUT}"]),
        ("engineer --replays", ["engineer", "--replays", "{F}", "--out", "{OUT}"]),
        ("play --load", ["play", "--load", "{F}"]),
    ]
    for command, argv in mlr_slots:
        for kind in GENERIC_BINARY + ["magic-only", "bad-version", "flipped"]:
            if kind == "magic-only":
                f = make("f.mlr", "raw", content=b"MLREPLAY")
            elif kind == "bad-version":
                f = make("f.mlr", "raw", content=b"MLREPLAY" + (99).to_bytes(4, "little") + mlr_bytes[12:])
            elif kind == "flipped":  # a byte of the header's msgpack flipped
                data = bytearray(mlr_bytes)
                data[20] ^= 0xFF
                f = make("f.mlr", "raw", content=bytes(data))
            else:
                f = make("f.mlr", kind, valid=mlr_bytes, limit=1 << 32)
            fresh = out("out.png" if "watch" in command else "out.yaml")
            add(command, kind, [str(a).replace("{F}", str(f)).replace("{OUT}", fresh) for a in argv],
                absent=[] if command in ("summarize", "play --load") else [fresh], tty=command.startswith("play"))
        # a folder of replays holding a FIFO among them (the folder reader)
        if command != "play --load":
            folder = corpus.path("replays")
            folder.mkdir()
            shutil.copy(good_mlr, folder / "a.mlr")
            os.mkfifo(folder / "b.mlr")
            fresh = out("out.png" if "watch" in command else "out.yaml")
            add(command, "folder-with-fifo", [str(a).replace("{F}", str(folder)).replace("{OUT}", fresh) for a in argv],
                absent=[fresh] if command != "summarize" else [])

    # --- 2. numbers, nesting and types in the documents -------------------------------------------------------
    # instance records: eval --instances (every case) and play --load (every case)
    def rec(**changes):
        doc = dict(record)
        doc.update(changes)
        return doc

    def raw_record(key, raw):
        return json_with(record, (key,), raw)

    plan = record["plan"]
    hole = next((r, c) for r, row in enumerate(record["grid"]) for c, v in enumerate(row) if v == 1)
    records = {
        "int5000 optimal_makespan": raw_record("optimal_makespan", BIG),
        "int5000 size": raw_record("size", BIG),
        "int5000 seed": raw_record("seed", BIG),
        "int5000 index": raw_record("index", BIG),
        "int5000 grid cell": json_with(record, ("grid", 0), "[" + ",".join([BIG] * len(record["grid"][0])) + "]"),
        "int5000 start": json_with(record, ("starts", 0), f"[{BIG}, 0]"),
        "int5000 plan move": json_with(record, ("plan", 0), f"[{BIG}]"),
        "int41 optimal_makespan": raw_record("optimal_makespan", "1" * 41),
        "1e309 optimal_makespan": raw_record("optimal_makespan", "1e309"),
        "1e309 sum_of_distances": raw_record("sum_of_distances", "1e309"),
        "NaN optimal_makespan": raw_record("optimal_makespan", "NaN"),
        "Infinity optimal_sum_of_costs": raw_record("optimal_sum_of_costs", "Infinity"),
        "-Infinity size": raw_record("size", "-Infinity"),
        "NaN in grid": json_with(record, ("grid", 0, 0), "NaN"),
        "deep list 10000": "[" * DEEP + "]" * DEEP,
        "deep object 10000": '{"a":' * DEEP + "0" + "}" * DEEP,
        "deep in field": raw_record("plan", "[" * DEEP + "]" * DEEP),
        "line is a list": json.dumps([record]),
        "line is a string": json.dumps("grid"),
        "line is null": "null",
        "line is a number": "4",
        "needs_wait 'false'": json.dumps(rec(needs_wait="false")),
        "needs_wait 0": json.dumps(rec(needs_wait=0)),
        "needs_wait null": json.dumps(rec(needs_wait=None)),
        "size 4.7": json.dumps(rec(size=4.7)),
        "size '4'": json.dumps(rec(size="4")),
        "size true": json.dumps(rec(size=True)),
        "size 4.0": json.dumps(rec(size=4.0)),
        "size wrong (5)": json.dumps(rec(size=5)),
        "optimal_makespan 3.0": json.dumps(rec(optimal_makespan=float(record["optimal_makespan"]))),
        "optimal_makespan true": json.dumps(rec(optimal_makespan=True)),
        "relabel optimal_makespan +1": json.dumps(rec(optimal_makespan=record["optimal_makespan"] + 1)),
        "relabel optimal_makespan -1": json.dumps(rec(optimal_makespan=record["optimal_makespan"] - 1)),
        "relabel optimal_sum_of_costs +1": json.dumps(rec(optimal_sum_of_costs=record["optimal_sum_of_costs"] + 1)),
        "relabel sum_of_distances +1": json.dumps(rec(sum_of_distances=record["sum_of_distances"] + 1)),
        "relabel needs_wait flipped": json.dumps(rec(needs_wait=not record["needs_wait"])),
        "invalid plan (all up)": json.dumps(rec(plan=[[1] * len(p) for p in plan])),
        "plan waits first (makespan + 1)": json.dumps(rec(plan=[[0] + p for p in plan])),
        "plan move code 9": json.dumps(rec(plan=[[9] + p[1:] for p in plan])),
        "plan empty": json.dumps(rec(plan=[])),
        "plan of one agent": json.dumps(rec(plan=plan[:1])),
        "grid ragged": json.dumps(rec(grid=[row[:-1] if i == 0 else row for i, row in enumerate(record["grid"])])),
        "grid cell 2": json.dumps(rec(grid=[[2] + row[1:] if i == 0 else row for i, row in enumerate(record["grid"])])),
        "grid empty": json.dumps(rec(grid=[])),
        "start out of bounds": json.dumps(rec(starts=[[99, 0]] + record["starts"][1:])),
        "start negative": json.dumps(rec(starts=[[-1, 0]] + record["starts"][1:])),
        "start on a hole": json.dumps(rec(starts=[list(hole)] + record["starts"][1:])),
        "two agents one start": json.dumps(rec(starts=[record["starts"][0]] * 2)),
        "goals count mismatch": json.dumps(rec(goals=record["goals"][:1])),
        "start true": json_with(record, ("starts", 0, 0), "true"),
        "start 1.0": json_with(record, ("starts", 0, 0), f"{record['starts'][0][0]}.0"),
        "grid cell false": json_with(record, ("grid", 0, 0), "false"),
        "grid cell 0.0": json_with(record, ("grid", 0, 0), "0.0"),
        "plan move true": json_with(record, ("plan", 0, 0), "true"),
        "missing key plan": json.dumps({k: v for k, v in record.items() if k != "plan"}),
        "duplicate key": json.dumps(record)[:-1] + ', "size": 5}',
        "trailing garbage": json.dumps(record) + " x",
        "two objects on a line": json.dumps(record) + json.dumps(record),
        "blank lines only": "\n\n",
    }
    big_board = fixtures.get("big_record")
    if big_board:
        records["256x256 64 agents, wrong label"] = json.dumps(big_board)
    for kind, line in records.items():
        content = (line + "\n" + json.dumps(record) + "\n").encode()
        if kind == "blank lines only":
            content = b"\n\n\n"
        f = make("f.jsonl", "raw", content=content)
        fresh = out("out")
        add("eval --instances", kind, ["eval", "--policy", "oracle", "--instances", f, "--out", fresh],
            absent=[fresh])
        add("play --load", kind, ["play", "--load", f], tty=True)
    # the bad line second: named by its line number
    f = make("f.jsonl", "raw", content=(json.dumps(record) + "\n" + records["relabel optimal_makespan +1"]
                                        + "\n").encode())
    fresh = out("out")
    add("eval --instances", "relabel on line 2", ["eval", "--policy", "oracle", "--instances", f, "--out", fresh],
        absent=[fresh])
    add("play --load", "relabel on line 2 (--episode 1)", ["play", "--load", f, "--episode", "1"], tty=True)
    add("play --load", "--episode past the end", ["play", "--load", good_jsonl, "--episode", "99"], tty=True)
    add("play --load", f"--episode {BIG[:50]}", ["play", "--load", good_jsonl, "--episode", BIG[:50]], tty=True)
    # valid: extra keys (every field of a record is required, so none can be misspelt and missed), a trailing wait
    # (the same makespan), a 10x10 board with 5 agents, and the file gen wrote
    valid_records = {"an extra key": json.dumps(rec(extra=1)),
                     "an extra key with a lone surrogate": json.dumps(record)[:-1] + ', "\\ud800": 1}',
                     "plan with a trailing wait": json.dumps(rec(plan=[p + [0] for p in plan]))}
    for kind, line in valid_records.items():
        f = make("f.jsonl", "raw", content=(line + "\n").encode())
        add("eval --instances", f"valid: {kind}", ["eval", "--policy", "oracle", "--instances", f, "--out",
                                                   out("out")], expect="accept")
        add("play --load", f"valid: {kind}", ["play", "--load", f], expect="accept", tty=True)
    add("eval --instances", "valid gen --out file", ["eval", "--policy", "oracle", "--instances", good_jsonl, "--out",
                                                    out("out")], expect="accept")
    add("eval --instances", "valid 10x10 5 agents", ["eval", "--policy", "oracle", "--instances",
                                                     fixtures["jsonl10"], "--out", out("out")], expect="accept")
    add("play --load", "valid gen --out file", ["play", "--load", good_jsonl], expect="accept", tty=True)

    # instance JSON for solve and play --load (.json): a subset of the record cases
    instance = {k: record[k] for k in ("grid", "starts", "goals")}
    solve_json = {
        "int5000 grid cell": json_with(instance, ("grid", 0, 0), BIG),
        "int5000 start": json_with(instance, ("starts", 0), f"[{BIG}, 0]"),
        "1e309 start": json_with(instance, ("starts", 0, 0), "1e309"),
        "NaN goal": json_with(instance, ("goals", 0, 0), "NaN"),
        "Infinity grid": json_with(instance, ("grid", 0, 0), "Infinity"),
        "deep list 10000": "[" * DEEP + "]" * DEEP,
        "deep object 10000": '{"a":' * DEEP + "0" + "}" * DEEP,
        "a list": json.dumps([instance]),
        "start 1.5": json_with(instance, ("starts", 0, 0), "1.5"),
        "start '1'": json_with(instance, ("starts", 0, 0), '"1"'),
        "start true": json_with(instance, ("starts", 0, 0), "true"),
        "start 1.0": json_with(instance, ("starts", 0, 0), f"{instance['starts'][0][0]}.0"),
        "grid cell false": json_with(instance, ("grid", 0, 0), "false"),
        "grid ragged": json.dumps({**instance, "grid": [instance["grid"][0][:-1]] + instance["grid"][1:]}),
        "start out of bounds": json.dumps({**instance, "starts": [[99, 0]] + instance["starts"][1:]}),
        "missing goals": json.dumps({k: v for k, v in instance.items() if k != "goals"}),
        "300x300 grid, 0 agents": json.dumps({"grid": [[0] * 300] * 300, "starts": [], "goals": []}),
    }
    for kind, text in solve_json.items():
        f = make("f.json", "raw", content=text.encode())
        add("solve", kind, ["solve", f])
        if kind in ("int5000 grid cell", "1e309 start", "NaN goal", "deep list 10000", "a list", "start 1.5",
                    "grid ragged", "start out of bounds"):
            add("play --load", f"instance JSON: {kind}", ["play", "--load", f], tty=True)
    solve_text = {
        "agent index 5000 digits": f"A{BIG} .  G{BIG}\n.  .  .\n",
        "agent index 41 digits": f"A{'1' * 41} .  G{'1' * 41}\n",
        "agent line 5000 digits": f"A0 .  G0\nagent 0: start ({BIG},0) -> goal (0,2)\n",
        "agent line fullwidth digit": "A0 .  G0\nagent \uff10: start (0,0) -> goal (0,2)\n",
        "fullwidth agent digit": "A\uff10 .  G\uff10\n",
        "underscore index": "A1_0 .  G1_0\n",
        "unknown token": "A0 X  G0\n",
        "ragged rows": "A0 .  G0\n.  .\n",
        "300x300 text board": "\n".join(" ".join(["."] * 300) for _ in range(300)) + "\n",
    }
    f = make("f.txt", "raw", content=b"A0 .  .\n")
    add("solve", "valid: an agent without a G starts on its goal", ["solve", f], expect="accept")
    for kind, text in solve_text.items():
        f = make("f.txt", "raw", content=text.encode())
        add("solve", kind, ["solve", f])
        if kind in ("agent index 5000 digits", "fullwidth agent digit", "ragged rows"):
            add("play --load", f"map text: {kind}", ["play", "--load", f], tty=True)

    # MovingAI map headers and bodies: gen --map and play --map
    map_rows = MAP.split("map\n", 1)[1]
    maps = {
        "height 5000 digits": f"type octile\nheight {BIG}\nwidth 6\nmap\n{map_rows}",
        "width 5000 digits": f"type octile\nheight 4\nwidth {BIG}\nmap\n{map_rows}",
        "height 41 digits": f"type octile\nheight {'1' * 41}\nwidth 6\nmap\n{map_rows}",
        "height 0": f"type octile\nheight 0\nwidth 6\nmap\n{map_rows}",
        "height -4": f"type octile\nheight -4\nwidth 6\nmap\n{map_rows}",
        "height 4.0": f"type octile\nheight 4.0\nwidth 6\nmap\n{map_rows}",
        "height 1e309": f"type octile\nheight 1e309\nwidth 6\nmap\n{map_rows}",
        "height NaN": f"type octile\nheight NaN\nwidth 6\nmap\n{map_rows}",
        "height fullwidth digits": f"type octile\nheight \uff14\nwidth 6\nmap\n{map_rows}",
        "height 1_0": f"type octile\nheight 1_0\nwidth 6\nmap\n{map_rows}",
        "height 100000000": f"type octile\nheight 100000000\nwidth 100000000\nmap\n{map_rows}",
        "width 7 for rows of 6": f"type octile\nheight 4\nwidth 7\nmap\n{map_rows}",
        "fewer rows than height": f"type octile\nheight 9\nwidth 6\nmap\n{map_rows}",
        "more rows than height": f"type octile\nheight 2\nwidth 6\nmap\n{map_rows}",
        "unknown tile": f"type octile\nheight 4\nwidth 6\nmap\n{map_rows.replace('T', 'X', 1)}",
        "tab in a row": f"type octile\nheight 4\nwidth 6\nmap\n{map_rows.replace('.', chr(9), 1)}",
        "no 'map' line": f"type octile\nheight 4\nwidth 6\n{map_rows}",
        "no type line": f"height 4\nwidth 6\nmap\n{map_rows}",
        "type grid": f"type grid\nheight 4\nwidth 6\nmap\n{map_rows}",
        "height twice": f"type octile\nheight 4\nheight 4\nwidth 6\nmap\n{map_rows}",
        "1x5000 row": f"type octile\nheight 1\nwidth 5000\nmap\n{'.' * 5000}\n",
    }
    for kind, text in maps.items():
        f = make("f.map", "raw", content=text.encode())
        fresh = out("out.jsonl")
        add("gen --map", kind, ["gen", "--map", f, "--scen", good_scen, "--out", fresh], absent=[fresh])
        add("play --map", kind, ["play", "--map", f, "--scen", good_scen], tty=True)
    scen_line = "0\tlake-6x4.map\t6\t4\t{sx}\t{sy}\t{gx}\t{gy}\t{opt}"
    base = dict(sx="0", sy="0", gx="5", gy="3", opt="8")
    second = "0\tlake-6x4.map\t6\t4\t5\t2\t0\t0\t7"

    def scen(first=None, **changes):
        line = first if first is not None else scen_line.format(**{**base, **changes})
        return f"version 1\n{line}\n{second}\n"

    scens = {
        "start_x 5000 digits": scen(sx=BIG),
        "start_y 5000 digits": scen(sy=BIG),
        "goal_x 41 digits": scen(gx="1" * 41),
        "width column 5000 digits": scen(f"0\tlake-6x4.map\t{BIG}\t4\t0\t0\t5\t3\t8"),
        "bucket 5000 digits": scen(f"{BIG}\tlake-6x4.map\t6\t4\t0\t0\t5\t3\t8"),
        "optimal_length 5000 digits": scen(opt=BIG),
        "optimal_length 1e309": scen(opt="1e309"),
        "optimal_length NaN": scen(opt="NaN"),
        "optimal_length inf": scen(opt="inf"),
        "optimal_length -1": scen(opt="-1"),
        "start_x -1": scen(sx="-1"),
        "start_x 4.5": scen(sx="4.5"),
        "start_x 1e3": scen(sx="1e3"),
        "start_x 0x1": scen(sx="0x1"),
        "start_x fullwidth digit": scen(sx="\uff11"),
        "start_x 1_0": scen(sx="1_0"),
        "start_x out of the map": scen(sx="60"),
        "8 fields": scen("0\tlake-6x4.map\t6\t4\t0\t0\t5\t3"),
        "10 fields": scen("0\tlake-6x4.map\t6\t4\t0\t0\t5\t3\t8\t1"),
        "version 5000 digits": f"version {BIG}\n" + scen().split("\n", 1)[1],
        "version 2": "version 2\n" + scen().split("\n", 1)[1],
        "no version line": scen().split("\n", 1)[1],
        "version only": "version 1\n",
        "width column disagrees with map": scen("0\tlake-6x4.map\t9\t4\t0\t0\t5\t3\t8"),
        "every start on a hole": "version 1\n" + "\n".join(
            f"0\tlake-6x4.map\t6\t4\t{x}\t0\t{gx}\t3\t8" for x, gx in ((2, 0), (4, 1))) + "\n",
        "one agent's line only": f"version 1\n{scen_line.format(**base)}\n",
    }
    for kind, text in scens.items():
        f = make("f.scen", "raw", content=text.encode())
        fresh = out("out.jsonl")
        add("gen --scen", kind, ["gen", "--map", good_map, "--scen", f, "--out", fresh], absent=[fresh])
        add("play --scen", kind, ["play", "--map", good_map, "--scen", f], tty=True)
    # flags that come with --map
    add("gen --map", f"--agents {BIG[:60]}", ["gen", "--map", good_map, "--scen", good_scen, "--agents", BIG[:60]])
    add("gen --map", "--agents 0", ["gen", "--map", good_map, "--scen", good_scen, "--agents", "0"])
    add("gen --map", "--n with --map", ["gen", "--map", good_map, "--scen", good_scen, "--n", "3"])
    add("play --map", "--episode 99", ["play", "--map", good_map, "--scen", good_scen, "--episode", "99"], tty=True)
    add("play --map", "--episode -1", ["play", "--map", good_map, "--scen", good_scen, "--episode", "-1"], tty=True)
    add("play --map", "--size with --map", ["play", "--map", good_map, "--scen", good_scen, "--size", "5"], tty=True)

    # stage configs: YAML for gen/eval/export/rollout/engineer --config; JSON for gen --config
    stage_yaml = {
        "samples 5000 digits": yaml_with(samples=BIG),
        "seed 5000 digits": yaml_with(seed=BIG),
        "agents 5000 digits": yaml_with(agents=BIG),
        "seed 41 digits": yaml_with(seed="1" * 41),
        "hole_ratio 5000 digits": yaml_with(size__hole_ratio=BIG),
        "hole_ratio 1e309": yaml_with(size__hole_ratio="1e309"),
        "hole_ratio .nan": yaml_with(size__hole_ratio=".nan"),
        "wait_ratio .inf": yaml_with(size__wait_ratio=".inf"),
        "data_ratio -.inf": yaml_with(size__data_ratio="-.inf"),
        "deep flow list 10000": yaml_with(samples="[" * DEEP + "]" * DEEP),
        "deep block mapping 200": "agents: 2\nsamples: 4\nsizes:\n" + "".join(
            "  " * (i + 1) + f"k{i}:\n" for i in range(200)) + "  " * 201 + "x: 1\n",
        "alias bomb": "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                      "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
                      "e: [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n" + STAGE_YAML,
        "python tag": "agents: !!python/object/apply:os.system ['true']\nsamples: 4\nsizes: {'4': "
                      "{data_ratio: 1.0, hole_ratio: 0.2, wait_ratio: 0.3}}\n",
        "a list": "- agents: 2\n",
        "a string": "hello\n",
        "duplicate key": STAGE_YAML + "samples: 5\n",
        "unknown key": STAGE_YAML + "colour: blue\n",
        "agents '2'": yaml_with(agents="'2'"),
        "agents 2.5": yaml_with(agents="2.5"),
        "agents true": yaml_with(agents="true"),
        "samples 4.7": yaml_with(samples="4.7"),
        "samples '4'": yaml_with(samples="'4'"),
        "samples 4.0": yaml_with(samples="4.0"),
        "seed -1": yaml_with(seed="-1"),
        "hole_ratio '0.2'": yaml_with(size__hole_ratio="'0.2'"),
        "hole_ratio 5": yaml_with(size__hole_ratio="5"),
        "wait_ratio true": yaml_with(size__wait_ratio="true"),
        "size key 4.5": yaml_with().replace("'4'", "'4.5'"),
        "size key 5000 digits": yaml_with().replace("'4'", f"'{BIG}'"),
        "size key ４ (fullwidth)": yaml_with().replace("'4'", "'\uff14'"),
        "no room: side 3, 16 agents": yaml_with(agents="16").replace("'4'", "'3'"),
        "impossible band: side 32, 16 agents, max_makespan 1": yaml_with(agents="16", size__max_makespan="1")
        .replace("'4'", "'32'"),
        "impossible band: min above max": yaml_with(size__min_makespan="9", size__max_makespan="3"),
        "impossible floor: side 32, 16 agents, min_makespan 200": yaml_with(agents="16", size__min_makespan="200")
        .replace("'4'", "'32'"),
        "max_makespan 5000 digits": yaml_with(size__max_makespan=BIG),
        "syntax error": STAGE_YAML + "sizes: [\n",
        "tab indentation": STAGE_YAML.replace("    ", "\t"),
    }
    # YAML 1.1 spells integers these ways too: 0x10 is 16 and 1_000 is 1000 (accepted, as the YAML reader reads them)
    for kind, text in (("samples 0x10 (YAML 1.1: 16)", yaml_with(samples="0x10")),
                       ("samples 1_000 (YAML 1.1: 1000)", yaml_with(samples="1_000"))):
        f = make("f.yaml", "raw", content=text.encode())
        add("gen --config", kind, ["gen", "--config", f, "--quiet", "--out", out("out.jsonl")], expect="accept")
    config_readers = [
        ("gen --config", lambda f, o: ["gen", "--config", f, "--quiet", "--out", o], "out.jsonl"),
        ("eval --config", lambda f, o: ["eval", "--policy", "oracle", "--config", f, "--out", o], "out"),
        ("export --config", lambda f, o: ["export", "--config", f, "--out", o], "out.jsonl"),
    ]
    secondary = {"samples 5000 digits", "hole_ratio 1e309", "hole_ratio .nan", "deep flow list 10000", "alias bomb",
                 "python tag", "agents '2'", "samples 4.7", "impossible band: side 32, 16 agents, max_makespan 1",
                 "syntax error"}
    for kind, text in stage_yaml.items():
        f = make("f.yaml", "raw", content=text.encode())
        for command, argv, name in config_readers:
            if command != "gen --config" and kind not in secondary:
                continue
            fresh = out(name)
            add(command, kind, argv(f, fresh), absent=[fresh])
        if kind in secondary:
            add("rollout --config", kind, ["rollout", "--policy", "oracle", "--config", f, "--out", out("o")])
            band = kind.startswith("impossible band")  # the engineer generates nothing: gen and train refuse it
            add("engineer --config", kind + (" (valid: the engineer generates nothing)" if band else ""),
                ["engineer", "--replays", good_mlr, "--config", f, "--out", out("n.yaml")],
                expect="accept" if band else "refuse")
    stage_json = {
        "samples 5000 digits": json_with(STAGE, ("samples",), BIG),
        "seed 1e309": json_with(STAGE, ("seed",), "1e309"),
        "hole_ratio NaN": json_with(STAGE, ("sizes", "4", "hole_ratio"), "NaN"),
        "wait_ratio Infinity": json_with(STAGE, ("sizes", "4", "wait_ratio"), "Infinity"),
        "data_ratio -Infinity": json_with(STAGE, ("sizes", "4", "data_ratio"), "-Infinity"),
        "deep list 10000": json_with(STAGE, ("samples",), "[" * DEEP + "]" * DEEP),
        "deep object 10000": '{"a":' * DEEP + "0" + "}" * DEEP,
        "a list": json.dumps([STAGE]),
        "samples 4.7": json_with(STAGE, ("samples",), "4.7"),
        "agents \"2\"": json_with(STAGE, ("agents",), '"2"'),
        "duplicate key": json.dumps(STAGE)[:-1] + ', "samples": 5}',
        "trailing comma": json.dumps(STAGE)[:-1] + ",}",
    }
    for kind, text in stage_json.items():
        f = make("f.json", "raw", content=text.encode())
        fresh = out("out.jsonl")
        add("gen --config", f"JSON {kind}", ["gen", "--config", f, "--quiet", "--out", fresh], absent=[fresh])

    # run configs: train --config --print-config
    run_yaml = fixtures["run_yaml"].decode()

    def run_with(old: str, new: str) -> str:
        assert old in run_yaml, old
        return run_yaml.replace(old, new, 1)

    SIX = "    '6':\n      data_ratio: 0.25\n      hole_ratio: 0.2\n      wait_ratio: 0.3"
    run_cases = {
        "stages 5000 digits": run_with("stages: 3", f"stages: {BIG}"),
        "seed 5000 digits": run_with("\nseed: ", f"\nseed: {BIG}\n_x: ") if "\nseed: " in run_yaml else None,
        "training.steps 1e309": run_with("  steps: 300", "  steps: 1e309"),
        "learning_rate .nan": run_with("  learning_rate: 0.0005", "  learning_rate: .nan"),
        "temperature .inf": run_with("  temperature: 1.0", "  temperature: .inf"),
        "initial samples 5000 digits": run_with("  samples: 2400", f"  samples: {BIG}"),
        "deep flow list 10000": run_with("stages: 3", "stages: " + "[" * DEEP + "]" * DEEP),
        "alias bomb": stage_yaml["alias bomb"].replace(STAGE_YAML, "") + run_yaml,
        "a list": "- " + run_yaml.replace("\n", "\n  "),
        "stages '3'": run_with("stages: 3", "stages: '3'"),
        "stages 3.5": run_with("stages: 3", "stages: 3.5"),
        "lora 'false'": run_with("  lora: false", "  lora: 'false'"),
        "unknown engineer": run_with("engineer:\n", "engineer:\n  spec: nosuchengineer\n_x:\n"),
        "impossible band at side 6": run_with(SIX, SIX + "\n      max_makespan: 1"),
        "impossible floor at side 6": run_with(SIX, SIX + "\n      min_makespan: 60"),
        "syntax error": run_yaml + "training: [\n",
        "unknown key": run_yaml + "colour: blue\n",
    }
    for kind, text in run_cases.items():
        if text is None:
            continue
        f = make("run.yaml", "raw", content=text.encode())
        add("train --config", kind, ["train", "--config", f, "--print-config"])

    # --set overrides and arms: refused before anything runs
    sets = {
        "impossible band at side 6": ["--preset", "small", "--set", "initial_config.sizes.6.max_makespan=1"],
        "impossible floor at side 6": ["--preset", "small", "--set", "initial_config.sizes.6.min_makespan=60"],
        "impossible band at 32x32, 16 agents": ["--preset", "small", "--set",
                                                "initial_config.sizes={32: {data_ratio: 1.0, hole_ratio: 0.2, "
                                                "wait_ratio: 0.3, max_makespan: 1}}", "initial_config.agents=16"],
        "stages 5000 digits": ["--preset", "small", "--set", f"stages={BIG}"],
        "training.steps 1e309": ["--preset", "small", "--set", "training.steps=1e309"],
        "learning_rate nan": ["--preset", "small", "--set", "training.learning_rate=.nan"],
        "deep flow list": ["--preset", "small", "--set", "stages=" + "[" * DEEP + "]" * DEEP],
        "unknown engineer": ["--preset", "small", "--set", "engineer.spec=nosuchengineer"],
        "unknown key": ["--preset", "small", "--set", "colour=blue"],
        "unknown arm (compare)": ["--preset", "small", "--compare", "--arm", "x=engineer.spec=nosuchengineer"],
        "arm band impossible (compare)": ["--preset", "small", "--compare", "--arm",
                                          "x=initial_config.sizes.6.max_makespan=1"],
        "unknown preset": ["--preset", "nosuchpreset"],
    }
    for kind, extra in sets.items():
        add("train --set", kind, ["train", *extra, "--print-config"])
    add("gen flags", "impossible band 32x32 16 agents", ["gen", "--size", "32", "--agents", "16", "--max-makespan",
                                                         "1", "--n", "3", "--quiet"])
    add("gen flags", "impossible floor 32x32 16 agents", ["gen", "--size", "32", "--agents", "16", "--min-makespan",
                                                          "200", "--n", "3", "--quiet"])
    add("gen flags", "impossible band 6x6 2 agents", ["gen", "--size", "6", "--max-makespan", "1", "--n", "3",
                                                      "--quiet", "--wait-ratio", "1"])

    # engineer --history: a JSON list of objects
    history = {
        "int5000 in a stage": json.dumps([{"stage": 1}]).replace("1", BIG),
        "1e309": '[{"stage": 1, "valid_rate": 1e309}]',
        "NaN": '[{"stage": 1, "valid_rate": NaN}]',
        "Infinity": '[{"stage": 1, "valid_rate": Infinity}]',
        "deep list 10000": "[" * DEEP + "]" * DEEP,
        "deep object 10000": "[" + '{"a":' * DEEP + "0" + "}" * DEEP + "]",
        "an object, not a list": '{"stage": 1}',
        "a list of numbers": "[1, 2, 3]",
        "a list of lists": "[[1]]",
        "trailing garbage": "[] x",
        "valid_rate '0.5'": '[{"stage": 1, "valid_rate": "0.5"}]',
    }
    for kind, text in history.items():
        f = make("history.json", "raw", content=text.encode())
        fresh = out("next.yaml")
        add("engineer --history", kind, ["engineer", "--replays", good_mlr, "--history", f, "--out", fresh],
            absent=[fresh])

    # --- 3. run folders: compare and report ------------------------------------------------------------------
    records_tamper = {
        "fifo": ("fifo", None), "dev-zero": ("dev-zero", None), "directory": ("directory", None),
        "empty": ("empty", None), "over-limit": ("over-limit", None), "not-utf8": ("not-utf8", None),
        "int5000": ("raw", "int"), "1e309": ("raw", "1e309"), "NaN": ("raw", "NaN"), "deep 10000": ("raw", "deep"),
        "a list": ("raw", "list"), "bom": ("bom", None),
    }
    for relative in ("manifest.json", "stage-01/stage.json"):
        for kind, (how, what) in records_tamper.items():
            folder = corpus.path("run")
            shutil.copytree(good_run, folder)
            target = folder / relative
            valid = target.read_bytes()
            target.unlink()
            if how == "raw":
                text = valid.decode()
                if what == "int":
                    text = text.replace('"stage": 1', f'"stage": {BIG}') if "stage" in relative else \
                        text.replace('"protocol": 2', f'"protocol": {BIG}')
                elif what == "1e309":
                    text = text.replace('"seed": 5', '"seed": 1e309') if "manifest" in relative else \
                        text.replace('"valid_rate": 0.5', '"valid_rate": 1e309')
                elif what == "NaN":
                    text = text.replace('"seed": 5', '"seed": NaN') if "manifest" in relative else \
                        text.replace('"valid_rate": 0.5', '"valid_rate": NaN')
                elif what == "deep":
                    text = "[" * DEEP + "]" * DEEP
                elif what == "list":
                    text = f"[{text}]"
                target.write_bytes(text.encode())
            elif how in ("fifo", "dev-zero", "directory"):
                os.mkfifo(target) if how == "fifo" else (
                    target.symlink_to("/dev/zero") if how == "dev-zero" else target.mkdir())
            elif how == "over-limit":
                with open(target, "wb") as handle:
                    handle.truncate(MAX_RECORD + 1)
            elif how == "empty":
                target.write_bytes(b"")
            elif how == "not-utf8":
                target.write_bytes(b"\xff" + valid)
            elif how == "bom":
                target.write_bytes(b"\xef\xbb\xbf" + valid)
            expect = "accept" if how == "bom" else "refuse"
            label = f"{relative}: {kind}"
            add("compare", label, ["compare", folder], expect=expect)
            add("report", label, ["report", folder, "--plots", out("plots")], expect=expect)
    add("compare", "valid run folder", ["compare", good_run], expect="accept")
    add("compare", "a FIFO as the run", ["compare", make("run", "fifo")])
    add("compare", "a file as the run", ["compare", good_mlr])
    add("report", "valid run folder", ["report", good_run, "--plots", out("plots")], expect="accept")
    add("report", "a FIFO as the run", ["report", make("run", "fifo"), "--plots", out("plots")])

    # --- 4. outputs: never replaced or mixed without --force; a failed import writes nothing ---------------
    def existing(name: str, content: bytes = b"precious\n") -> str:
        f = corpus.path(name)
        f.write_bytes(content)
        return str(f)

    target = existing("out.jsonl")
    add("gen --out", "existing file, no --force", ["gen", "--size", "4", "--n", "2", "--out", target, "--quiet"],
        unchanged=target)
    target = existing("out.jsonl")
    add("gen --out", "existing file, --config", ["gen", "--config", fixtures["stage"], "--out", target, "--quiet"],
        unchanged=target)
    target = existing("out.jsonl")
    add("gen --out", "existing file, --map", ["gen", "--map", good_map, "--scen", good_scen, "--out", target],
        unchanged=target)
    target = existing("out.jsonl")
    add("gen --out", "existing file, --force (valid)", ["gen", "--size", "4", "--n", "2", "--out", target, "--force",
                                                        "--quiet"], expect="accept")
    folder = corpus.path("outdir")
    folder.mkdir()
    add("gen --out", "a folder", ["gen", "--size", "4", "--n", "2", "--out", folder, "--quiet"], unchanged=str(folder))
    link = corpus.path("out.jsonl")
    link.symlink_to("/dev/null")
    add("gen --out", "a link to /dev/null, no --force", ["gen", "--size", "4", "--n", "2", "--out", link, "--quiet"],
        unchanged=str(link))
    fifo = make("out.jsonl", "fifo")
    add("gen --out", "a FIFO", ["gen", "--size", "4", "--n", "2", "--out", fifo, "--quiet"], unchanged=str(fifo))
    add("gen --out", "valid: in a missing folder (made)", ["gen", "--size", "4", "--n", "2", "--out",
                                                           str(corpus.path("x") / "deeper" / "o.jsonl"), "--quiet"],
        expect="accept")
    target = existing("out.jsonl")
    add("export --out", "existing file, no --force", ["export", "--config", fixtures["stage"], "--out", target],
        unchanged=target)
    target = existing("out.jsonl")
    add("export --out", "existing file, --suite", ["export", "--suite", "test-small-quick", "--out", target],
        unchanged=target)
    folder = corpus.path("outdir")
    folder.mkdir()
    add("export --out", "a folder, jsonl", ["export", "--config", fixtures["stage"], "--out", folder],
        unchanged=str(folder))
    target = existing("out.jsonl")
    add("export --out", "existing file, --force (valid)", ["export", "--config", fixtures["stage"], "--out", target,
                                                           "--force"], expect="accept")
    # --movingai into a folder holding an earlier export of the same name
    earlier = corpus.path("mai")
    subprocess.run([sys.executable, "-m", "curriculum.cli", "export", "--config", fixtures["stage"], "--movingai",
                    str(earlier)], cwd=ROOT, capture_output=True, timeout=60, env=ENV, check=True)
    other = dict(STAGE, seed=2)
    same_stem = corpus.path("stage.json")  # the earlier export's name (its stem), another seed
    same_stem.write_text(json.dumps(other))
    other_stem = corpus.path("other.json")
    other_stem.write_text(json.dumps(other))
    for source, kind in ((fixtures["stage"], "same config again"), (str(same_stem), "another config, same stem")):
        copy = corpus.path("mai")
        shutil.copytree(earlier, copy)
        add("export --movingai", f"earlier export, {kind}", ["export", "--config", source, "--movingai", copy],
            unchanged=str(copy))
    copy = corpus.path("mai")
    shutil.copytree(earlier, copy)
    add("export --movingai", "valid: another name beside an earlier export (its files unchanged)",
        ["export", "--config", other_stem, "--movingai", copy], expect="accept",
        unchanged=[str(p) for p in sorted(copy.iterdir())])
    copy = corpus.path("mai")
    shutil.copytree(earlier, copy)
    add("export --movingai", "earlier export, --force (valid)", ["export", "--config", fixtures["stage"],
                                                                 "--movingai", copy, "--force"], expect="accept")
    target = existing("mai")
    add("export --movingai", "a file", ["export", "--config", fixtures["stage"], "--movingai", target],
        unchanged=target)
    # a map that imports nothing: K must not exist after
    holes_map = corpus.path("holes.map")
    holes_map.write_text("type octile\nheight 4\nwidth 6\nmap\n" + "@@@@@@\n" * 4)
    fresh = out("K.jsonl")
    add("gen --map", "imports nothing (every tile a hole) --out K", ["gen", "--map", holes_map, "--scen", good_scen,
                                                                     "--out", fresh], absent=[fresh])
    nothing_scen = corpus.path("same.scen")
    nothing_scen.write_text("version 1\n" + "0\tlake-6x4.map\t6\t4\t0\t0\t5\t3\t8\n" * 2)
    fresh = out("K.jsonl")
    add("gen --map", "imports nothing (agents share a start) --out K", ["gen", "--map", good_map, "--scen",
                                                                        nothing_scen, "--out", fresh], absent=[fresh])
    target = existing("K.jsonl")
    add("gen --map", "imports nothing --out existing K --force", ["gen", "--map", holes_map, "--scen", good_scen,
                                                                  "--out", target, "--force"], unchanged=target)
    fresh = out("K.jsonl")
    add("gen --map", "valid --out K", ["gen", "--map", good_map, "--scen", good_scen, "--out", fresh],
        expect="accept")


# ------------------------------------------------------------------------------------------------ fixtures
ENV = {**os.environ, "SDL_VIDEODRIVER": "dummy", "SDL_AUDIODRIVER": "dummy", "PYTHONDONTWRITEBYTECODE": "1",
       "TERM": "xterm-256color", "COLUMNS": "100", "LINES": "40"}


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "curriculum.cli", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env=ENV, check=True)


def make_fixtures(root: Path) -> dict:
    sys.path.insert(0, str(ROOT))
    ENV["HOSTILE_FIXTURES"] = str(root / "plugins")  # the user script's fixtures (plugin_cases.py)
    from tests.run_folder_fixture import write_run_folder

    good = root / "good"
    good.mkdir()
    (good / "lake-6x4.map").write_text(MAP)
    (good / "lake-6x4.scen").write_text(SCEN)
    (good / "stage.yaml").write_text(STAGE_YAML)
    cli("gen", "--size", "4", "--n", "3", "--seed", "0", "--out", good / "four.jsonl", "--quiet")
    cli("gen", "--size", "10", "--agents", "5", "--n", "2", "--seed", "0", "--out", good / "ten.jsonl", "--quiet")
    cli("rollout", "--policy", "greedy", "--config", good / "stage.yaml", "--out", good / "replays", "--run-id", "x")
    mlr = next((good / "replays").glob("*.mlr"))
    run_yaml = cli("train", "--preset", "small", "--print-config").stdout.encode()
    record = json.loads((good / "four.jsonl").read_text().splitlines()[0])
    # a 256x256 open board with 64 agents crossing over: its labels are made up, so certifying it means solving it
    side, k = 256, 64
    big = {"goals": [[side - 1, side - 1 - 2 * i] for i in range(k)], "grid": [[0] * side for _ in range(side)],
           "index": 0, "needs_wait": False, "optimal_makespan": side - 1, "optimal_sum_of_costs": k * (side - 1),
           "plan": [[2] * (side - 1) for _ in range(k)], "seed": 0, "size": side,
           "starts": [[0, 2 * i] for i in range(k)], "sum_of_distances": k * (side - 1)}
    return {"map": good / "lake-6x4.map", "scen": good / "lake-6x4.scen", "stage": str(good / "stage.yaml"),
            "jsonl": good / "four.jsonl", "jsonl10": good / "ten.jsonl", "mlr": mlr,
            "run": write_run_folder(good / "run"), "run_yaml": run_yaml, "record": record, "big_record": big,
            "plugins": make_plugin_fixtures(root, ENV, lambda argv, env: subprocess.run(
                [sys.executable, *argv], cwd=ROOT, env=env, check=True, capture_output=True, timeout=600))}


# ------------------------------------------------------------------------------------------------ running
def snapshot(path: str | list[str] | None) -> str | list | None:
    """A digest of a file's bytes or a folder's tree (names and bytes); None when absent."""
    if path is None:
        return None
    if isinstance(path, list):
        return [snapshot(p) for p in path]
    p = Path(path)
    if p.is_symlink():
        return "link:" + os.readlink(p)
    if p.is_fifo():
        return "fifo"
    if p.is_dir():
        digest = hashlib.sha256()
        for child in sorted(p.rglob("*")):
            digest.update(str(child.relative_to(p)).encode())
            if child.is_file():
                digest.update(child.read_bytes())
        return "dir:" + digest.hexdigest()
    if p.exists():
        return hashlib.sha256(p.read_bytes()).hexdigest()
    return None


def run_case(case: Case, root: Path) -> Result:
    before = snapshot(case.unchanged)
    start = time.monotonic()
    timeout = SCRIPT_TIMEOUT if case.script else TIMEOUT
    program = [sys.executable] if case.script else [sys.executable, "-m", "curriculum.cli"]
    terminal = None
    if case.tty:  # play needs a terminal: its stdin and stdout are a pseudo-terminal's, as in a user's shell
        import pty

        terminal, follower = pty.openpty()
        proc = subprocess.Popen([*program, *case.argv], cwd=ROOT, env=ENV, stdin=follower, stdout=follower,
                                stderr=subprocess.PIPE, start_new_session=True)
        os.close(follower)
    else:
        proc = subprocess.Popen([*program, *case.argv], cwd=ROOT, env=ENV, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    hung = app_started = False
    out_chunks: list[bytes] = []
    err = out = b""
    if case.tty:  # play: watch the terminal for the app's first screen
        import selectors

        sel = selectors.DefaultSelector()
        screen = os.fdopen(terminal, "rb", buffering=0)
        sel.register(screen, selectors.EVENT_READ)
        sel.register(proc.stderr, selectors.EVENT_READ)
        err_chunks: list[bytes] = []
        open_streams = 2
        while open_streams:
            left = timeout - (time.monotonic() - start)
            if left <= 0:
                hung = True
                break
            for key, _ in sel.select(timeout=left):
                try:
                    chunk = os.read(key.fileobj.fileno(), 65536)
                except OSError:  # the terminal's far end closed (the program exited)
                    chunk = b""
                if not chunk:
                    sel.unregister(key.fileobj)
                    open_streams -= 1
                    continue
                (out_chunks if key.fileobj is screen else err_chunks).append(chunk)
            if ALT_SCREEN in b"".join(out_chunks) or ALT_SCREEN in b"".join(err_chunks):
                app_started = True
                break
        if hung or app_started:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        screen.close()
        err = b"" if app_started else b"".join(err_chunks)  # the app's screen, not an error
    else:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            hung = True
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
    seconds = time.monotonic() - start
    stderr = err.decode("utf-8", "replace")
    after = snapshot(case.unchanged)
    left_behind = [p for p in case.absent if os.path.lexists(p)]
    status = 0 if app_started else (None if hung else proc.returncode)
    names = [Path(a).name for a in case.argv if a.startswith(str(root))]
    leaked = leaks(case, out + err, root) if case.expect == "no-leak" else []
    result = Result(
        command=case.command, kind=case.kind, argv=shown(case.argv, root), expect=case.expect, status=status,
        seconds=round(seconds, 2), traceback="Traceback" in stderr, stderr_lines=len(stderr.strip().splitlines()),
        hung=hung, app_started=app_started,
        target_changed=None if case.unchanged is None else before != after,
        left_behind=[shown([p], root) for p in left_behind],
        names_file=any(n and n in stderr for n in names) if names else True,
        stderr=shown([stderr.strip()[-300:]], root), leaked=leaked,
    )
    result.cls = classify(result)
    return result


def leaks(case: Case, output: bytes, root: Path) -> list[str]:
    """Where the endpoint's API key was written: the command's output, or any file under its outputs' folders."""
    found = ["output"] if SECRET.encode() in output else []
    folders = {Path(a).parent for a in case.argv if a.startswith(str(root))}
    for folder in sorted(folders):
        for path in folder.rglob("*"):
            if path.is_file() and not path.is_symlink() and SECRET.encode() in path.read_bytes():
                found.append(shown([str(path)], root))
    return found


def shown(argv: list[str], root: Path) -> str:
    text = " ".join(argv).replace(str(root), "$T")
    return text if len(text) <= 400 else text[:200] + f" ...({len(text)} chars)... " + text[-120:]


def classify(r: Result) -> str:
    if r.hung:
        return "hang"
    if r.traceback:
        return "traceback"
    if r.leaked:
        return "leak"
    if r.target_changed or (r.left_behind and r.status != 0):
        return "damaged"
    if r.expect == "no-leak":
        return "ok" if r.status in (0, 2) and r.stderr_lines <= 1 else f"exit-{r.status}"
    if r.expect == "accept":
        return "ok" if r.status == 0 else "refused-valid"
    if r.status == 0:
        return "silent"
    if r.status != 2:
        return f"exit-{r.status}"
    return "ok" if r.stderr_lines == 1 else "multi-line"


CLASSES = ["ok", "traceback", "hang", "multi-line", "silent", "damaged", "leak", "refused-valid"]


def table(results: list[Result]) -> str:
    extra = sorted({r.cls for r in results} - set(CLASSES))
    columns = CLASSES + extra
    per: dict[str, Counter] = defaultdict(Counter)
    for r in results:
        per[r.command][r.cls] += 1
    total = Counter(r.cls for r in results)
    head = "| command | cases | " + " | ".join(columns) + " |"
    rule = "| --- | ---: | " + " | ".join("---:" for _ in columns) + " |"
    rows = [f"| `{cmd}` | {sum(c.values())} | " + " | ".join(str(c[k]) for k in columns) + " |"
            for cmd, c in sorted(per.items())]
    rows.append(f"| **all** | **{len(results)}** | " + " | ".join(f"**{total[k]}**" for k in columns) + " |")
    return "\n".join([head, rule, *rows])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", action="append", help="keep the cases whose command or kind holds this text "
                        "(repeat for several)")
    parser.add_argument("--no-write", action="store_true", help="print only; write no results.json")
    parser.add_argument("--list", action="store_true", help="count the cases per command and exit")
    args = parser.parse_args()
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
        root = Path(tmp)
        corpus = Corpus(root)
        fixtures = make_fixtures(root)
        build(corpus, fixtures)
        build_outputs(corpus, fixtures)
        build_plugins(corpus, fixtures)
        cases = [c for c in corpus.cases if args.only is None or any(text in f"{c.command} {c.kind}"
                                                                      for text in args.only)]
        print(f"{len(cases)} cases, {args.jobs} at a time", file=sys.stderr)
        if args.list:
            for command, count in sorted(Counter(c.command for c in cases).items()):
                print(f"{count:4d}  {command}")
            return 0
        with ThreadPoolExecutor(args.jobs) as pool:
            results = list(pool.map(lambda c: run_case(c, root), cases))
        for p in root.rglob("*"):  # the unreadable files: readable again so the folder can be removed
            if not p.is_symlink() and p.is_file():
                p.chmod(0o600)
    elapsed = time.time() - started
    counts = Counter(r.cls for r in results)
    print(table(results))
    print(f"\n{len(results)} cases in {elapsed:.0f} s: " + ", ".join(f"{k} {v}" for k, v in counts.most_common()))
    bad = [r for r in results if r.cls != "ok"]
    for r in bad:
        print(f"\n[{r.cls}] {r.command} / {r.kind}: exit {r.status}, {r.seconds} s\n  "
              f"{'python' if r.argv.startswith(SCRIPT) else 'mapf-lake'} {r.argv}\n  "
              + r.stderr.replace("\n", "\n  ")[-700:])
    unnamed = [r for r in results if r.cls == "ok" and r.expect == "refuse" and not r.names_file]
    if unnamed:
        print(f"\n{len(unnamed)} refusals whose line does not name the file:")
        for r in unnamed:
            print(f"  {r.command} / {r.kind}: {r.stderr[:200]}")
    if not args.no_write and args.only is None:
        document = {
            "command": ".venv/bin/python docs/results/hostile-readers/corpus.py",
            "cases": len(results), "seconds": round(elapsed), "jobs": args.jobs, "counts": dict(counts),
            "slowest": sorted(([r.seconds, r.command, r.kind] for r in results), reverse=True)[:10],
            "results": [asdict(r) for r in results],
        }
        rows = document.pop("results")
        text = json.dumps(document, ensure_ascii=False)[:-1] + ',\n "results": [\n' + ",\n".join(
            json.dumps(row, ensure_ascii=False) for row in rows) + "\n]}\n"  # one case a line
        from simulator.atomic import atomic_write

        atomic_write(HERE / "results.json", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
