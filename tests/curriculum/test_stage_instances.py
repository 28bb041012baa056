"""Instances an engineer hands the next stage (``EngineerDecision.instances``): how the stage loop takes them (the
stage's instances, the protected sets' proof, the record), and how they keep compared arms apart."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from curriculum.loop.curriculum import stage_instances, stage_seed
from curriculum.loop.folder import HANDED_FILE
from curriculum.training.run import Run
from curriculum.loop.sharing import share_stage
from curriculum.loop.sets import RunSets, training_seed
from engineer.decision import make_decision
from simulator.config import StageConfig, save_config
from simulator.errors import ConfigError
from simulator.generator import GeneratedStage, generate, to_jsonl
from tests.small_run import small_config

CONFIG = StageConfig.from_dict({"agents": 2, "samples": 12, "seed": training_seed(0, 1), "sizes": {
    3: {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.0},
    4: {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.0}}})


def _given(count: int, seed: int = 9) -> list:
    return generate(replace(CONFIG, samples=count, seed=seed)).instances


def test_stage_instances__the_config_generates_samples_minus_the_given_ones_which_come_last():
    given = _given(3)
    protected = given[0].instance.content_key()
    sets = RunSets(test=frozenset(), evidence=GeneratedStage([]), evidence_keys=frozenset())
    stage = stage_instances(sets, CONFIG, given, "stage-01/decision.json")
    assert len(stage.instances) == CONFIG.samples and stage.instances[-3:] == given
    assert sum(report.count for report in stage.reports.values()) == CONFIG.samples - 3
    assert stage_instances(sets, CONFIG, []).checksum() == sets.training(CONFIG).checksum()  # none: as before
    # the proof: a test or evidence instance among them, or no room left for the config, stops the stage
    for guarded in (RunSets(test=frozenset({protected}), evidence=GeneratedStage([]), evidence_keys=frozenset()),
                    RunSets(test=frozenset(), evidence=GeneratedStage([]), evidence_keys=frozenset({protected}))):
        with pytest.raises(ConfigError, match=r"stage-01/decision.json: instances\[0\]"):
            stage_instances(guarded, CONFIG, given, "stage-01/decision.json")
    with pytest.raises(ConfigError, match="fewer than the stage's 12 samples"):
        stage_instances(sets, CONFIG, _given(12), "stage-01/decision.json")


def _finished_stage(run, number: int, config, handed: bytes = b"") -> None:
    stage = run.run_dir / f"stage-{number:02d}"
    (stage / "model").mkdir(parents=True)
    for name in ("validation.mlr", "summary.json", "stage.json", "decision.json"):
        (stage / name).write_text(name)
    save_config(config, stage / "config.yaml")
    if handed:
        (stage / HANDED_FILE).write_bytes(handed)


def test_share_stage__only_between_stages_handed_the_same_instances(tmp_path):
    source = small_config(tmp_path, "a").with_overrides(**{"engineer.spec": "replay", "arm": "replay"})
    first = replace(source.initial_config, seed=stage_seed(source.seed, 1))
    second = replace(source.initial_config, seed=stage_seed(source.seed, 2))
    handed = to_jsonl(_given(2))
    _finished_stage(source, 1, first)
    _finished_stage(source, 2, second, handed)
    plain = small_config(tmp_path, "b").with_overrides(**{"engineer.spec": "fixed", "arm": "fixed"})
    assert share_stage(source, plain, 1, first)
    assert not share_stage(source, plain, 2, second)  # the same config, but the source's stage 2 replayed instances
    assert share_stage(source, plain, 2, second, handed)  # the same instances handed over: the same training
    # an earlier stage handed other instances: a different checkpoint under the same config
    other = small_config(tmp_path, "c").with_overrides(**{"engineer.spec": "replay", "arm": "other"})
    _finished_stage(other, 1, first, to_jsonl(_given(2, seed=10)))
    assert not share_stage(source, other, 2, second, handed)


def test_run__the_next_stage_takes_the_instances_its_previous_decision_recorded(tmp_path):
    config = small_config(tmp_path, "handed", **{"engineer.spec": "replay"})
    run = Run(config, log=lambda message: None)
    assert run.curriculum._given_instances(1) == ([], "") and run.curriculum._given_instances(2) == ([], "")
    given = _given(2)
    decision = make_decision("replay", CONFIG, CONFIG, "replay: 2 instances replayed", instances=given).to_dict()
    (run.curriculum.stage_dir(1)).mkdir(parents=True)
    (run.curriculum.stage_dir(1) / "decision.json").write_text(json.dumps(decision))
    taken, source = run.curriculum._given_instances(2)
    assert [item.to_dict() for item in taken] == [item.to_dict() for item in given]
    assert source.endswith("stage-01/decision.json")
    planned = Run(small_config(tmp_path, "planned", **{"engineer.plan_first": True}), log=lambda message: None)
    planned.curriculum.folder.plan_path().parent.mkdir(parents=True)
    planned.curriculum.folder.plan_path().write_text(json.dumps(decision))
    assert len(planned.curriculum._given_instances(1)[0]) == 2  # stage 1 takes the plan's


def test_run__an_engineer_that_writes_instances_reads_the_stage_s_bank_evidence_and_protected_sets(tmp_path):
    from policy.rollout import judge_episodes
    from policy.scripted import make_scripted
    from replays.types import ReplayHeader
    from replays.writer import write_replay

    run = Run(small_config(tmp_path, "material", **{"engineer.spec": "replay"}), log=lambda message: None)
    items = run.curriculum.evidence_items
    folder = run.curriculum.stage_dir(1)
    folder.mkdir(parents=True)
    header = ReplayHeader.new("material", 1, "validation", {"name": "random"}, run.config.validation.config.to_dict())
    write_replay(folder / "validation.mlr", header, judge_episodes(items, make_scripted("random").plans(items)))
    bank = _given(3)
    material = run.curriculum.material(1, bank, folder / "validation.mlr")
    assert material.stage == 1 and material.bank == tuple(bank) and len(material.evidence) == len(items)
    assert [episode.instance for episode in material.evidence] == [item.instance for item in items]
    assert material.protected == run.curriculum.sets.test | run.curriculum.sets.evidence_keys
    assert {item.instance.content_key() for item in items} <= material.protected


def _tampered(record: dict, how: str) -> dict:
    """``record`` (an instance record) tampered as a hostile user would: relabelled, an invalid plan, or a board
    of a shape the run never trains on."""
    record = json.loads(json.dumps(record))
    if how == "relabelled":
        record["optimal_makespan"] += 1
    elif how == "invalid plan":
        record["plan"] = [[0] * len(moves) for moves in record["plan"]]  # every agent waits: off its goal
    elif how == "large board":
        big = generate(StageConfig.from_dict({"agents": 5, "samples": 1, "seed": 3, "sizes": {
            10: {"data_ratio": 1.0, "hole_ratio": 0.1, "wait_ratio": 0.0}}})).instances[0]
        record = big.to_dict()
    return record


@pytest.mark.parametrize("how, field", [("relabelled", r"instances\[1\]: optimal_makespan = \d+"),
                                        ("invalid plan", r"instances\[1\]: plan = "),
                                        ("large board", r"instances\[1\] = 'a 10x10 board with 5 agents'")])
def test_run__handed_instances_read_back_are_certified_again_before_training(tmp_path, how, field):
    config = small_config(tmp_path, "tampered", **{"engineer.spec": "replay"})
    run = Run(config, log=lambda message: None)
    given = _given(2)
    decision = make_decision("replay", CONFIG, CONFIG, "replay: 2 instances replayed", instances=given).to_dict()
    path = run.curriculum.stage_dir(1) / "decision.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(decision))
    assert len(run.curriculum._given_instances(2)[0]) == 2  # as written: certified, taken
    decision["instances"][1] = _tampered(decision["instances"][1], how)
    path.write_text(json.dumps(decision))
    with pytest.raises(ConfigError, match=f"^{path}: {field}") as caught:
        run.curriculum._given_instances(2)
    assert "\n" not in str(caught.value)


def test_run__a_replay_buffer_read_back_is_certified_naming_the_file_and_entry(tmp_path):
    run = Run(small_config(tmp_path, "buffer", **{"engineer.spec": "replay"}), log=lambda message: None)
    entries = [{"instance": item.to_dict(), "seen": 1} for item in _given(3)]
    entries[2]["instance"]["needs_wait"] = not entries[2]["instance"]["needs_wait"]
    decision = make_decision("replay", CONFIG, CONFIG, "replay: nothing to replay",
                             details={"state": {"buffer": entries}}).to_dict()
    path = run.curriculum.stage_dir(1) / "decision.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(decision))
    with pytest.raises(ConfigError, match=rf"^{path}: details\.replay state\.buffer\[2\]\.instance: needs_wait = "):
        run.curriculum.decide(2, "unused", CONFIG, None, [], run.curriculum.stage_dir(2) / "decision.json")  # type: ignore[arg-type]


def test_check_bands__an_impossible_band_is_refused_before_anything_trains_and_a_possible_one_passes():
    from curriculum.config import preset
    from curriculum.loop.sets import check_bands

    check_bands(preset("small"))  # no bands: nothing generated
    check_bands(preset("small").with_overrides(**{"initial_config.sizes.6.max_makespan": 8}))
    for key, value in (("initial_config.sizes.6.max_makespan", 1), ("validation.config.sizes.3.min_makespan", 30)):
        with pytest.raises(ConfigError) as error:
            check_bands(preset("small").with_overrides(**{key: value}))
        assert error.value.field == key and error.value.value == value


def test_train__an_impossible_band_in_a_config_file_is_refused_naming_the_file(tmp_path):
    from curriculum.config import preset, save_run_config
    from tests.cli_runner import mapf_lake

    path = tmp_path / "run.yaml"
    save_run_config(preset("small").with_overrides(**{"initial_config.sizes.6.min_makespan": 99}), path)
    result = mapf_lake("train", "--config", str(path), "--print-config", check=False)
    assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"mapf-lake: error: {path}: initial_config.sizes.6.min_makespan = 99 is not "
                                    "allowed: makespan bounds this map size can meet"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    # the same band from --set on a file without it is the override's, not the file's: named as before
    save_run_config(preset("small"), path)
    result = mapf_lake("train", "--config", str(path), "--print-config", "--set",
                       "initial_config.sizes.6.min_makespan=99", check=False)
    assert result.returncode == 2 and result.stderr.startswith(
        "mapf-lake: error: initial_config.sizes.6.min_makespan = 99 is not allowed"), result.stderr
