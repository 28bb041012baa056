"""Run configs (``curriculum/config.py``): every preset validates and survives a YAML round trip, a bad value or a
``--set`` pair names its field in one line, and a YAML alias bomb or a huge value is refused quickly."""

from __future__ import annotations

import time

import pytest

from curriculum.config import PRESETS, RunConfig, preset
from simulator.errors import ConfigError


def test_presets__every_preset_has_a_help_line():
    from curriculum.config import PRESET_SUMMARIES

    assert set(PRESET_SUMMARIES) == set(PRESETS)


def test_presets__small_mixed_is_small_with_a_long_warm_start_on_2_and_3_agents():
    # its 3-agent column is a transfer column: the warm start has 3-agent boards, the stages and validation do not
    small, mixed = preset("small").to_dict(), preset("small-mixed").to_dict()
    warm = mixed["warm_start"]
    assert warm["config"]["agents"] == [2, 3] and warm["steps"] == 2000
    assert warm["config"]["sizes"] == small["warm_start"]["config"]["sizes"]
    for document in (small, mixed):
        document.pop("name"), document["warm_start"].pop("config"), document["warm_start"].pop("steps")
    assert mixed == small and small["initial_config"]["agents"] == 2 and small["evaluation_suite"] == "test-small"


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets__validate_and_survive_a_yaml_round_trip(tmp_path, name):
    from curriculum.config import load_run_config, save_run_config

    config = preset(name)
    save_run_config(config, tmp_path / "run.yaml")
    assert load_run_config(tmp_path / "run.yaml") == config


@pytest.mark.parametrize("field, value", [
    ("training.generations", 1),
    ("training.learning_rate", 0.0),
    ("training.rewards", {"nonsense": 1.0}),
    ("training.vllm_mode", "remote"),
    ("warm_start.steps", 0),
    ("validation.samples", -5),
    ("cpu_threads", 0),
    ("cpu_threads", 1.5),
    ("stages", 0),
    ("prompt_style", "verbose"),
    ("evaluation_suite", "no-such-suite"),
    ("engineer.context", ["behavior", "gossip"]),
    ("training.lora", "maybe"),
    ("training.use_vllm", 1),
    ("warm_start.enabled", "yes please"),
    ("training.trainer", "ppo"),
    ("training.rft_rounds", 0),
    ("training.rft_min_kept", 0),
    ("validation.sampled_k", -1),
    ("arm", "a/b"),
    ("model", "huge"),
    ("initial_config.sizes.3.hole_ratio", 5.0),
    ("validation.config.agents", 0),
    ("warm_start.config.samples", 0),
])
def test_run_config__bad_value_names_the_field(field, value):
    with pytest.raises(ConfigError) as caught:
        preset("tiny").with_overrides(**{field: value})
    assert caught.value.field.startswith(field)


def test_run_config__holds_its_stage_configs_as_validated_stage_config_objects():
    from dataclasses import replace

    from simulator.config import StageConfig

    config = preset("small")
    for part in (config.initial_config, config.warm_start.config, config.validation.config):
        assert isinstance(part, StageConfig)
    assert preset("qwen3-4b").warm_start.config is None  # no warm start: written as {} and read back as None
    assert preset("qwen3-4b").to_dict()["warm_start"]["config"] == {}
    changed = config.with_overrides(**{"initial_config.sizes.6.wait_ratio": 0.5})
    assert changed.initial_config.sizes[6].wait_ratio == 0.5 and config.initial_config.sizes[6].wait_ratio == 0.3
    # a run config built from objects is the one built from the documents
    assert replace(config, initial_config=config.initial_config.to_dict()) == config
    with pytest.raises(ConfigError, match="initial_config"):
        replace(config, initial_config=None)
    with pytest.raises(ConfigError, match="validation.config"):
        RunConfig.from_dict({**config.to_dict(), "validation": {"samples": 10}})


def test_run_config__unknown_keys_and_presets_list_the_allowed_ones():
    with pytest.raises(ConfigError, match="training.stpes"):
        RunConfig.from_dict({"training": {"stpes": 3}})
    with pytest.raises(ConfigError, match="a run config key"):
        RunConfig.from_dict({"trainnig": {}})
    with pytest.raises(ConfigError, match="qwen3-4b"):
        preset("huge")


@pytest.mark.parametrize("pair, field", [
    ("name=..", "name"),
    ("name=.", "name"),
    ("name=a\\b", "name"),
    ("training.steps=[1", "--set training.steps"),
    ("bogus.key=1", "bogus.key"),
    ("training.steps.x=1", "training.steps.x"),
    ("training.bogus=1", "training.bogus"),
    ("engineer.context=5", "engineer.context"),
    ("training.steps=" + "9" * 5000, "--set training.steps"),
    ("training.steps=&a [1]", "--set training.steps"),
    ("training.learning_rate=1e309", "--set training.learning_rate"),  # infinite: refused as read, named as typed
])
def test_set_overrides__bad_pairs_name_the_key_in_one_line(pair, field):
    from curriculum.config import parse_overrides

    with pytest.raises(ConfigError) as caught:
        preset("tiny").with_overrides(**parse_overrides([pair]))
    assert caught.value.field == field and len(str(caught.value)) < 400


def test_set_overrides__a_misspelt_key_is_answered_with_the_closest_ones():
    with pytest.raises(ConfigError, match=r"closest: weight_average; `mapf-lake train --print-config` lists them"):
        preset("tiny").with_overrides(**{"training.weight_avg": 1})
    with pytest.raises(ConfigError, match=r"steps"):  # a short section lists all its keys
        preset("tiny").with_overrides(**{"warm_start.stepz": 1})


def test_set_overrides__open_sections_take_new_keys_which_their_reader_checks():
    config = preset("small").with_overrides(**{"engineer.spec": "progress", "engineer.options.scale": "absolute",
                                               "training.rewards.progress": 0.5})
    assert config.engineer.options == {"scale": "absolute"} and config.training.rewards["progress"] == 0.5
    with pytest.raises(ConfigError, match="one of logit, absolute"):
        preset("small").with_overrides(**{"engineer.spec": "progress", "engineer.options.scale": "log"})
    with pytest.raises(ConfigError, match="a reward among"):
        preset("small").with_overrides(**{"training.rewards.bogus": 1.0})


@pytest.mark.parametrize("key, value, read", [
    ("initial_config.sizes.3.min_makespan", 4, lambda c: c.initial_config.sizes[3].min_makespan),
    ("initial_config.sizes.6.max_makespan", 9, lambda c: c.initial_config.sizes[6].max_makespan),
    ("validation.config.sizes.4.max_makespan", 6, lambda c: c.validation.config.sizes[4].max_makespan),
    ("warm_start.config.sizes.5.min_makespan", 2, lambda c: c.warm_start.config.sizes[5].min_makespan),
])
def test_set_overrides__the_optional_makespan_bounds_of_a_size_can_be_set(key, value, read):
    assert read(preset("tiny").with_overrides(**{key: value})) == value


@pytest.mark.parametrize("changes, field", [
    ({"initial_config.sizes.3.min_makespan": 0}, "initial_config.sizes.3.min_makespan"),
    ({"initial_config.sizes.3.min_makespan": 5, "initial_config.sizes.3.max_makespan": 4},
     "initial_config.sizes.3.max_makespan"),
    ({"initial_config.sizes.3.bogus": 1}, "initial_config.sizes.3.bogus"),
    ({"initial_config.min_makespan": 1}, "initial_config.min_makespan"),
    ({"training.sizes.3.min_makespan": 1}, "training.sizes.3.min_makespan"),
])
def test_set_overrides__makespan_bounds_are_checked_and_only_under_a_stage_configs_sizes(changes, field):
    with pytest.raises(ConfigError) as caught:
        preset("tiny").with_overrides(**changes)
    assert caught.value.field == field, str(caught.value)


def test_set_overrides__exponent_numbers_are_numbers():
    from curriculum.config import parse_overrides

    config = preset("tiny").with_overrides(**parse_overrides(["training.learning_rate=5e-5", "name=ok-name"]))
    assert config.training.learning_rate == 5e-5 and config.name == "ok-name"


def test_load_run_config__refuses_an_alias_bomb_quickly(tmp_path):
    from curriculum.config import load_run_config

    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 12)]
    (tmp_path / "bomb.yaml").write_text("\n".join(lines) + "\nname: *a11\n")
    start = time.perf_counter()
    with pytest.raises(ConfigError, match="anchors and aliases"):
        load_run_config(tmp_path / "bomb.yaml")
    assert time.perf_counter() - start < 5


def test_config_error__never_expands_a_huge_value_to_print_it():
    nested = ["x"] * 9
    for _ in range(12):
        nested = [nested] * 9  # 9**13 leaves if expanded
    start = time.perf_counter()
    message = str(ConfigError("field", nested, "anything"))
    assert time.perf_counter() - start < 1 and len(message) < 200
    assert "about 5001 digits" in str(ConfigError("field", 10**5000, "anything"))
