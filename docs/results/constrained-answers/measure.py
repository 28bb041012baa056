"""Constrained engineer answers on SmolLM2-135M-Instruct: grammar libraries compared on the real engineer prompt.

For each arm (``xgrammar``; ``llguidance``; ``free``: no grammar, the free-text path; and with ``--arms``:
``xgrammar-compact``, xgrammar with llguidance's separators; ``outlines-core``, its regex of the schema walked over
the vocabulary; ``lm-format-enforcer``, its JSON Schema parser), three sampled answers (seeds 0, 1, 2) to the ``llm:self`` engineer prompt of the ``demo`` preset (``curriculum.benches.tokens.
engineer_inputs``: the greedy scripted policy's judged episodes on the preset's validation set), through
``engineer.llm.LLMEngineer`` on one loaded ``hf:`` backend, with the answer schema of
``engineer.answer_schema.answer_json_schema`` and no free whitespace. Per answer: seconds, tokens, whether it
parses as JSON and validates against the schema, the decision's outcome and reason, and the grammar's own time
per generated token (mask computation and masking inside the logits processor) and the seconds spent compiling the
schema for the tokenizer (outlines-core builds its whole index there).

    python docs/results/constrained-answers/measure.py --model /tmp/smol --out results.json

``--model``: a folder from ``mapf-lake model init smollm2 --out DIR``. llguidance runs through its numpy helpers
(its torch helper compiles a kernel with torch.compile, which a CPU-only install may not have a compiler for).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from importlib import metadata
from typing import Any

ARMS = ("xgrammar", "llguidance", "free")
EXTRA_ARMS = ("xgrammar-compact", "outlines-core", "lm-format-enforcer")  # xgrammar-compact: xgrammar writing ","
# and ":" without spaces, as llguidance does


class Timed:
    """Wraps a logits processor and adds up the seconds its calls take."""

    def __init__(self, inner: Any, clock: dict) -> None:
        self.inner, self.clock = inner, clock

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        started = time.perf_counter()
        try:
            return self.inner(input_ids, scores)
        finally:
            self.clock["seconds"] += time.perf_counter() - started
            self.clock["calls"] += 1


def use_xgrammar(backend: Any, compact: bool = False) -> None:
    """Swap the backend's grammar library (llguidance, ``policy.backend_hf.GrammarProcessor``) for xgrammar and its
    transformers processor; ``compact``: the separators llguidance writes ("," and ":", no spaces) instead of
    xgrammar's ", " and ": "."""
    import xgrammar
    from xgrammar.contrib.hf import LogitsProcessor

    output = backend.model.get_output_embeddings().weight.shape[0]
    info = xgrammar.TokenizerInfo.from_huggingface(backend.tokenizer, vocab_size=output, stop_token_ids=backend.eos_ids)
    compiler = xgrammar.GrammarCompiler(info)
    separators = {"separators": (",", ":")} if compact else {}
    backend._compiled = lambda schema: compiler.compile_json_schema(json.dumps(schema), any_whitespace=False,
                                                                    **separators)
    backend._grammar_processor = LogitsProcessor


def token_bytes(tokenizer: Any) -> dict[int, bytes]:
    """Every regular (not special) token's bytes, read from its byte-level spelling."""
    from policy.models import _bytes_to_chars  # the byte-level alphabet the project's tokenizers are built on

    table = {char: byte for byte, char in _bytes_to_chars().items()}
    special = set(tokenizer.all_special_ids)
    out = {}
    for token, index in tokenizer.get_vocab().items():
        if index in special:
            continue
        if all(char in table for char in token):
            out[index] = bytes(table[char] for char in token)
        else:
            out[index] = token.encode("utf-8")
    return out


class GuideProcessor:
    """A logits processor over one ``allowed(row, input_ids)`` function: every other token gets ``-inf``."""

    def __init__(self, allowed: Any) -> None:
        self.allowed = allowed

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        mask = torch.full_like(scores, float("-inf"))
        for row in range(input_ids.shape[0]):
            mask[row, list(self.allowed(row, input_ids))] = 0.0
        return scores + mask


def use_outlines_core(backend: Any, clock: dict) -> None:
    """outlines-core: the schema as a regular expression (no free whitespace), its index over the vocabulary built
    when the schema is compiled, one ``Guide`` per row."""
    from outlines_core import Guide, Index, Vocabulary
    from outlines_core.json_schema import build_regex_from_schema

    eos = backend.eos_ids[0]
    by_bytes: dict[bytes, list[int]] = {}
    for index, spelled in token_bytes(backend.tokenizer).items():
        by_bytes.setdefault(spelled, []).append(index)
    vocabulary = Vocabulary(eos, by_bytes)
    indexes: dict[str, Any] = {}  # kept per schema, as the backend keeps llguidance's grammars

    def compiled(schema: dict) -> Any:
        key = json.dumps(schema)
        if key not in indexes:
            started = time.perf_counter()
            indexes[key] = Index(build_regex_from_schema(key, whitespace_pattern=""), vocabulary)
            clock["compile_seconds"] += time.perf_counter() - started
        return indexes[key]

    def processor(index: Any) -> Any:
        guides: dict[int, Any] = {}

        def allowed(row: int, input_ids: Any) -> list[int]:
            if row not in guides:
                guides[row] = Guide(index)
            else:
                guides[row].advance(int(input_ids[row, -1]))
            guide = guides[row]
            return backend.eos_ids if guide.is_finished() else guide.get_tokens()

        return GuideProcessor(allowed)

    backend._compiled, backend._grammar_processor = compiled, processor


def use_lm_format_enforcer(backend: Any, clock: dict) -> None:
    """lm-format-enforcer: its JSON Schema parser (no whitespace between tokens of the document), one
    ``TokenEnforcer`` per row over the whole sequence. Its transformers integration does not import under
    transformers 5 (it reads ``PreTrainedTokenizerBase`` from a module that moved), so the tokenizer data it needs
    (each regular token's text and whether it starts a word) is built here."""
    from lmformatenforcer import CharacterLevelParserConfig, JsonSchemaParser, TokenEnforcer
    from lmformatenforcer.tokenenforcer import TokenEnforcerTokenizerData

    tokenizer = backend.tokenizer
    output = backend.model.get_output_embeddings().weight.shape[0]
    special = set(tokenizer.all_special_ids)
    zero = next(index for index in range(output) if index not in special)
    before = len(tokenizer.decode([zero]))
    regular = []
    for index in range(min(len(tokenizer), output)):
        if index in special:
            continue
        text = tokenizer.decode([zero, index])[before:]
        regular.append((index, text, len(text) > len(tokenizer.decode([index]))))
    data = TokenEnforcerTokenizerData(regular, lambda ids: tokenizer.decode(ids).rstrip("\ufffd"),
                                      backend.eos_ids, False, output)

    def compiled(schema: dict) -> Any:
        return schema

    def processor(schema: Any) -> Any:
        enforcers: dict[int, Any] = {}

        def allowed(row: int, input_ids: Any) -> list[int]:
            if row not in enforcers:
                started = time.perf_counter()
                parser = JsonSchemaParser(schema, config=CharacterLevelParserConfig(max_consecutive_whitespaces=0))
                enforcers[row] = TokenEnforcer(data, parser)
                clock["compile_seconds"] += time.perf_counter() - started
            return list(enforcers[row].get_allowed_tokens(input_ids[row].tolist()).allowed_tokens)

        return GuideProcessor(allowed)

    backend._compiled, backend._grammar_processor = compiled, processor


def main() -> None:
    import jsonschema

    from curriculum.benches.tokens import engineer_inputs
    from engineer.answer_schema import answer_json_schema
    from engineer.llm import LLMEngineer
    from policy.backend_hf import HFBackend

    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=600)
    parser.add_argument("--preset", default="demo")
    parser.add_argument("--cpu-threads", type=int, default=1, help="torch threads (1: steady on a shared machine)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    context, config = engineer_inputs(args.preset)
    schema = answer_json_schema(config)
    rows = []
    for arm in args.arms.split(","):
        backend = HFBackend(args.model, cpu_threads=args.cpu_threads)
        clock = {"seconds": 0.0, "calls": 0, "compile_seconds": 0.0}
        began = time.perf_counter()
        if arm in ("xgrammar", "xgrammar-compact"):  # llguidance is the backend's own
            use_xgrammar(backend, compact=arm == "xgrammar-compact")
        elif arm == "outlines-core":
            use_outlines_core(backend, clock)
        elif arm == "lm-format-enforcer":
            use_lm_format_enforcer(backend, clock)
        setup_seconds = time.perf_counter() - began  # the library's view of the tokenizer, made once per arm
        inner = backend._grammar_processor
        backend._grammar_processor = lambda grammar, inner=inner, clock=clock: Timed(inner(grammar), clock)
        engineer = LLMEngineer(f"hf:{args.model}", backend=backend, max_new_tokens=args.max_new_tokens,
                               show_schema=False, timeout_s=3600,
                               answer_mode="free" if arm == "free" else "constrained")
        for seed in range(args.seeds):
            clock.update(seconds=0.0, calls=0, compile_seconds=0.0)
            started = time.perf_counter()
            decision = engineer.propose(context, config, seed=seed)
            seconds = time.perf_counter() - started
            try:
                document = json.loads(decision.raw_answer or "")
                jsonschema.validate(document, schema)
                parses, validates = True, True
            except json.JSONDecodeError:
                parses, validates = False, False
            except jsonschema.ValidationError:
                parses, validates = True, False
            row = {
                "arm": arm, "seed": seed, "seconds": round(seconds, 1),
                "prompt_tokens": decision.details.get("prompt_tokens"),
                "completion_tokens": decision.details.get("completion_tokens"),
                "json_parses": parses, "schema_validates": validates, "outcome": decision.outcome,
                "reason": decision.reason, "repairs": decision.repairs, "diff": decision.diff,
                "grammar_ms_per_token": round(1000 * clock["seconds"] / clock["calls"], 2) if clock["calls"] else None,
                "compile_seconds": round(clock["compile_seconds"], 2), "setup_seconds": round(setup_seconds, 2),
                "answer": decision.raw_answer,
            }
            rows.append(row)
            print(json.dumps({key: row[key] for key in row if key != "answer"}), flush=True)
    versions = {}
    for name in ("torch", "transformers", "xgrammar", "llguidance", "outlines-core", "lm-format-enforcer"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    summary = {}
    for arm in {row["arm"] for row in rows}:
        mine = [row for row in rows if row["arm"] == arm]
        summary[arm] = {
            "answers": len(mine),
            "seconds_per_answer": round(sum(row["seconds"] for row in mine) / len(mine), 1),
            "json_parse_share": sum(row["json_parses"] for row in mine) / len(mine),
            "schema_valid_share": sum(row["schema_validates"] for row in mine) / len(mine),
            "accepted_share": sum(row["outcome"] != "rejected" for row in mine) / len(mine),
        }
    result = {"command": "python docs/results/constrained-answers/measure.py " + " ".join(
        f"--{key.replace('_', '-')} {value}" for key, value in vars(args).items() if value is not None),
        "machine": platform.platform(), "versions": versions, "summary": summary, "rows": rows}
    print(json.dumps(summary, indent=1))
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(result, handle, indent=1)


if __name__ == "__main__":
    main()
