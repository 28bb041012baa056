"""Atomic writes: a file or folder is whole or absent, whatever happens half-way."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from curriculum.loop.curriculum import stage_seed
from curriculum.training.run import Run
from curriculum.loop.sharing import share_stage, share_warm_start
from simulator.config import save_config
from simulator.atomic import atomic_folder, atomic_write
from tests.small_run import small_config


def test_atomic_write__replaces_whole_and_leaves_no_temp_file(tmp_path):
    path = tmp_path / "a.txt"
    atomic_write(path, "one")
    atomic_write(path, "two")
    assert path.read_text() == "two" and [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_atomic_folder__appears_only_when_the_block_ends(tmp_path):
    target = tmp_path / "model"
    with atomic_folder(target) as building:
        (building / "config.json").write_text("{}")
        assert not target.exists()
    assert (target / "config.json").read_text() == "{}"
    assert [p.name for p in tmp_path.iterdir()] == ["model"]


def test_atomic_folder__an_exception_leaves_nothing_and_a_finished_folder_is_never_replaced(tmp_path):
    target = tmp_path / "model"
    with pytest.raises(KeyboardInterrupt):
        with atomic_folder(target) as building:
            (building / "config.json").write_text("{}")
            raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []
    target.mkdir()
    with pytest.raises(FileExistsError):
        with atomic_folder(target):
            pass


def test_run__rebuilds_a_half_written_model_init_a_kill_left(tmp_path):
    """A kill while the embedded model was being written left config and tokenizer but no weights: a resume
    must rebuild the folder, not hand the trainer a model it cannot load."""
    run = Run(small_config(tmp_path, "half"), log=lambda message: None)
    folder = run.dir / "model-init"
    whole = {p.name: p.read_bytes() for p in Path(run.initial_model()).iterdir()}
    (folder / "model.safetensors").unlink()
    assert set(whole) >= {"config.json", "tokenizer.json", "model.safetensors"}
    rebuilt = {p.name: p.read_bytes() for p in Path(run.initial_model()).iterdir()}
    assert rebuilt == whole  # same seed, same weights


def test_share_warm_start__copies_whole_folders_and_keeps_the_target_s_own(tmp_path):
    source, target = tmp_path / "a", tmp_path / "b"
    (source / "model-init").mkdir(parents=True)
    (source / "model-init" / "config.json").write_text("{}")
    (source / "warm_start" / "trainer").mkdir(parents=True)
    (source / "warm_start" / "model.safetensors").write_text("w")
    (target / "untrained").mkdir(parents=True)
    (target / "untrained" / "summary.json").write_text("mine")
    share_warm_start(source, target)
    assert (target / "model-init" / "config.json").read_text() == "{}"
    assert (target / "warm_start" / "model.safetensors").read_text() == "w"
    assert not (target / "warm_start" / "trainer").exists()  # optimizer state is not copied
    assert (target / "untrained" / "summary.json").read_text() == "mine"
    assert sorted(p.name for p in target.iterdir()) == ["model-init", "untrained", "warm_start"]


def _finished_stage(run, number: int, config) -> Path:
    """A stage folder as a finished stage leaves it (file contents are placeholders; the config is real)."""
    stage = run.run_dir / f"stage-{number:02d}"
    (stage / "model").mkdir(parents=True)
    (stage / "model" / "model.safetensors").write_text(f"w{number}")
    for name in ("validation.mlr", "summary.json", "stage.json", "decision.json"):
        (stage / name).write_text(name)
    save_config(config, stage / "config.yaml")
    return stage


def _stage_config(run, number: int, **changes):
    return replace(run.initial_config, seed=stage_seed(run.seed, number), **changes)


def test_share_stage__stage_one_only_between_arms_that_differ_in_the_engineer(tmp_path):
    source = small_config(tmp_path, "a").with_overrides(**{"engineer.spec": "rule", "arm": "rule"})
    _finished_stage(source, 1, _stage_config(source, 1))
    same = small_config(tmp_path, "b").with_overrides(**{"engineer.spec": "fixed", "arm": "fixed"})
    other = small_config(tmp_path, "c").with_overrides(**{"engineer.spec": "fixed", "training.learning_rate": 1e-4})
    assert share_stage(source, same, 1, _stage_config(same, 1))
    shared = same.run_dir / "stage-01"
    assert sorted(p.name for p in shared.iterdir()) == ["config.yaml", "model", "shared_from.txt", "summary.json",
                                                        "validation.mlr"]
    assert (shared / "shared_from.txt").read_text() == str(source.run_dir)  # the run that trained and timed it
    assert (shared / "model" / "model.safetensors").read_text() == "w1"  # the decision is the target's own to make
    assert not share_stage(source, same, 1, _stage_config(same, 1))  # already there: nothing replaced
    assert not share_stage(source, other, 1, _stage_config(other, 1)) and not other.run_dir.exists()
    # a rejection-sampling stage's own samples per instance travel with it (the replay engineer reads them)
    (source.run_dir / "stage-01" / "outcomes.json").write_text('{"outcomes": {}}')
    third = small_config(tmp_path, "e").with_overrides(**{"engineer.spec": "replay", "arm": "replay"})
    assert share_stage(source, third, 1, _stage_config(third, 1))
    assert (third.run_dir / "stage-01" / "outcomes.json").read_text() == '{"outcomes": {}}'
    (source.run_dir / "stage-01" / "stage.json").unlink()
    fresh = small_config(tmp_path, "d")
    assert not share_stage(source, fresh, 1, _stage_config(fresh, 1))  # an unfinished stage is not shared


def test_share_stage__a_later_stage_only_when_every_stage_config_so_far_is_the_same(tmp_path):
    source = small_config(tmp_path, "a").with_overrides(**{"engineer.spec": "rule", "arm": "rule"})
    kept = _stage_config(source, 2)  # the engineer kept the config: stage 2 trains on it again
    _finished_stage(source, 1, _stage_config(source, 1))
    _finished_stage(source, 2, kept)
    agrees = small_config(tmp_path, "b").with_overrides(**{"engineer.spec": "fixed", "arm": "fixed"})
    assert share_stage(source, agrees, 1, _stage_config(agrees, 1))
    moved = _stage_config(agrees, 2, slip=0.1)
    assert not share_stage(source, agrees, 2, moved)  # this engineer changed the config: it trains its own
    assert share_stage(source, agrees, 2, kept)
    assert (agrees.run_dir / "stage-02" / "model" / "model.safetensors").read_text() == "w2"
    # a copy of a copy names the run that trained the stage
    (agrees.run_dir / "stage-01" / "stage.json").write_text("its own record")  # as its Run writes it
    third = small_config(tmp_path, "c").with_overrides(**{"engineer.spec": "mutate", "arm": "mutate"})
    assert share_stage(agrees, third, 1, _stage_config(third, 1))
    assert (third.run_dir / "stage-01" / "shared_from.txt").read_text() == str(source.run_dir)
    # a different stage 1 means a different checkpoint under stage 2, even when stage 2's config is the same
    fourth = small_config(tmp_path, "d").with_overrides(**{"engineer.spec": "random", "arm": "random"})
    _finished_stage(fourth, 1, _stage_config(fourth, 1, slip=0.2))
    assert not share_stage(source, fourth, 2, kept)


def test_run__a_manifest_written_before_a_field_existed_still_matches_its_config(tmp_path):
    import json

    from simulator.errors import ConfigError

    config = small_config(tmp_path, "old")
    run = Run(config, log=lambda message: None)
    run.curriculum.open()
    manifest = config.run_dir / "manifest.json"
    data = json.loads(manifest.read_text())
    del data["run_config"]["training"]["loss_type"]  # as a run recorded by an older version has it
    manifest.write_text(json.dumps(data))
    Run(config, log=lambda message: None).curriculum.open()  # the missing field has its default: the same run
    with pytest.raises(ConfigError, match="the same run config"):
        Run(config.with_overrides(**{"training.loss_type": "grpo"}), log=lambda message: None).curriculum.open()
