"""Hostile input, fuzzed: every entry point that reads outside data lets only its documented errors escape, and
each call stays bounded in time and memory.

Entry points: plan completions (``parse_plan``, the reward), engineer answers (``decide_from_answer``), stage
configs (``parse_config_text``), run configs (``RunConfig.from_dict``, ``load_run_config``), ``--set`` values
(``parse_overrides`` + ``with_overrides``), instance text and JSON (``parse_instance``, ``Instance.from_dict``),
scoring records (``policy.score``), replay files with flipped and cut bytes (``ReplayReader``) and the fields
mining reads (``summarize``), and run folders as ``report`` and ``compare`` read them (``load_run``: each record
file truncated, mistyped, huge, a link to /dev/zero, a FIFO; each field of the wrong type). Inputs are hypothesis strategies biased toward the shapes that broke things before:
tags, fences, YAML flow syntax, huge numbers, deep nesting, control characters.
"""

from __future__ import annotations

import json
import time
import tracemalloc
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.errors import ConfigError

SECONDS = 2.0  # per call, generous for a loaded 2-core machine; the documented inputs are far faster
PEAK_BYTES = 64 * 2**20  # per call
FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

PIECES = ["<think>", "</think>", "<answer>", "</answer>", "```", "```yaml\n", "agent 0:", "Agent 1 ->", "A0 ", "A1 ",
          "R", "L", "U", "D", "W", " ", ",", "\n", "→", "(", ")", "{", "}", "[", "]", ":", "'", '"', "&a", "*a", "!!python",
          "sizes:", "agents:", "samples:", "data_ratio:", "hole_ratio:", "0.5", "1e308", "9" * 40, "-1", "NaN", "010",
          "\t", "\x00", "é", "\u202e", "none", "1.", "#", "- ", "  "]
hostile_text = st.lists(st.sampled_from(PIECES) | st.text(max_size=8), max_size=60).map("".join)


@contextmanager
def bounded(seconds_allowed: float = SECONDS):
    """The block must finish within ``seconds_allowed`` and allocate at most PEAK_BYTES at its peak."""
    tracemalloc.start()
    started = time.perf_counter()
    try:
        yield
    finally:
        seconds = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert seconds < seconds_allowed, f"{seconds:.2f} s"
    assert peak < PEAK_BYTES, f"{peak / 2**20:.1f} MiB"


@pytest.fixture(scope="module", autouse=True)
def _warm():
    """Each entry point once on good input, untimed: numba compiles its kernels on first use (seconds on a
    clean clone, whose cache is empty), and the timed calls measure the inputs, not the compiler."""
    from policy.score import make_record, score
    from policy.prompts import get_style
    from simulator.config import StageConfig
    from simulator.generator import generate

    item = generate(StageConfig.from_dict({"agents": 2, "samples": 1, "seed": 1, "sizes": {
        4: {"data_ratio": 1.0, "hole_ratio": 0.2, "wait_ratio": 0.0}}})).instances[0]
    record = make_record(item, get_style("compact-nb"), "warm")
    score(record, record["reference"])
    _warm_cli()


@FUZZ
@given(text=hostile_text, agents=st.integers(1, 6), horizon=st.integers(1, 200))
def test_fuzz__plan_completions_parse_or_say_why(text, agents, horizon):
    from policy.parsing import parse_plan

    with bounded():
        result = parse_plan(text, agents, horizon)
    assert (result.plan is None) != (result.error is None)


@FUZZ
@given(text=hostile_text)
def test_fuzz__engineer_answers_always_end_in_a_valid_config(text):
    from engineer.proposal import decide_from_answer
    from simulator.config import StageConfig

    previous = StageConfig.from_dict({"agents": 2, "samples": 100, "seed": 1, "sizes": {
        4: {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.3},
        6: {"data_ratio": 0.5, "hole_ratio": 0.3, "wait_ratio": 0.3}}})
    with bounded():
        decision = decide_from_answer("fuzz", text, previous)
    assert StageConfig.from_dict(decision.config.to_dict()) == decision.config
    json.dumps(decision.to_dict(), allow_nan=False)


def _documents():
    scalars = st.none() | st.booleans() | st.integers(-10**30, 10**30) | st.floats(allow_nan=True) | st.text(max_size=12)
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["agents", "samples", "seed", "sizes", "slip", "horizon", "data_ratio", "hole_ratio",
                         "wait_ratio", "4", "x", 3]) | st.text(max_size=5), inner, max_size=5), max_leaves=25)


@FUZZ
@given(text=hostile_text, document=_documents(), as_json=st.booleans())
def test_fuzz__stage_configs_load_or_raise_config_error(text, document, as_json):
    from simulator.config import parse_config_text

    for source, kind in ((text, "yaml"), (json.dumps(document, default=str) if as_json else text, "json")):
        with bounded():
            try:
                parse_config_text(source, kind)
            except ConfigError:
                pass


@FUZZ
@given(document=_documents(), pairs=st.lists(st.tuples(
    st.sampled_from(["training.steps", "training.learning_rate", "engineer.context", "stages", "name", "bogus.key",
                     "training.steps.x", "validation.samples", "seed", "model", "training.rewards",
                     "training.rewards.valid", "training.rewards.x", "engineer.options.low", "engineer.options.x"]),
    hostile_text), max_size=3))
def test_fuzz__run_configs_and_set_values_load_or_raise_config_error(document, pairs):
    from curriculum.config import parse_overrides
    from curriculum.config import RunConfig, preset

    with bounded():
        try:
            RunConfig.from_dict(document if isinstance(document, dict) else {"stages": document})
        except ConfigError:
            pass
        try:
            preset("tiny").with_overrides(**parse_overrides([f"{key}={value}" for key, value in pairs]))
        except ConfigError:
            pass


def _set_keys() -> list[str]:
    from curriculum.config import settings_rows

    return [row.name for row in settings_rows()]


# YAML a user may type after KEY=: numbers of every size and kind, the special words, empty and nested values
SET_VALUES = (hostile_text | st.integers(-10**45, 10**45).map(str) | st.floats().map(repr)
              | st.sampled_from(["true", "false", "null", "~", "[]", "{}", "[1, 2]", "{a: 1}", "''", "-1", "0", "1",
                                 "1e309", ".nan", "-.inf", "3.5", "0x10", "[[[]]]", "{3: {data_ratio: 1}}",
                                 "runs/x", "..", "/", "tiny", "hf:@smollm2", "llm:self"]))


@settings(FUZZ, max_examples=250)
@given(key=st.sampled_from(_set_keys()), value=SET_VALUES)
def test_fuzz__every_set_key_takes_a_value_or_refuses_it_with_one_config_error(key, value):
    """Every key ``train --settings`` lists, given hostile YAML: refused with one ConfigError line, or accepted as a
    value the run config keeps (its document reads back to the same config) and the band check can judge."""
    from curriculum.config import RunConfig, parse_overrides, preset
    from curriculum.loop.sets import check_bands

    with bounded():
        try:
            config = preset("tiny").with_overrides(**parse_overrides([f"{key}={value}"]))
        except ConfigError as error:
            assert "\n" not in str(error).strip(), str(error)
            return
        assert RunConfig.from_dict(config.to_dict()).to_dict() == config.to_dict()
        try:
            check_bands(config)
        except ConfigError:
            pass


@FUZZ
@given(text=hostile_text, document=_documents())
def test_fuzz__instance_text_and_json_load_or_raise_config_error(text, document):
    from simulator.text import parse_instance
    from simulator.types import Instance

    with bounded():
        for call, value in ((parse_instance, text), (Instance.from_dict, document)):
            try:
                call(value)
            except ConfigError:
                pass


@FUZZ
@given(document=_documents(), completion=hostile_text)
def test_fuzz__scoring_records_score_or_raise_config_error(document, completion):
    from policy.score import RECORD_FORMAT, RECORD_VERSION, score

    record = {"format": RECORD_FORMAT, "version": RECORD_VERSION, "instance": document, "horizon": 10,
              "labels": {"size": 3, "agents": 2, "optimal_makespan": 2, "optimal_sum_of_costs": 4,
                         "sum_of_distances": 4, "needs_wait": False}} if isinstance(document, dict) else document
    with bounded():
        try:
            score(record, completion)
        except ConfigError:
            pass


@pytest.fixture(scope="module")
def replay_bytes(tmp_path_factory):
    from policy.rollout import judge_episodes
    from policy.scripted import make_scripted
    from replays.types import ReplayHeader
    from replays.writer import write_replay
    from simulator.config import StageConfig
    from simulator.generator import generate

    items = generate(StageConfig.from_dict({"agents": 2, "samples": 6, "seed": 3, "sizes": {
        4: {"data_ratio": 1.0, "hole_ratio": 0.2, "wait_ratio": 0.5}}})).instances
    path = tmp_path_factory.mktemp("fuzz") / "r.mlr"
    write_replay(path, ReplayHeader.new("run", 0, "validation", {"name": "random"}),
                 judge_episodes(items, make_scripted("random").plans(items, seed=1)))
    return path.read_bytes()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz__replay_files_with_flipped_or_cut_bytes_read_or_raise_replay_error(tmp_path, replay_bytes, data):
    from replays.errors import ReplayError
    from replays.mining import render_summary, summarize
    from replays.reader import ReplayReader

    raw = bytearray(replay_bytes)
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(raw) - 1))
        raw[position] ^= 1 << data.draw(st.integers(0, 7))
    if data.draw(st.booleans()):
        raw = raw[:data.draw(st.integers(0, len(raw)))]
    path = tmp_path / f"f{data.draw(st.integers(0, 10**9))}.mlr"
    path.write_bytes(bytes(raw))
    with bounded():
        try:
            with ReplayReader(path) as reader:
                episodes = list(reader)
            render_summary(summarize(episodes))  # the fields mining reads, as the file has them
        except ReplayError:
            pass


def _warm_cli(done=[]) -> None:  # noqa: B006 (the list remembers that it ran)
    """Import the CLI and compile the generator's kernels once, outside any timed call."""
    if not done:
        from curriculum.cli import main

        main(["gen", "--quiet", "--n", "1"])
        done.append(True)


CLI_VALUES = ["3", "4", "0", "-1", "33", "1e3", "0.2", "0.95", "x", "", "2", "1", "9" * 30, "nan", "--", "-", "010"]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(flags=st.lists(st.tuples(st.sampled_from(["--size", "--agents", "--holes", "--wait-ratio", "--seed", "--slip",
                                                 "--max-attempts", "--bogus"]),
                                st.lists(st.sampled_from(CLI_VALUES), min_size=0, max_size=3)), max_size=4))
def test_fuzz__cli_arguments_end_in_a_result_or_one_line_error(capsys, flags):
    """``mapf-lake gen`` in process with fuzzed flags (at most 3 instances): exit 0, or 2 with one error line."""
    from curriculum.cli import main

    argv = ["gen", "--quiet", "--n", "3"] + [part for flag, values in flags for part in (flag, *values)]
    _warm_cli()
    capsys.readouterr()  # one capture per example
    with bounded(10.0):  # a crowded map may take its 2,000 candidates per instance before giving up
        try:
            code = main(argv)
        except SystemExit as exit_:  # argparse: bad flags and values
            code = exit_.code
    err = capsys.readouterr().err
    assert code in (0, 2), (argv, code)
    if code == 2:
        assert "Traceback" not in err and err.strip(), argv


# --- run folders: what report and compare read (curriculum.reports.report.load_run) -----------------------------------
# A string, a list, a mapping, null, a rate of 700%, an integer too long to print as a float, NaN (1e309 reads as
# inf, refused as NaN is; -1 and True are refused by the same range and type checks).
WRONG_VALUES = ["x", [0.5], {}, None, 7, 10**400, float("nan")]


def _render_run(run: dict) -> None:
    """Everything report and compare do with a loaded run, short of drawing PNGs."""
    from curriculum.reports.report import (compare_table, render_report, render_seed_comparison, run_figures,
                                   seed_comparison)

    render_report(run)
    run_figures(run)
    render_seed_comparison(seed_comparison([run]))
    json.dumps(seed_comparison([run]).to_dict())
    if run.final is not None:
        compare_table([run])


def _load_and_render(folder) -> bool:
    """True when the folder loads (and renders), False when load_run refused it with a ConfigError."""
    from curriculum.reports.report import load_run

    with bounded():
        try:
            run = load_run(folder)
        except ConfigError as error:
            assert "\n" not in str(error) and len(str(error)) < 1000, str(error)[:2000]
            return False
        _render_run(run)
    return True


@pytest.mark.parametrize("damage", ["truncated", "empty", "not-an-object", "deep", "huge", "dev-zero", "fifo",
                                    "folder", "dangling-link"])
def test_fuzz__run_folder_records_damaged_whole_are_refused_naming_the_file(tmp_path, monkeypatch, damage):
    """Each record file of a hand-made run folder, damaged as a whole: one ConfigError naming it, at once (a FIFO
    never opened, /dev/zero never read past the bound)."""
    import os

    import curriculum.loop.records as records_module
    from run_folder_fixture import RECORD_FILES, run_documents, write_run_folder

    monkeypatch.setattr(records_module, "MAX_RECORD_BYTES", 4096)  # "huge" without writing 64 MiB
    for name in RECORD_FILES:
        folder = write_run_folder(tmp_path / name.replace("/", "-"))
        path = folder / name
        text = json.dumps(run_documents()[name])
        path.unlink()
        if damage == "truncated":
            path.write_text(text[: len(text) // 2])
        elif damage == "empty":
            path.write_text("")
        elif damage == "not-an-object":
            path.write_text("[1, 2]")
        elif damage == "deep":
            path.write_text("[" * 3000 + "]" * 3000)
        elif damage == "huge":
            path.write_text(text + " " * 4096)
        elif damage == "dev-zero":
            path.symlink_to("/dev/zero")
        elif damage == "fifo":
            os.mkfifo(path)
        elif damage == "folder":
            path.mkdir()
        else:
            path.symlink_to(tmp_path / "nowhere")
        loaded = _load_and_render(folder)
        if damage == "dangling-link" and name != "manifest.json":
            continue  # an optional record that is not there: the run reads without it, or names it
        assert not loaded, (name, damage)


def test_fuzz__run_folder_fields_of_every_wrong_type_load_and_render_or_are_refused(tmp_path):
    """Every top-level field and every field one level down of every record, set to each of WRONG_VALUES: the
    folder loads and renders (a value that is allowed there, or a field report and compare do not read) or is
    refused with one ConfigError line. (The warm start's summary is read as the untrained one is: left out.)"""
    from run_folder_fixture import run_documents, write_run_folder

    folder = write_run_folder(tmp_path / "run")
    refused = loaded = 0
    for name, document in run_documents().items():
        if name == "warm_start/summary.json":
            continue
        paths = [(key,) for key in document] + [(key, inner) for key, value in document.items()
                                                if isinstance(value, dict) for inner in value]
        for path in paths:
            for value in WRONG_VALUES:
                damaged = run_documents()[name]
                target = damaged
                for key in path[:-1]:
                    target = target[key]
                target[path[-1]] = value
                (folder / name).write_text(json.dumps(damaged))
                if _load_and_render(folder):
                    loaded += 1
                else:
                    refused += 1
        (folder / name).write_text(json.dumps(document))
    assert refused > 2 * loaded  # most are refused; the rest sit where they are allowed or not read (churn)


@FUZZ
@given(data=st.data(), document=_documents())
def test_fuzz__run_folder_fields_replaced_by_random_documents_load_and_render_or_are_refused(
        tmp_path_factory, data, document):
    from run_folder_fixture import run_documents, write_run_folder

    documents = run_documents()
    name = data.draw(st.sampled_from(sorted(documents)))
    target = documents[name]
    while True:  # walk down a random path of mappings, then replace what is there
        key = data.draw(st.sampled_from(sorted(target)))
        if isinstance(target[key], dict) and target[key] and data.draw(st.booleans()):
            target = target[key]
            continue
        target[key] = document
        break
    _load_and_render(write_run_folder(tmp_path_factory.mktemp("run"), documents))


ARM_PIECES = ["x", "fixed", "gap-band", "=", ";", "seed", "name", "arm", "engineer.spec", "rule", "training.steps",
              "3", "1e309", ".nan", "[1e309]", "\n", "\t", "/", "\\", "a" * 101, "{", "}", "&a", "*a", " ", "é"]


@FUZZ
@given(specs=st.lists(st.lists(st.sampled_from(ARM_PIECES) | st.text(max_size=4), max_size=8).map("".join),
                      min_size=1, max_size=3))
def test_fuzz__arm_strings_parse_and_build_configs_or_raise_config_error(specs):
    """``--arm`` strings: every arm parsed and its run config built as ``train --compare`` builds it, or one
    ConfigError (never the TypeError of an override the comparison sets itself)."""
    from curriculum.commands import _parse_arms
    from curriculum.config import preset

    config = preset("tiny")
    with bounded():
        try:
            for arm, overrides in _parse_arms(specs).items():
                config.with_overrides(name=f"{config.name}-{arm}", arm=arm, seed=config.seed, **overrides)
        except ConfigError as error:
            assert "\n" not in str(error)


# --- the scorer, verifiers, reasoning-gym and multi-turn APIs (issue 36, item 13) ----------------------------------

def _good_record() -> dict:
    from policy.score import RECORD_FORMAT, RECORD_VERSION

    return {"format": RECORD_FORMAT, "version": RECORD_VERSION, "horizon": 10,
            "instance": {"grid": [[0, 0, 0], [0, 0, 0], [0, 0, 0]], "starts": [[0, 0], [2, 2]], "goals": [[0, 2], [2, 0]]},
            "labels": {"size": 3, "agents": 2, "optimal_makespan": 2, "optimal_sum_of_costs": 4,
                       "sum_of_distances": 4, "needs_wait": False}}


HOSTILE_NUMBERS = ["x", float("nan"), float("inf"), 1e309, 10**30, -1, 2.5, True, None, [2], {}]


@pytest.mark.parametrize("value", HOSTILE_NUMBERS, ids=repr)
@pytest.mark.parametrize("where", ["horizon", "labels.optimal_makespan", "labels.size", "labels.agents",
                                   "labels.optimal_sum_of_costs", "labels.sum_of_distances"])
def test_fuzz__score_refuses_malformed_ground_truth_naming_the_field(where, value):
    """ValueError, OverflowError and TypeError escaped from int() on these (documented: ConfigError), and 2.5 was
    cut to 2 silently."""
    from policy.score import compute_score, score, score_batch

    record = _good_record()
    parent = record["labels"] if where.startswith("labels.") else record
    parent[where.rsplit(".", 1)[-1]] = value
    for call in (lambda: score(record, "A0 R R\nA1 L L"), lambda: score_batch([record], [""]),
                 lambda: compute_score("mapf-lake", "", json.dumps(record))):
        with bounded(), pytest.raises(ConfigError) as error:
            call()
        assert error.value.field.endswith(where) and "\n" not in str(error.value)


@pytest.mark.parametrize("ground_truth, field", [
    ("[" * 100_000 + "]" * 100_000, "record 0"),  # RecursionError in the JSON decoder
    ('{"a":' * 5_000 + "1" + "}" * 5_000, "record 0"),
    ('{"format": "mapf-lake-record", "version": 1, "horizon": NaN}', "record 0.instance"),
    (json.dumps({**_good_record(), "labels": {**_good_record()["labels"], "needs_wait": "no"}}),
     "record 0.labels.needs_wait"),
])
def test_fuzz__score_refuses_ground_truth_text_naming_the_field(ground_truth, field):
    from policy.score import score

    with bounded(), pytest.raises(ConfigError) as error:
        score(ground_truth, "")
    assert error.value.field == field


def test_fuzz__score_batch_refuses_what_is_not_a_list_and_instances_that_are_not_json():
    from policy.score import score_batch

    for records, completions, field in ((3, [""], "records"), ([_good_record()], "x", "completions"),
                                        ([{**_good_record(), "instance": {1, 2}}], [""], "record 0.instance"),
                                        ([{**_good_record(), "instance": {"grid": float("nan")}}], [""],
                                         "record 0.instance")):
        with pytest.raises(ConfigError) as error:
            score_batch(records, completions)
        assert error.value.field == field


@FUZZ
@given(document=_documents(), key=st.sampled_from(["horizon", "labels", "optimal_makespan", "size", "agents",
                                                   "optimal_sum_of_costs", "sum_of_distances", "needs_wait"]))
def test_fuzz__scoring_labels_replaced_by_random_documents_score_or_raise_config_error(document, key):
    from policy.score import score

    record = _good_record()
    (record if key in ("horizon", "labels") else record["labels"])[key] = document
    with bounded():
        try:
            score(record, "A0 R R\nA1 L L")
            score(json.dumps(record, default=str), "")
        except ConfigError as error:
            assert "\n" not in str(error)


@pytest.mark.parametrize("kwargs, field", [
    ({"rewards": {"valid": float("nan")}}, "rewards.valid"),  # accepted: every reward became NaN
    ({"rewards": {"valid": float("inf")}}, "rewards.valid"),
    ({"rewards": {"valid": 10**400}}, "rewards.valid"),  # OverflowError
    ({"prompt_style": ["natural"]}, "prompt_style"),  # TypeError: unhashable
    ({"suite": ["paper"]}, "suite"),
    ({"eval_suite": {}}, "eval_suite"),
    ({"sizes": [[3]]}, "sizes"),
])
def test_fuzz__verifiers_load_environment_refuses_hostile_arguments_by_name(kwargs, field):
    verifiers_env = pytest.importorskip("policy.verifiers_env")
    with bounded(), pytest.raises(ConfigError) as error:
        verifiers_env.load_environment(**kwargs)
    assert error.value.field == field


@pytest.mark.parametrize("kwargs, field", [
    ({"max_size": 6.5}, "max_size"), ({"min_size": "3"}, "min_size"), ({"size": -1}, "size"),
    ({"size": 2.5}, "size"), ({"size": 10**30}, "size"), ({"size": True}, "size"), ({"min_agents": 1.5}, "min_agents"),
    ({"max_agents": None}, "max_agents"), ({"seed": "x"}, "seed"), ({"seed": -1}, "seed"),
])
def test_fuzz__reasoning_gym_config_refuses_hostile_values_by_name(kwargs, field):
    pytest.importorskip("reasoning_gym")
    import reasoning_gym

    import policy.reasoning_gym_task  # noqa: F401  (registers the dataset)

    with bounded(), pytest.raises(ConfigError) as error:
        reasoning_gym.create_dataset("mapf_frozenlake", **kwargs)
    assert error.value.field == field


def test_fuzz__reasoning_gym_score_answer_refuses_an_entry_without_its_record():
    pytest.importorskip("reasoning_gym")
    import reasoning_gym

    import policy.reasoning_gym_task  # noqa: F401  (registers the dataset)

    data = reasoning_gym.create_dataset("mapf_frozenlake", size=1, seed=1, min_size=3, max_size=3)
    entry = data[0]
    assert data.score_answer(entry["answer"], entry) == 1.0 and data.score_answer(None, entry) == 0.0
    for bad in ({}, None, [], {"metadata": None}, {"metadata": {}}, {"metadata": {"record": "[[["}},
                {"metadata": {"record": {**entry["metadata"]["record"], "horizon": "x"}}}):
        for answer in (entry["answer"], ""):
            with pytest.raises(ConfigError) as error:
                data.score_answer(answer, bad)
            assert error.value.field.startswith("entry.metadata.record")


@pytest.fixture(scope="module")
def turn_items():
    from simulator.config import StageConfig
    from simulator.generator import generate

    return generate(StageConfig.from_dict({"agents": 2, "samples": 2, "seed": 1, "sizes": {
        4: {"data_ratio": 1.0, "hole_ratio": 0.2, "wait_ratio": 0.0}}})).instances


@pytest.mark.parametrize("kwargs, field", [
    *[({"optimal_makespan": value}, "optimal_makespan") for value in ("x", float("nan"), -1, 10**30, 2.5, True, [3])],
    *[({"slip": value}, "slip") for value in (10**400, "0.5", float("nan"), -0.1, None)],
])
def test_fuzz__text_game_refuses_hostile_arguments_when_made(turn_items, kwargs, field):
    """A bad optimal makespan raised only at the episode's last step (or never, when no episode was valid)."""
    from policy.multiturn import TextGame

    with pytest.raises(ConfigError) as error:
        TextGame(turn_items[0].instance, "compact", **kwargs)
    assert error.value.field == field


@pytest.mark.parametrize("kwargs, field", [
    *[({"slip": value}, "slip") for value in ("0.5", float("nan"), 2, 10**400, None)],
    *[({"seed": value}, "seed") for value in ("3", 2.7, -1, 10**30, None, True, float("inf"))],
])
def test_fuzz__multi_turn_rollout_refuses_hostile_arguments_when_made(turn_items, kwargs, field):
    from policy.multiturn import MultiTurnRollout

    with pytest.raises(ConfigError) as error:
        MultiTurnRollout(turn_items, "compact", **kwargs)
    assert error.value.field == field


def test_fuzz__multi_turn_rollout_refuses_items_that_are_not_labelled_instances(turn_items):
    from policy.multiturn import MultiTurnRollout

    class NotLabelled:
        instance = turn_items[0].instance
        optimal_makespan = "x"

    for items, field in (([NotLabelled()], "items[0].optimal_makespan"), ([3], "items[0]"), (5, "items"),
                         (None, "items")):
        with pytest.raises(ConfigError) as error:
            MultiTurnRollout(items, "compact")
        assert error.value.field == field


def _blocks(block: str) -> str:
    """As many copies of ``block`` as fit in the engineer's 32,000-character limit."""
    return block * (31_900 // len(block))


@pytest.mark.parametrize("answer", [
    _blocks("```\nagents: " + "[ " * 500 + "]" * 500 + "\n```\n"),  # 21 blocks: 6.5 s before (YAML recursed)
    _blocks("```\nagents: " + "[ " * 1000 + "]" * 1000 + "\n```\n"),  # 10 blocks: 10 s
    _blocks("```\nagents: " + "{a: " * 300 + "1" + "}" * 300 + " :x\n```\n"),
    _blocks("```\nagents:\n  " + "- " * 200 + "1\n :bad\n```\n"),
    _blocks("```\nagents: " + "[ " * 20 + "]" * 20 + " :x\n```\n"),  # just under the nesting bound, 398 blocks
], ids=["seq500", "seq1000", "map300", "dash200", "seq20"])
def test_fuzz__engineer_answers_with_many_deeply_nested_blocks_are_decided_in_bounded_time(answer):
    """Engineer answers within the 32,000-character limit made of deeply nested fenced blocks took 14-26 s:
    PyYAML's work grows with the nesting and every block was parsed twice. Text nested past MAX_NESTING is not
    parsed, a block is parsed once, and at most MAX_FENCED_BLOCKS blocks are tried."""
    from engineer.proposal import decide_from_answer
    from simulator.config import StageConfig

    previous = StageConfig.from_dict({"agents": 2, "samples": 100, "seed": 1, "sizes": {
        4: {"data_ratio": 1.0, "hole_ratio": 0.2, "wait_ratio": 0.3}}})
    with bounded():
        decision = decide_from_answer("fuzz", answer, previous)
    assert not decision.accepted and decision.config == previous
