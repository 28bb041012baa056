"""The CPU rehearsal of a preset's path (``train --rehearse``) and the paper presets' decoding settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from curriculum.config import preset
from curriculum.loop.rehearsal import rehearsal_config
from replays.reader import ReplayReader
from simulator.errors import ConfigError
from simulator.suites import suite_size


def test_paper_preset__thinking_decoding_and_an_engineer_with_room_to_think():
    paper, cheap = preset("qwen3-4b"), preset("qwen3-4b-nothink")
    assert paper.training.enable_thinking and paper.training.max_completion_length >= 7_464  # the paper's 3x3 answer
    v = paper.validation
    assert (v.temperature, v.top_p, v.top_k) == (0.6, 0.95, 20) and v.max_new_tokens >= 7_464
    assert paper.engineer.options["enable_thinking"] and paper.engineer.options["max_new_tokens"] >= 10_000
    assert not cheap.training.enable_thinking and cheap.validation.temperature == 0.0 and not cheap.engineer.options
    assert cheap.training.use_vllm and cheap.evaluation_suite == paper.evaluation_suite == "paper"


@pytest.mark.parametrize("field, value", [
    ("validation.temperature", -0.1),
    ("validation.top_p", 0.0),
    ("validation.top_k", -1),
    ("validation.backend", "tpu"),
    ("engineer.options", {"nonsense": 1}),
    ("engineer.options", {"max_new_tokens": 0}),
    ("engineer.options", {"backend": "x"}),
])
def test_run_config__bad_decoding_or_engineer_options_name_the_field(field, value):
    with pytest.raises(ConfigError, match=field.split(".")[0]):
        preset("qwen3-4b").with_overrides(**{field: value})


def test_rehearsal_config__keeps_the_path_and_shrinks_the_budgets(tmp_path):
    lines = []
    config = rehearsal_config(preset("qwen3-4b").with_overrides(output_dir=str(tmp_path)), log=lines.append)
    assert config.name == "qwen3-4b-rehearsal" and config.stages == 2 and config.evaluation_suite == "paper-quick"
    assert config.model == f"hf:{tmp_path / 'qwen3-4b-rehearsal' / 'rehearsal-model'}"
    assert config.prompt_style == "natural" and config.training.enable_thinking and config.engineer.spec == "llm:self"
    assert config.engineer.options["enable_thinking"] and config.engineer.options["max_new_tokens"] == 48
    assert (config.validation.temperature, config.validation.top_k) == (0.6, 20)
    assert config.training.steps == 2 and config.validation.samples == 8
    assert config.initial_config.sizes == preset("qwen3-4b").initial_config.sizes  # same sizes, fewer samples
    assert not config.training.use_vllm and any("transformers generates" in line for line in lines)
    from transformers import AutoConfig, AutoTokenizer

    model_dir = config.model.split(":", 1)[1]
    assert AutoConfig.from_pretrained(model_dir).max_position_embeddings == 40_960
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    assert tokenizer("Hello world")["input_ids"] == [9707, 1879]  # the real Qwen3 ids
    assert rehearsal_config(config, log=lines.append).name == config.name  # a second pass changes nothing
    tiny = rehearsal_config(preset("tiny").with_overrides(output_dir=str(tmp_path)), log=lines.append)
    assert tiny.model == "tiny" and tiny.warm_start.steps == 2


def _run(argv):
    from curriculum.cli import main

    assert main(argv) == 0


@pytest.mark.slow
@pytest.mark.parametrize("name, extra", [("qwen3-4b", []), ("qwen3-4b-nothink", ["--set", "training.lora=true"])])
def test_rehearsal__the_whole_loop_of_the_paper_presets_runs_on_a_cpu(tmp_path, name, extra):
    _run(["train", "--preset", name, "--rehearse", "--output-dir", str(tmp_path), *extra])
    run = tmp_path / f"{name}-rehearsal"
    thinking = name == "qwen3-4b"
    for stage in (1, 2):
        record = json.loads((run / f"stage-0{stage}" / "stage.json").read_text())
        assert record["train"]["steps"] == 2
        lora = bool(extra)
        assert (record["train"]["trainable_parameters"] < record["train"]["parameters"]) == lora
        decision = json.loads((run / f"stage-0{stage}" / "decision.json").read_text())
        assert decision["details"]["prompt_form"] == "chat"
        assert decision["details"]["prompt_tokens"] > 3_000  # the engineer's prompt at its real length, not cut
        assert decision["outcome"] in ("changed", "kept", "rejected")
        with ReplayReader(run / f"stage-0{stage}" / "validation.mlr") as reader:
            sampling = reader.header.policy["sampling"]
        assert sampling["enable_thinking"] is thinking
        assert sampling["temperature"] == (0.6 if thinking else 0.0) and sampling["top_k"] == (20 if thinking else 0)
    table = json.loads((run / "final" / "table.json").read_text())
    assert table["suite"] == "paper-quick" and table["policy"]["sampling"]["enable_thinking"] is thinking
    assert sum(cell["episodes"] for cell in table["cells"].values()) == suite_size("paper-quick")
    assert Path(run / "manifest.json").exists()
