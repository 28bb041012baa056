"""Constrained engineer answers on SmolLM2-135M-Instruct: grammar libraries compared on the real engineer prompt.

For each arm (``xgrammar``; ``llguidance``; ``free``: no grammar, the free-text path), three sampled answers
(seeds 0, 1, 2; ``--arms xgrammar-compact``: xgrammar with llguidance's separators) to the ``llm:self`` engineer prompt of the ``demo`` preset (``curriculum.benches.tokens.
engineer_inputs``: the greedy scripted policy's judged episodes on the preset's validation set), through
``engineer.llm.LLMEngineer`` on one loaded ``hf:`` backend, with the answer schema of
``engineer.answer_schema.answer_json_schema`` and no free whitespace. Per answer: seconds, tokens, whether it
parses as JSON and validates against the schema, the decision's outcome and reason, and the grammar's own time
per generated token (mask computation and masking inside the logits processor).

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
EXTRA_ARMS = ("xgrammar-compact",)  # xgrammar writing "," and ":" without spaces, as llguidance does


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
        clock = {"seconds": 0.0, "calls": 0}
        if arm in ("xgrammar", "xgrammar-compact"):  # llguidance is the backend's own
            use_xgrammar(backend, compact=arm == "xgrammar-compact")
        inner = backend._grammar_processor
        backend._grammar_processor = lambda grammar, inner=inner, clock=clock: Timed(inner(grammar), clock)
        engineer = LLMEngineer(f"hf:{args.model}", backend=backend, max_new_tokens=args.max_new_tokens,
                               show_schema=False, timeout_s=3600,
                               answer_mode="free" if arm == "free" else "constrained")
        for seed in range(args.seeds):
            clock.update(seconds=0.0, calls=0)
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
                "answer": decision.raw_answer,
            }
            rows.append(row)
            print(json.dumps({key: row[key] for key in row if key != "answer"}), flush=True)
    versions = {}
    for name in ("torch", "transformers", "xgrammar", "llguidance"):
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
