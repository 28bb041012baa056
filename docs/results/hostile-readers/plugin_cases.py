"""The corpus's plug-in families (issue 62): a user's TRL or verl script (``user_script.py``) meeting a damaged
checkpoint state, a hostile dataset column or row file, a misused ``Curriculum``; commands that would replace a file
the user named; an OpenAI-compatible endpoint that quotes the API key back; ``play`` without a terminal.

Each damaged run folder is a copy of a fixture (``user_script.py setup``) in the case's own folder, and the case
checks that its bytes do not change. The endpoint cases check that the key appears in no output and no file.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPT = str(HERE / "user_script.py")
BIG = "9" * 5000
DEEP = 10_000


def make_plugin_fixtures(root: Path, env: dict, run) -> Path:
    """The user script's fixtures under ``root/plugins`` (``run``: runs a command list, checking its status)."""
    folder = root / "plugins"
    run([SCRIPT, "setup", str(folder)], env)
    return folder


def _copy(corpus, fixtures: Path, name: str) -> Path:
    """A fresh copy of the fixture run folder ``name`` in a case folder of its own (the run's name is the folder's)."""
    target = corpus.path(name)
    shutil.copytree(fixtures / name, target)
    return target


def _write_raw(path: Path, kind: str, text: str | None = None) -> None:
    """Replace ``path`` by a hostile file of ``kind``, or by ``text``."""
    if path.exists() or path.is_symlink():
        path.unlink()
    if kind == "text":
        path.write_text(text or "")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "missing":
        pass
    else:
        raise ValueError(kind)


def json_with(document: dict, path: tuple, raw: str) -> str:
    """``document`` as JSON with the value at ``path`` replaced by the raw JSON text ``raw``."""
    marker = "\u0000MARK\u0000"
    changed = json.loads(json.dumps(document))
    node = changed
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = marker
    return json.dumps(changed).replace(json.dumps(marker), raw)


def _without(document: dict, key: str) -> str:
    return json.dumps({name: value for name, value in document.items() if name != key})


def build_plugins(corpus, fixtures: dict) -> None:
    plugins: Path = fixtures["plugins"]
    add = corpus.add

    def script(command: str, kind: str, argv: list, **extra) -> None:
        add(command, kind, [SCRIPT, *map(str, argv)], script=True, **extra)

    # --- 1. a TRL checkpoint's curriculum state (trl/checkpoint-2/curriculum_state.json) --------------------------
    state_name = "trl/checkpoint-2/curriculum_state.json"
    good_state = json.loads((plugins / "begun" / state_name).read_text())
    tally = {"groups": 1, "reward": 0.0, "valid": 0.0, "zero_variance": 0, "abs_advantage": 0.0}
    trl_damages = [
        ("stage_began -10**30", ("stage_began",), str(-10**30)), ("stage_began 10**30", ("stage_began",), str(10**30)),
        ("stage_began '2'", ("stage_began",), '"2"'), ("stage_began true", ("stage_began",), "true"),
        ("stage_began 1.5", ("stage_began",), "1.5"), ("stage_began [2]", ("stage_began",), "[2]"),
        ("stage_began NaN", ("stage_began",), "NaN"), ("stage_began 1e309", ("stage_began",), "1e309"),
        ("stage_began 5,000 digits", ("stage_began",), BIG), ("stage_began -100", ("stage_began",), "-100"),
        ("stage_steps 3 (another length)", ("stage_steps",), "3"),
        ("reward: groups 0", ("reward",), json.dumps({"2x3": {**tally, "groups": 0}})),
        ("reward: groups 2.5", ("reward",), json.dumps({"2x3": {**tally, "groups": 2.5}})),
        ("reward: groups -1", ("reward",), json.dumps({"2x3": {**tally, "groups": -1}})),
        ("reward: reward NaN", ("reward",), json.dumps({"2x3": tally}).replace('"reward": 0.0', '"reward": NaN')),
        ("reward: a text", ("reward",), '"garbage"'), ("reward: key 'x'", ("reward",), json.dumps({"x": tally})),
        ("curriculum: run of another name", ("curriculum", "run"), '"another"'),
        ("curriculum: run_id of another run", ("curriculum", "run_id"), '"' + "0" * 16 + '"'),
        ("curriculum: run_id not hex", ("curriculum", "run_id"), '"../../etc"'),
        ("curriculum: stage 7", ("curriculum", "stage"), "7"), ("curriculum: stage 0", ("curriculum", "stage"), "0"),
        ("curriculum: stage '1'", ("curriculum", "stage"), '"1"'),
        ("curriculum: stage true", ("curriculum", "stage"), "true"),
        ("curriculum: drawn -1", ("curriculum", "drawn"), "-1"),
        ("curriculum: drawn 41 digits", ("curriculum", "drawn"), "9" * 41),
        ("curriculum: drawn 1.5", ("curriculum", "drawn"), "1.5"),
        ("curriculum: drawn NaN", ("curriculum", "drawn"), "NaN"),
        ("curriculum: a list", ("curriculum",), "[1, 2]"),
        ("curriculum: nested 10,000 deep", ("curriculum",), "[" * DEEP + "]" * DEEP)]
    for kind, path, raw in trl_damages:
        folder = _copy(corpus, plugins, "begun")
        (folder / state_name).write_text(json_with(good_state, path, raw))
        script("trl checkpoint state", kind, ["trl-resume", folder], unchanged=str(folder))
    for kind, text in [("no curriculum key", _without(good_state, "curriculum")), ("empty file", ""),
                       ("not JSON", "{curriculum: 1"), ("a list", "[]"), ("a duplicate key", json.dumps(
                           good_state)[:-1] + ', "stage_began": 0}'), ("trailing garbage", json.dumps(good_state) + "x"),
                       ("not UTF-8", "\udcff")]:
        folder = _copy(corpus, plugins, "begun")
        if kind == "not UTF-8":
            (folder / state_name).write_bytes(b"\xff\xfe{")
        else:
            (folder / state_name).write_text(text)
        script("trl checkpoint state", kind, ["trl-resume", folder], unchanged=str(folder))
    for kind in ("fifo", "folder", "dev-zero", "missing"):
        folder = _copy(corpus, plugins, "begun")
        _write_raw(folder / state_name, kind)
        script("trl checkpoint state", f"state file: {kind}", ["trl-resume", folder], unchanged=str(folder))
    folder = _copy(corpus, plugins, "begun")
    script("trl checkpoint state", "as the callback wrote it (valid)", ["trl-resume", folder], expect="accept")

    # --- 2. the Curriculum object: a state a script kept, its order, its bounds ------------------------------------
    good = {key: good_state["curriculum"][key] for key in ("run", "run_id", "stage", "drawn")}
    states = [("stage 7", {**good, "stage": 7}), ("stage 0", {**good, "stage": 0}),
              ("stage true", {**good, "stage": True}), ("stage 1.0", {**good, "stage": 1.0}),
              ("drawn 10**41", {**good, "drawn": 10**41}), ("drawn -5", {**good, "drawn": -5}),
              ("drawn NaN", {**good, "drawn": float("nan")}), ("drawn inf", {**good, "drawn": float("inf")}),
              ("run of another name", {**good, "run": "other"}), ("run_id of another run", {**good, "run_id": "f" * 16}),
              ("run_id 5 (not text)", {**good, "run_id": 5}), ("drawn missing", {k: v for k, v in good.items()
                                                                                 if k != "drawn"}),
              ("a list", [1, 2]), ("null", None)]
    for kind, state in states:
        folder = _copy(corpus, plugins, "begun")
        state_file = corpus.path("state.json")
        state_file.write_text(json.dumps(state))
        script("Curriculum.load_state_dict", kind, ["load-state", folder, state_file], unchanged=str(folder))
    folder = _copy(corpus, plugins, "begun")
    state_file = corpus.path("state.json")
    state_file.write_text(json.dumps(good))
    script("Curriculum.load_state_dict", "its own state_dict (valid)", ["load-state", folder, state_file],
           expect="accept")

    stage_record = json.loads((plugins / "stage1" / "stage-01" / "stage.json").read_text())
    for kind, text in [("another run's stage-01/stage.json (same name, another seed)",
                        (plugins / "other" / "stage-01" / "stage.json").read_text()),
                       ('"stage": 7 in stage-01/stage.json', json.dumps({**stage_record, "stage": 7})),
                       ("run_id of another run in stage-01/stage.json", json.dumps({**stage_record,
                                                                                   "run_id": "0" * 16}))]:
        folder = corpus.path("stage1")
        shutil.copytree(plugins / "stage1", folder)
        (folder / "stage-01" / "stage.json").write_text(text)
        script("Curriculum.begin", kind, ["begin", folder], unchanged=str(folder))
    folder = _copy(corpus, plugins, "stage1")
    script("Curriculum.begin", "a folder it wrote (valid)", ["begin", folder], expect="accept")

    for n in ["1000000000000", "-1", "1.5", "true", '"3"', "9" * 41, "null"]:
        folder = _copy(corpus, plugins, "begun")
        script("Curriculum.sample", f"n = {n}", ["sample", folder, n], unchanged=str(folder))
    folder = _copy(corpus, plugins, "begun")
    script("Curriculum.sample", "n = 3 (valid)", ["sample", folder, "3"], expect="accept")
    for when in ("before-begin", "mid-run"):
        folder = _copy(corpus, plugins, "stage1")
        script("Curriculum.evaluate", when, ["evaluate", folder, when], unchanged=str(folder),
               absent=[str(folder / "final")])
    folder = _copy(corpus, plugins, "finished")
    script("Curriculum.evaluate", "after the last boundary (valid)", ["evaluate", folder, "mid-run"], expect="accept")

    # --- 3. the TRL tool environment's reset(instance=...): a dataset column ---------------------------------------
    row = json.loads((plugins / "row.json").read_text())
    for kind, value in [("not JSON", "not json"), ("nested 100 deep", "[" * 100 + "]" * 100),
                        ("a 5,000-digit size", '{"size": ' + BIG + "}"), ("a list", "[1, 2]"),
                        ("300,000 characters", "x" * 300_000), ("NaN inside", '{"a": NaN}'), ("a number", 7),
                        ("null", None), ("the instance with a cell 2", row["instance"].replace('"grid":[[0,', '"grid":[[2,', 1)),
                        ("the instance with a 41-digit start", row["instance"].replace('"starts":[[', '"starts":[['
                                                                                       + "9" * 41 + ",", 1))]:
        file = corpus.path("instance.json")
        file.write_text(json.dumps(value))
        script("tool env reset", kind, ["tool-reset", file])
    file = corpus.path("instance.json")
    file.write_text(json.dumps(row["instance"]))
    script("tool env reset", "a row the curriculum served (valid)", ["tool-reset", file], expect="accept")

    # --- 4. verl: the loader state (data.pt), row files, the run folder option, a finished folder ---------------
    saved = json.loads((plugins / "verl.json").read_text())
    verl_state, served = saved["state"], saved["served"]
    edited = json.loads(json.dumps(served[0]))
    edited["prompt"][0]["content"] += " (and ignore the board)"
    relabelled = json.loads(json.dumps(served[0]))
    truth = json.loads(relabelled["reward_model"]["ground_truth"])
    truth["labels"]["optimal_makespan"] = 1
    relabelled["reward_model"]["ground_truth"] = json.dumps(truth, separators=(",", ":"))
    for kind, key, raw in [("steps 10**30", "steps", str(10**30)), ("steps -5", "steps", "-5"),
                           ("steps 1.5", "steps", "1.5"), ("steps NaN", "steps", "NaN"),
                           ("served 1.5", "served", "1.5"), ("reward_sum NaN", "reward_sum", "NaN"),
                           ("reward_sum 1e309", "reward_sum", "1e309"), ("unobserved 'no'", "unobserved", '"no"'),
                           ("generations 1", "generations", "1"), ("global_step true", "global_step", "true"),
                           ("reward: groups 0", "reward", json.dumps({"2x3": {**tally, "groups": 0}})),
                           ("after_run: an edited prompt", "after_run", json.dumps([edited])),
                           ("after_run: optimal_makespan relabelled 1", "after_run", json.dumps([relabelled])),
                           ("after_run: a text", "after_run", '"rows"'), ("curriculum: a text", "curriculum", '"x"'),
                           ("curriculum: stage 7", "curriculum", json.dumps({**verl_state["curriculum"], "stage": 7})),
                           ("curriculum: run of another name", "curriculum",
                            json.dumps({**verl_state["curriculum"], "run": "other"}))]:
        folder = _copy(corpus, plugins, "verl")
        state_file = corpus.path("data.json")
        state_file.write_text(json_with(verl_state, (key,), raw))
        script("verl loader state", kind, ["verl-state", folder, state_file], unchanged=str(folder))
    for kind, text in [("served missing", _without(verl_state, "served")), ("a list", "[]")]:
        folder = _copy(corpus, plugins, "verl")
        state_file = corpus.path("data.json")
        state_file.write_text(text)
        script("verl loader state", kind, ["verl-state", folder, state_file], unchanged=str(folder))
    folder = _copy(corpus, plugins, "verl")
    state_file = corpus.path("data.json")
    state_file.write_text(json.dumps({**verl_state, "after_run": served}))
    script("verl loader state", "as saved, with the served rows (valid)", ["verl-state", folder, state_file],
           expect="accept")

    rows_text = (plugins / "rows.jsonl").read_text()
    first = json.loads(rows_text.splitlines()[0])
    for kind, name, content in [
            ("random bytes as .parquet", "rows.parquet", os.urandom(4096)), ("empty .parquet", "rows.parquet", b""),
            ("empty .jsonl", "rows.jsonl", b""), ("a .txt", "rows.txt", rows_text.encode()),
            ("a row that is a list", "rows.jsonl", b"[1, 2]\n"), ("not JSON", "rows.jsonl", b"{rows\n"),
            ("a row without its prompt", "rows.jsonl", (json.dumps({k: v for k, v in first.items()
                                                                    if k != "prompt"}) + "\n").encode()),
            ("a row without reward_model", "rows.jsonl", (json.dumps({k: v for k, v in first.items()
                                                                      if k != "reward_model"}) + "\n").encode()),
            ("ground_truth relabelled", "rows.jsonl", (json.dumps(relabelled) + "\n").encode()),
            ("a 5,000-digit number", "rows.jsonl", rows_text.replace('"index"', '"big": ' + BIG + ', "index"',
                                                                     1).encode()),
            ("nested 10,000 deep", "rows.jsonl", ("[" * DEEP + "]" * DEEP + "\n").encode())]:
        data = corpus.path(name)
        data.write_bytes(content)
        folder = corpus.path("verl")
        script("verl data_files", kind, ["verl-files", folder, data], absent=[str(folder)])
    for kind in ("fifo", "missing", "folder", "dev-zero"):
        data = corpus.path("rows.jsonl")
        _write_raw(data, kind)
        script("verl data_files", kind, ["verl-files", corpus.path("verl"), data])
    data = corpus.path("rows.jsonl")
    data.write_text(rows_text)
    script("verl data_files", "an export --layout verl (valid)", ["verl-files", corpus.path("verl"), data],
           expect="accept")
    for option in (".", "./", "..", "sub/.."):
        working = corpus.path("work")
        (working / "sub").mkdir(parents=True)
        script("verl run_folder", f"run_folder {option!r}", ["verl-folder", working, option],
               unchanged=str(working.parent))
    folder = _copy(corpus, plugins, "finished")
    script("verl run_folder", "a finished run folder, a row asked for", ["verl-row", folder], unchanged=str(folder))

    # --- 5. an OpenAI-compatible endpoint that quotes the API key in its answers --------------------------------
    mlr = str(fixtures["mlr"])
    out, record = corpus.out("next.yaml"), corpus.out("decision.json")
    script("openai endpoint", "engineer --record, the answer quoting the key",
           ["openai", "engineer", "--replays", mlr, "--engineer", "llm:openai:m", "--out", out, "--record", record,
            "--show-context", "--option", "answer_mode=free"], expect="no-leak")
    out = corpus.out("replays")
    script("openai endpoint", "eval replays, the completions quoting the key",
           ["openai", "eval", "--policy", "openai:m", "--config", fixtures["stage"], "--out", out],
           expect="no-leak")


def build_outputs(corpus, fixtures: dict) -> None:
    """Every command that writes a file the user names leaves an existing one alone without ``--force``."""
    add = corpus.add
    mlr = str(fixtures["mlr"])

    def existing(name: str) -> str:
        target = corpus.path(name)
        target.write_bytes(b"precious\n")
        return str(target)

    for flag, name in (("--out", "next.yaml"), ("--record", "decision.json")):
        target = existing(name)
        other = "--record" if flag == "--out" else "--out"
        fresh = corpus.out("other.yaml" if flag == "--record" else "other.json")
        add(f"engineer {flag}", "existing file, no --force", ["engineer", "--replays", mlr, flag, target, other,
                                                            fresh], unchanged=target, absent=[fresh])
        target = existing(name)
        add(f"engineer {flag}", "existing file, --force (valid)", ["engineer", "--replays", mlr, flag, target,
                                                                 other, corpus.out("x" + name), "--force"],
            expect="accept")
    for flag, name in (("--png", "frame.png"), ("--gif", "film.gif"), ("--svg", "frame.svg")):
        target = existing(name)
        add(f"watch {flag}", "existing file, no --force", ["watch", mlr, flag, target], unchanged=target)
    target = existing("frame.png")
    add("watch --png", "existing file, --force (valid)", ["watch", mlr, "--png", target, "--force"], expect="accept")
    folder = corpus.path("model")
    folder.mkdir()
    (folder / "config.json").write_text('{"mine": true}\n')
    add("model init --out", "a folder holding a config.json, no --force", ["model", "init", "tiny", "--out", folder],
        unchanged=str(folder))
    folder = corpus.path("model")
    folder.mkdir()
    (folder / "notes.txt").write_text("mine\n")
    add("model init --out", "a non-empty folder, no --force", ["model", "init", "tiny", "--out", folder],
        unchanged=str(folder))
    add("model init --out", "a fresh folder (valid)", ["model", "init", "tiny", "--out", corpus.out("model")],
        expect="accept")
    for key, value in (("output_dir", "3"), ("output_dir", "[1]"), ("output_dir", "true"), ("output_dir", "null"),
                       ("warm_start.config", "false"), ("warm_start.config", "3")):
        add("train --set", f"{key}={value}", ["train", "--preset", "small", "--set", f"{key}={value}",
                                              "--print-config"])
    add("play --load", "standard input at its end (no terminal)", ["play", "--load", fixtures["jsonl"]])
