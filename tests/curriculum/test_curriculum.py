"""The public ``Curriculum`` (``curriculum/loop/curriculum.py``) on its own: importing it loads no trainer, its
sampling is certified and seeded, every registered engineer decides through it, an engineer that raises or a
proposal the generator cannot fill is a recorded fallback, it keeps serving after the last stage, ``llm:self`` asks
the trainer's model in memory, and its order holds (the test set only after the last boundary). Its use in TRL's
trainers and verl is in ``test_trl_plugins.py`` and ``test_verl_sampler.py``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from curriculum.loop.curriculum import Curriculum
from simulator.errors import ConfigError
from tests.small_run import small_config as _config

ROOT = Path(__file__).resolve().parents[2]


def test_curriculum__importing_it_loads_no_trainer_torch_or_transformers():
    code = ("import sys, curriculum.loop.curriculum, curriculum.loop.validation; "
            "print(sorted(m for m in ('torch', 'transformers', 'trl', 'datasets', 'accelerate') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_curriculum__sampling_is_certified_seeded_and_apart_from_the_protected_sets(tmp_path):
    curriculum = Curriculum(_config(tmp_path, "sample"), log=lambda line: None).open()
    with pytest.raises(ConfigError, match="begin"):
        curriculum.sample(3)
    curriculum._begun = True  # begin() validates a model; the sampling below needs none
    first = curriculum.sample(40)
    again = Curriculum(_config(tmp_path, "sample"), log=lambda line: None).open()
    again._begun = True
    assert [item.instance.content_key() for item in again.sample(40)] == [item.instance.content_key() for item in first]
    protected = curriculum.sets.test | curriculum.sets.evidence_keys
    assert not {item.instance.content_key() for item in first} & protected
    assert all(item.plan is not None and item.optimal_makespan >= 0 for item in first)
    row = curriculum.training_row(first[0])
    assert {"prompt", "instance", "optimal_makespan", "horizon"} <= set(row)
    with pytest.raises(ConfigError, match="n"):
        curriculum.sample(-1)


def _policy_run(tmp_path: Path, name: str, spec: str):
    """A curriculum closed by a scripted policy (no model): every boundary's evidence is the greedy policy's."""
    from policy.policies import make_policy

    config = _config(tmp_path, name, **{"engineer.spec": spec, "initial_config.samples": 64})
    curriculum = Curriculum(config, log=lambda line: None).open()
    policy = make_policy("greedy", style=config.prompt_style)
    curriculum.begin(policy)
    return curriculum, policy


def test_curriculum__every_registered_engineer_decides_through_it(tmp_path):
    from engineer.engineers import ENGINEERS

    # llm:BACKEND needs a model; replay-decisions another run's records (tests/curriculum/test_open_loop_controls.py)
    names = [name for name, kind in ENGINEERS.items() if not kind.takes_target and name != "replay-decisions"]
    assert len(names) >= 10
    for name in names:
        curriculum, policy = _policy_run(tmp_path, name, name)
        record = curriculum.end_stage(policy)
        assert record.stage == 1 and record.decision.engineer.startswith(name), name
        assert (curriculum.stage_dir(1) / "decision.json").exists() and curriculum.stage == 2
        assert curriculum.prepare_stage().config.agents == record.next_config.agents  # the next stage generates


def test_curriculum__an_engineer_that_raises_keeps_the_config_and_records_why(tmp_path, monkeypatch):
    from engineer.rule import RuleEngineer

    def broken(self, context, config, seed=0):
        raise RuntimeError("connection reset by peer")

    monkeypatch.setattr(RuleEngineer, "propose", broken)
    curriculum, policy = _policy_run(tmp_path, "raises", "rule")
    record = curriculum.end_stage(policy)
    assert record.decision.outcome == "rejected" and "RuntimeError: connection reset" in record.decision.reason
    assert record.next_config == record.config.__class__.from_dict({**record.config.to_dict(),
                                                                    "seed": curriculum.current.seed})


def test_curriculum__a_proposal_the_generator_cannot_fill_falls_back_before_the_next_stage(tmp_path, monkeypatch):
    from engineer.decision import make_decision
    from engineer.rule import RuleEngineer
    from simulator.config import StageConfig

    impossible = StageConfig.from_dict({"agents": 2, "samples": 64, "seed": 1, "sizes": {
        3: {"data_ratio": 1.0, "hole_ratio": 0.2, "wait_ratio": 0.3, "min_makespan": 9}}})

    def unfillable(self, context, config, seed=0):
        return make_decision("rule", config, impossible, "accepted", rationale="longer plans on 3x3")

    monkeypatch.setattr(RuleEngineer, "propose", unfillable)
    curriculum, policy = _policy_run(tmp_path, "unfillable", "rule")
    record = curriculum.end_stage(policy)
    assert record.decision.outcome == "rejected" and "cannot fill" in record.decision.reason
    saved = json.loads((curriculum.stage_dir(1) / "decision.json").read_text())
    assert saved["proposal"] and "cannot fill" in saved["reason"]  # the proposal stays in the record
    assert curriculum.prepare_stage().config.sizes.keys() == record.config.sizes.keys()


def test_curriculum__a_stage_larger_than_the_run_s_first_is_cut_to_it_and_the_cut_recorded(tmp_path, monkeypatch):
    """An answer of a million instances (what smol-self's trainee wrote) would make one stage days long: the count
    is cut to the run's first-stage count (64 here), the rest of the answer kept, and the cut is a recorded repair."""
    from engineer.decision import make_decision
    from engineer.rule import RuleEngineer

    def huge(self, context, config, seed=0):
        bigger = config.__class__.from_dict({**config.to_dict(), "samples": 1_000_000, "slip": 0.1})
        return make_decision("rule", config, bigger, "accepted", repairs=["seed: kept"], rationale="more of it")

    monkeypatch.setattr(RuleEngineer, "propose", huge)
    curriculum, policy = _policy_run(tmp_path, "huge", "rule")
    record = curriculum.end_stage(policy)
    assert record.decision.accepted and record.next_config.samples == 64 and record.next_config.slip == 0.1
    saved = json.loads((curriculum.stage_dir(1) / "decision.json").read_text())
    assert saved["config"]["samples"] == 64 and saved["proposal"]["samples"] == 1_000_000
    assert saved["repairs"] == ["seed: kept", "samples: 1000000 -> 64 (a stage has at most the run's first-stage "
                                "count of instances)"]
    assert "samples" not in " ".join(saved["diff"]) and "slip: 0.0 -> 0.1" in saved["diff"]
    assert len(curriculum.prepare_stage().instances) == 64


def test_curriculum__sampling_after_the_last_stage_keeps_serving_its_instances(tmp_path):
    curriculum, policy = _policy_run(tmp_path, "after", "fixed")
    curriculum.end_stage(policy)
    curriculum.end_stage(policy)
    assert curriculum.finished and len(curriculum.sample(5)) == 5
    with pytest.raises(ConfigError, match="every stage is finished"):
        curriculum.end_stage(policy)


def test_curriculum__llm_self_asks_the_trainer_s_model_in_memory_and_garbage_is_a_recorded_fallback(tmp_path):
    """``llm:self`` at a boundary of a user's trainer: the model in memory (``LoadedModel``) answers the evidence set
    and writes the engineer's answer; a random model's answer is garbage, so the decision is the recorded fallback."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from curriculum.loop.validation import LoadedModel
    from policy.models import init_tiny_model

    folder = init_tiny_model(tmp_path / "init", seed=0)
    loaded = LoadedModel(AutoModelForCausalLM.from_pretrained(str(folder)), AutoTokenizer.from_pretrained(str(folder)))
    config = _config(tmp_path, "self", **{"engineer.spec": "llm:self", "engineer.options": {"max_new_tokens": 24},
                                          "warm_start.enabled": False, "initial_config.samples": 64})
    curriculum = Curriculum(config, log=lambda line: None).open()
    curriculum.begin(loaded)
    record = curriculum.end_stage(loaded)
    assert record.decision.engineer == "llm:hf:trainer-model" and record.decision.outcome == "rejected"
    assert record.next_config.sizes == record.config.sizes and record.model == "trainer-model"


def test_curriculum__a_start_model_of_another_prompt_style_is_refused(tmp_path):
    from policy.models import init_tiny_model
    from policy.prompts import save_checkpoint_style

    folder = init_tiny_model(tmp_path / "init", seed=0)
    save_checkpoint_style(folder, "natural")
    curriculum = Curriculum(_config(tmp_path, "style", **{"prompt_style": "compact"}), log=lambda line: None).open()
    with pytest.raises(ConfigError, match="prompt_style = 'compact'.*natural"):
        curriculum.begin(str(folder))


def test_curriculum__the_test_set_is_refused_before_the_last_boundary(tmp_path):
    curriculum = Curriculum(_config(tmp_path, "early"), log=lambda line: None).open()
    with pytest.raises(ConfigError, match="begin"):
        curriculum.evaluate("any model")
    curriculum._begun = True  # begin() validates a model; the refusal needs none
    with pytest.raises(ConfigError, match="evaluate after the last stage's boundary"):
        curriculum.evaluate("any model")
    assert not (curriculum.dir / "final").exists()
