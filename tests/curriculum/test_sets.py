"""The three sets of a run (training, evidence, test) never share an instance: by seed domain for every preset over
run seeds 0-50 and stages 0-20, and by content through the generator's protected-set exclusion."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curriculum.config import PRESETS, preset
from curriculum.loop.sets import (EVIDENCE_SEED_LIMIT, TRAINING_SEED_DOMAIN, RunSets, test_keys as suite_keys,
                             training_seed)
from simulator.config import StageConfig
from simulator.errors import ConfigError
from simulator.generator import generate
from simulator.suites import suite_cells


def _keys(items) -> set[bytes]:
    return {item.instance.content_key() for item in items}


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_training_seed__never_meets_an_evidence_or_test_seed_for_any_preset(name):
    config = preset(name)
    protected = {config.validation.config.seed} | {cell.seed for cell in suite_cells(config.evaluation_suite)}
    seeds = [training_seed(run_seed, stage) for run_seed in range(51) for stage in range(21)]
    assert len(set(seeds)) == len(seeds)  # every (run seed, stage) its own stream
    assert all(TRAINING_SEED_DOMAIN <= seed < 2**63 for seed in seeds)
    assert not protected & set(seeds)
    assert config.validation.config.seed < EVIDENCE_SEED_LIMIT
    # the collision the old arithmetic had: run seed 10, stage 7 landed on the evidence seed 10007
    assert training_seed(10, 7) != 10_007


@pytest.mark.parametrize("run_seed, stage", [(-1, 1), (2**31, 1), (0, -1), (0, 4096)])
def test_training_seed__refuses_values_outside_its_domain(run_seed, stage):
    with pytest.raises(ConfigError):
        training_seed(run_seed, stage)


def test_content_key__equal_exactly_for_equal_instances():
    items = generate(StageConfig.from_dict({"agents": 2, "samples": 60, "seed": 3, "sizes": {
        3: {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.3},
        4: {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.3}}})).instances
    for a in items[:20]:
        for b in items[:20]:
            assert (a.instance.content_key() == b.instance.content_key()) == (a.instance == b.instance)


def _three_by_three(samples: int, seed: int) -> StageConfig:
    return StageConfig.from_dict({"agents": 2, "samples": samples, "seed": seed,
                                  "sizes": {3: {"data_ratio": 1.0, "hole_ratio": 0.2, "wait_ratio": 0.3}}})


def test_generate__exclusion_keeps_protected_boards_out_where_seeds_alone_do_not():
    """3x3 boards with two agents are few: two differently seeded sets share instances unless excluded."""
    protected = generate(_three_by_three(300, 1)).instances
    plain = generate(_three_by_three(600, 2))
    assert _keys(plain.instances) & _keys(protected), "the check below could not fail: no overlap to remove"
    kept = generate(_three_by_three(600, 2), exclude=frozenset(_keys(protected)))
    assert not _keys(kept.instances) & _keys(protected)
    assert kept.reports[3].rejected_protected > 0 and plain.reports[3].rejected_protected == 0
    assert len(kept.instances) == 600 and all(item.instance.content_key() not in _keys(protected)
                                              for item in kept.instances)


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**40), other=st.integers(0, 2**40))
def test_generate__an_empty_exclusion_changes_nothing_and_any_exclusion_is_honoured(seed, other):
    config = _three_by_three(40, seed)
    assert generate(config, exclude=frozenset()).checksum() == generate(config).checksum()
    protected = frozenset(_keys(generate(_three_by_three(120, other)).instances))
    assert not _keys(generate(config, exclude=protected).instances) & protected


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_run_sets__evidence_and_test_are_disjoint_for_every_preset(name):
    config = preset(name)
    sets = RunSets.build(config.evaluation_suite, config.validation.config, config.validation.samples)
    assert sets.test == suite_keys(config.evaluation_suite) and len(sets.test) > 0
    assert len(sets.evidence.instances) == config.validation.samples
    assert not sets.evidence_keys & sets.test


def test_run_sets__training_excludes_test_and_evidence_over_seeds_and_stages():
    """The ``small`` preset's sets; training stages (3x3, the crowded size, at the preset's mix) over seeds and
    stages, each checked against both protected sets."""
    config = preset("small")
    sets = RunSets.build(config.evaluation_suite, config.validation.config, config.validation.samples)
    protected = sets.test | sets.evidence_keys
    for run_seed in (0, 7, 50):
        for stage in (0, 1, 20):
            stage_config = replace(config.initial_config, samples=200, seed=training_seed(run_seed, stage))
            items = sets.training(stage_config).instances
            assert len(items) == 200 and not _keys(items) & protected
    with pytest.raises(ConfigError, match="training seed"):
        sets.training(replace(config.initial_config, seed=5))


def test_run_sets__refuses_an_evidence_seed_outside_its_domain():
    config = preset("tiny")
    with pytest.raises(ConfigError, match="validation.config.seed"):
        RunSets.build(config.evaluation_suite, replace(config.validation.config, seed=2**62 + 1), 10)


def test_run__a_folder_made_before_the_three_set_protocol_is_not_resumed(tmp_path):
    """A protocol-1 folder trained on other instances (old seeds, no exclusion): resuming it would mix two
    protocols in one run, so it is refused with a message that says what to do; a protocol-2 folder resumes."""
    import json

    from curriculum.loop.folder import RUN_PROTOCOL
    from curriculum.training.run import Run

    config = preset("tiny").with_overrides(name="old", output_dir=str(tmp_path))
    folder = tmp_path / "old"
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps({"run_config": config.to_dict(), "versions": {}}))
    with pytest.raises(ConfigError, match="protocol 2") as refused:
        Run(config).curriculum.open()
    assert "start a new run" in str(refused.value)
    (folder / "manifest.json").write_text(json.dumps({"protocol": RUN_PROTOCOL, "run_config": config.to_dict()}))
    Run(config).curriculum.open()  # the same config, the current protocol: accepted
