"""The engineer's answer held to a JSON Schema: the schema is derived and bounded; hf (the real SmolLM2 folder with
llguidance), vllm (its SamplingParams) and openai (``response_format`` against a local HTTP server) hold answers
to it; the free path, a missing grammar library, a cut answer and a timeout are recorded, nothing lost."""

from __future__ import annotations

import copy
import dataclasses
import importlib.metadata
import json
import sys
import threading
import time
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jsonschema
import pytest

from engineer import build_context, make_engineer
from engineer.answer_schema import BENCHMARK_SIDES, NUMBER_STEP, answer_json_schema, answer_sides
from policy.backend_base import Generation, Sampling, why_no_json_schema
from policy.backend_openai import OpenAIBackend
from simulator.config import SizeSpec, StageConfig, config_json_schema
from simulator.errors import ConfigError
from simulator.fields import ALLOWED, Allowed
from tests.engineer.test_engineer_engineers import GOOD_ANSWER, ScriptedBackend, summary_with
from tests.documents import DELETE, set_at

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)

CONFIG = StageConfig.from_dict({"agents": 2, "samples": 400, "seed": 3, "sizes": {
    side: {"data_ratio": 0.25, "hole_ratio": 0.2, "wait_ratio": 0.3} for side in (3, 4, 5, 6)}})
GOOD_CONFIG = {"agents": 2, "samples": 400, "sizes": {
    "3": {"data_ratio": 0.1, "hole_ratio": 0.2, "wait_ratio": 0.3},
    "4": {"data_ratio": 0.4, "hole_ratio": 0.2, "wait_ratio": 0.3},
    "5": {"data_ratio": 0.4, "hole_ratio": 0.2, "wait_ratio": 0.3},
    "6": {"data_ratio": 0.1, "hole_ratio": 0.2, "wait_ratio": 0.3}}}
GOOD = {"rationale": "Sizes 4 and 5 are mid-range.", "config": GOOD_CONFIG}


def _validator(schema: dict) -> jsonschema.Draft202012Validator:
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _context(config: StageConfig = CONFIG, sections=None):
    return build_context(summary_with({side: 0.5 for side in config.sizes}), config, [], sections=sections)


# --- the schema ------------------------------------------------------------------------------------------------
def test_answer_schema__the_config_part_is_the_declared_document_schema():
    schema, document = answer_json_schema(CONFIG), config_json_schema()
    config = schema["properties"]["config"]
    assert schema["required"] == ["rationale", "config"] and schema["additionalProperties"] is False
    assert config["required"] == document["required"] and config["additionalProperties"] is False
    for name in ("samples", "seed", "horizon"):
        assert config["properties"][name] == document["properties"][name]
    # every number the same but for its step (two decimal places, so that a number ends)
    assert config["properties"]["slip"] == {**document["properties"]["slip"], "multipleOf": NUMBER_STEP}
    size = document["properties"]["sizes"]["additionalProperties"]
    assert schema["$defs"]["size"] == {**size, "properties": {
        name: {**field, "multipleOf": NUMBER_STEP} if field.get("type") == "number" else field
        for name, field in size["properties"].items()}}
    assert {name for name, field in schema["$defs"]["size"]["properties"].items() if "multipleOf" in field} == {
        "data_ratio", "hole_ratio", "wait_ratio"}
    assert config["properties"]["agents"]["anyOf"] == document["properties"]["agents"]["oneOf"]
    assert list(config["properties"]["sizes"]["properties"]) == [str(side) for side in BENCHMARK_SIDES]


def test_answer_schema__changing_a_declared_bound_changes_it(monkeypatch):
    before = answer_json_schema(CONFIG)
    field = copy.copy(SizeSpec.__dataclass_fields__["hole_ratio"])
    field.metadata = types.MappingProxyType({ALLOWED: Allowed(0, 0.5)})
    monkeypatch.setitem(SizeSpec.__dataclass_fields__, "hole_ratio", field)
    samples = copy.copy(StageConfig.__dataclass_fields__["samples"])
    samples.metadata = types.MappingProxyType({ALLOWED: Allowed(1, 999, integer=True)})
    monkeypatch.setitem(StageConfig.__dataclass_fields__, "samples", samples)
    monkeypatch.setattr("simulator.config.MAX_STAGE_AGENTS", 5)
    after = answer_json_schema(CONFIG)
    assert before["$defs"]["size"]["properties"]["hole_ratio"]["maximum"] == 0.9
    assert after["$defs"]["size"]["properties"]["hole_ratio"]["maximum"] == 0.5
    assert after["properties"]["config"]["properties"]["samples"]["maximum"] == 999
    assert after["properties"]["config"]["properties"]["agents"]["anyOf"][0]["maximum"] == 5


def _with(path: str, value, document=None):
    """``GOOD`` (or ``document``) with the value at the dotted ``path`` set (``...=DELETE`` removes it)."""
    out = copy.deepcopy(document or GOOD)
    set_at(out, path.split("."), value)
    return out




@pytest.mark.parametrize(("answer", "problem"), [
    (_with("extra", 1), "Additional properties"),
    (_with("config.mood", "bold"), "Additional properties"),
    (_with("config.sizes.4.colour", "blue"), "Additional properties"),
    (_with("config.sizes.11", GOOD_CONFIG["sizes"]["3"]), "Additional properties"),  # a side the run does not use
    (_with("config.sizes.2", GOOD_CONFIG["sizes"]["3"]), "Additional properties"),
    (_with("config.sizes.4.hole_ratio", 0.95), "0.95 is greater than the maximum"),
    (_with("config.sizes.4.data_ratio", 1.5), "1.5 is greater than the maximum"),
    (_with("config.sizes.4.wait_ratio", -0.1), "less than the minimum"),
    (_with("config.sizes.4.max_makespan", 0), "less than the minimum"),
    (_with("config.agents", 0), "is not valid under any of the given schemas"),
    (_with("config.agents", 17), "is not valid under any of the given schemas"),
    (_with("config.agents", [2, 3, 4]), "is not valid under any of the given schemas"),
    (_with("config.samples", 0), "less than the minimum"),
    (_with("config.samples", 2_000_000), "greater than the maximum"),
    (_with("config.slip", "none"), "is not of type 'number'"),
    (_with("rationale", "x" * 601), "is too long"),
    (_with("rationale", DELETE), "'rationale' is a required property"),
    (_with("config.sizes", DELETE), "'sizes' is a required property"),
    (_with("config.sizes", {}), "should be non-empty"),
    (_with("config.sizes.4.data_ratio", DELETE), "'data_ratio' is a required property"),
])
def test_answer_schema__rejects_extra_keys_values_out_of_range_and_sides_the_run_does_not_use(answer, problem):
    validator = _validator(answer_json_schema(CONFIG))
    assert validator.is_valid(GOOD)
    errors = [error.message for error in validator.iter_errors(answer)]
    assert errors and any(problem in message for message in errors), errors


def test_answer_schema__sides_option_bounds_the_sides_but_the_current_ones_stay_and_every_valid_config_passes():
    assert answer_sides(CONFIG, [8, 7]) == (3, 4, 5, 6, 7, 8)
    validator = _validator(answer_json_schema(CONFIG, sides=[3, 4], rationale_chars=40))
    assert validator.is_valid({"rationale": "", "config": CONFIG.to_dict()})  # horizon null, slip 0.0: fine
    assert not validator.is_valid(_with("config.sizes.7", GOOD_CONFIG["sizes"]["3"]))
    assert not validator.is_valid(_with("rationale", "x" * 41))
    ranged = StageConfig.from_dict({**CONFIG.to_dict(), "agents": [2, 3]})
    assert validator.is_valid({"rationale": "", "config": ranged.to_dict()})
    with pytest.raises(ConfigError, match="llm.sides"):
        answer_sides(CONFIG, [2])


@pytest.mark.parametrize(("options", "field"), [
    ({"answer_mode": "grammar"}, "llm.answer_mode"), ({"rationale_chars": 5}, "llm.rationale_chars"),
    ({"sides": [3, 40]}, "llm.sides"), ({"sides": "3,4"}, "llm.sides"), ({"sides": []}, "llm.sides"),
])
def test_llm_options__bad_answer_options_name_the_option(options, field):
    with pytest.raises(ConfigError) as caught:
        make_engineer("llm:openai:m", **options)
    assert caught.value.field == field


# --- the engineer with stand-in backends -------------------------------------------------------------------------
class JsonBackend(ScriptedBackend):
    """A stand-in that can hold answers to a schema: answers ``answer`` (text), remembers the schemas it got."""

    def __init__(self, answer: str = json.dumps(GOOD), completion_tokens: int = 50, **options) -> None:
        super().__init__(answer, **options)
        self.schemas: list[dict] = []
        self.completion_tokens = completion_tokens

    def generate_json(self, prompts, sampling, schema):
        self.schemas.append(schema)
        generations = self.generate(prompts, sampling)
        return [Generation(g.text, g.prompt_tokens, min(self.completion_tokens, sampling.max_new_tokens))
                for g in generations]


def test_llm__constrained_answer_is_accepted_and_the_record_says_which_mode_answered():
    complete = {**GOOD, "config": {**GOOD_CONFIG, "seed": 3, "slip": 0.0, "horizon": None}}  # nothing to fill in
    backend = JsonBackend(json.dumps(complete))
    decision = make_engineer("llm:openai:m", backend=backend, sides=[3, 4, 5, 6]).propose(_context(), CONFIG, seed=1)
    assert decision.accepted and decision.reason == "accepted", (decision.reason, decision.repairs)
    assert decision.details["answer_mode"] == "constrained" and decision.details["answer_sides"] == [3, 4, 5, 6]
    assert decision.rationale == GOOD["rationale"] and decision.config.sizes[4].data_ratio == 0.4
    assert backend.schemas == [answer_json_schema(CONFIG, [3, 4, 5, 6])]
    system = backend.prompts[0][0]["content"]
    assert 'one JSON object' in system and "may be 3, 4, 5, 6" in system and "```yaml" not in system


def test_llm__free_path_still_works_and_auto_records_why_it_was_not_constrained():
    scripted = ScriptedBackend()  # no generate_json: auto answers in free text
    decision = make_engineer("llm:openai:m", backend=scripted).propose(_context(), CONFIG, seed=1)
    assert decision.accepted and decision.details["answer_mode"] == "free"
    assert decision.details["constrained_unavailable"] == "scripted cannot hold generation to a JSON schema"
    assert "```yaml" in scripted.prompts[0][0]["content"]
    capable = JsonBackend(answer=GOOD_ANSWER)  # free chosen although the backend could constrain
    decision = make_engineer("llm:openai:m", backend=capable, answer_mode="free").propose(_context(), CONFIG, seed=1)
    assert decision.accepted and decision.details["answer_mode"] == "free" and capable.schemas == []
    assert "constrained_unavailable" not in decision.details


def test_llm__auto_leaves_a_thinking_model_free_to_think_and_constrained_forces_the_grammar():
    backend = JsonBackend(answer=GOOD_ANSWER)
    thinking = make_engineer("llm:openai:m", backend=backend, enable_thinking=True)
    decision = thinking.propose(_context(), CONFIG)
    assert decision.accepted and decision.details["answer_mode"] == "free" and backend.schemas == []
    assert decision.details["constrained_unavailable"].startswith("enable_thinking is on")
    forced = make_engineer("llm:openai:m", backend=JsonBackend(), enable_thinking=True, answer_mode="constrained")
    assert forced.propose(_context(), CONFIG).details["answer_mode"] == "constrained"


def test_llm__cross_field_rules_stay_with_the_repair_path_which_records_them():
    ratios = copy.deepcopy(GOOD)
    for side in ratios["config"]["sizes"].values():
        side["data_ratio"] = 0.2  # four sides summing to 0.8: a schema cannot say "sum to 1"
    decision = make_engineer("llm:openai:m", backend=JsonBackend(json.dumps(ratios))).propose(_context(), CONFIG)
    assert decision.accepted and decision.reason == "accepted after repairs"
    assert any("divided each by the sum" in repair for repair in decision.repairs)
    band = _with("config.sizes.4.min_makespan", 5, _with("config.sizes.4.max_makespan", 2))
    decision = make_engineer("llm:openai:m", backend=JsonBackend(json.dumps(band))).propose(_context(), CONFIG)
    assert not decision.accepted and "max_makespan" in decision.reason and decision.config == CONFIG


def test_llm__an_answer_cut_by_max_new_tokens_is_a_recorded_fallback():
    cut = json.dumps(GOOD)[:90]
    backend = JsonBackend(answer=cut, completion_tokens=10**6)
    decision = make_engineer("llm:openai:m", backend=backend, max_new_tokens=64).propose(_context(), CONFIG)
    assert not decision.accepted and decision.config == CONFIG and decision.raw_answer == cut
    assert decision.reason.startswith("rejected: the answer reached max_new_tokens (64) before it ended")
    assert decision.details["cut_at_max_new_tokens"] is True and decision.details["completion_tokens"] == 64
    json.dumps(decision.to_dict(), allow_nan=False)


def test_llm__a_constrained_backend_past_timeout_is_a_recorded_fallback():
    started = time.perf_counter()
    engineer = make_engineer("llm:openai:m", backend=JsonBackend(sleep_s=5.0), timeout_s=0.2)
    decision = engineer.propose(_context(), CONFIG)
    assert time.perf_counter() - started < 2.0
    assert not decision.accepted and "timed out" in decision.reason and decision.details["answer_mode"] == "constrained"


# --- hf: the real SmolLM2 folder ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
    """An hf backend on the folder ``mapf-lake model init smollm2`` writes (once per module)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from policy.pretrained import PRETRAINED

    smol = PRETRAINED["smollm2"]
    try:
        importlib.metadata.distribution(smol.distribution)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"{smol.distribution} is not installed (install it with: {smol.pip_command})")
    from curriculum.cli import main
    from policy.backends import make_backend

    out = tmp_path_factory.mktemp("smollm2") / "model"
    assert main(["model", "init", "smollm2", "--out", str(out)]) == 0
    backend = make_backend(f"hf:{out}")
    backend.cpu_threads = 1  # predictable on a shared 2-core machine
    return backend


SMALL = StageConfig.from_dict({"agents": 2, "samples": 400, "sizes": {
    3: {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.3},
    4: {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.3}}})


MAX_NEW_TOKENS = 300  # measured: this prompt's answers take 109-166 tokens (greedy: 166; seeds 0-2 sampled: 109-162)


def test_hf_smollm2__a_constrained_answer_parses_and_validates_as_a_stage_config(smollm2):
    pytest.importorskip("llguidance", reason="the grammar library is not installed (pip install llguidance)")
    context = build_context(summary_with({3: 0.9, 4: 0.4}), SMALL, [], sections=("behavior",))
    engineer = make_engineer(f"llm:hf:{smollm2.spec[3:]}", backend=smollm2, show_schema=False, sides=[3, 4, 5],
                             rationale_chars=60, max_new_tokens=MAX_NEW_TOKENS, temperature=0.0, timeout_s=300)
    decision = engineer.propose(context, SMALL, seed=0)
    assert decision.details["answer_mode"] == "constrained", decision.details
    assert decision.details["completion_tokens"] < MAX_NEW_TOKENS, decision.raw_answer  # it ended by itself
    answer = json.loads(decision.raw_answer)  # the grammar wrote it: it parses
    _validator(answer_json_schema(SMALL, [3, 4, 5], 60)).validate(answer)
    assert decision.accepted, (decision.reason, decision.raw_answer)  # valid as a StageConfig after the repairs
    assert {int(side) for side in answer["config"]["sizes"]} <= set(decision.config.sizes)
    total = sum(spec["data_ratio"] for spec in answer["config"]["sizes"].values())
    assert abs(total - 1) < 1e-6 or any("divided each by the sum" in repair for repair in decision.repairs)


def test_hf_smollm2__the_grammar_ends_a_number_at_two_decimal_places(smollm2):
    """The runaway that cut every answer of smol-self's seed 721 at 600 tokens (``"data_ratio":0.000000...``): the
    grammar now refuses a third decimal digit, and a number of two decimals goes on to a whole answer."""
    llguidance = pytest.importorskip("llguidance", reason="the grammar library is not installed (pip install "
                                                          "llguidance)")
    grammar = smollm2._compiled(answer_json_schema(SMALL, [3, 4], 60))
    head = '{"rationale":"x","config":{"agents":2,"samples":400,"seed":0,"slip":0,"horizon":100,"sizes":{"3":'

    def matcher_after(text: str):
        matcher = llguidance.LLMatcher(smollm2._grammar_tokenizer(), grammar)
        return matcher, matcher.consume_tokens(smollm2.tokenizer.encode(text, add_special_tokens=False))

    assert matcher_after(head + '{"data_ratio":0.00')[1]
    matcher, consumed = matcher_after(head + '{"data_ratio":0.000')
    assert not consumed and "doesn't satisfy the grammar" in matcher.get_error()
    for bad in ('{"data_ratio":0.251', '{"data_ratio":0.25,"hole_ratio":0.123'):
        assert not matcher_after(head + bad)[1], bad
    whole = head + '{"data_ratio":0.07,"hole_ratio":0.2,"wait_ratio":0.3},"4":{"data_ratio":0.93,"hole_ratio":0.2,' \
        '"wait_ratio":0.3}}}}'
    matcher, consumed = matcher_after(whole)
    assert consumed and matcher.is_accepting(), matcher.get_error()


def test_hf__a_missing_grammar_library_is_recorded_or_a_clear_fallback(smollm2, monkeypatch):
    monkeypatch.setitem(sys.modules, "llguidance", None)  # what find_spec sees when the package is not installed
    why = why_no_json_schema(smollm2)
    assert why == ("the grammar library llguidance is not installed: pip install llguidance (or pip install "
                   "'mapf-frozenlake[train]', which has it)")
    auto = make_engineer(f"llm:hf:{smollm2.spec[3:]}", backend=smollm2, max_new_tokens=4, show_schema=False)
    asked = auto.propose(_context(SMALL, sections=("behavior",)), SMALL)  # auto still asks, in free text
    assert asked.details["answer_mode"] == "free" and asked.details["constrained_unavailable"] == why
    assert asked.details["completion_tokens"] == 4 and asked.details["cut_at_max_new_tokens"] is True
    assert not asked.accepted and "reached max_new_tokens (4)" in asked.reason and asked.config == SMALL
    strict = make_engineer(f"llm:hf:{smollm2.spec[3:]}", backend=smollm2, answer_mode="constrained")
    decision = strict.propose(_context(SMALL), SMALL)
    assert not decision.accepted and decision.config == SMALL and decision.raw_answer is None
    assert decision.reason == f"rejected: answer_mode constrained is not available: {why}"
    assert decision.details["answer_mode"] == "constrained"
    with pytest.raises(ConfigError, match="pip install llguidance"):
        smollm2.generate_json(["x"], Sampling(max_new_tokens=1), answer_json_schema(SMALL))


# --- vllm ----------------------------------------------------------------------------------------------------
def test_vllm__sampling_params_carry_the_schema_as_structured_outputs():
    vllm = pytest.importorskip("vllm", reason="vllm is not installed here (GPU machines: pip install "
                                              "'mapf-frozenlake[vllm]')")
    from policy.backend_vllm import sampling_params

    schema = answer_json_schema(CONFIG)
    params = sampling_params(vllm, Sampling(max_new_tokens=300, temperature=0.7, seed=5), 2, schema)
    assert params.max_tokens == 300 and params.seed == 7
    assert params.structured_outputs.json == schema and params.structured_outputs.disable_any_whitespace
    assert sampling_params(vllm, Sampling(), 0).structured_outputs is None


def test_vllm__generate_json_sends_the_schema_with_every_request_to_a_stand_in(monkeypatch):
    from tests.policy.test_backends import _fake_vllm

    from policy.backends import make_backend

    fake, made = _fake_vllm(), []

    class Recording(fake.SamplingParams):
        def __init__(self, **options):
            super().__init__(**options)
            made.append(options)

    @dataclasses.dataclass
    class StructuredOutputsParams:  # the fields vLLM 0.12+ has that the backend sets
        json: dict | None = None
        disable_any_whitespace: bool = False

    structured = types.ModuleType("vllm.sampling_params")
    structured.StructuredOutputsParams = StructuredOutputsParams
    fake.SamplingParams, fake.sampling_params = Recording, structured
    monkeypatch.setitem(sys.modules, "vllm", fake)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", structured)
    backend = make_backend("vllm:some/model")
    schema = answer_json_schema(CONFIG)
    assert why_no_json_schema(backend) is None
    out = backend.generate_json([[{"role": "user", "content": "hi"}], "raw"], Sampling(max_new_tokens=5), schema)
    assert [g.text for g in out] == ["chat:hi|seed=0", "raw:raw|seed=1"]
    assert [options["structured_outputs"] for options in made] == [
        StructuredOutputsParams(json=schema, disable_any_whitespace=True)] * 2
    made.clear()
    backend.generate(["raw"], Sampling())
    assert "structured_outputs" not in made[0]


# --- openai: a local HTTP server with structured outputs ----------------------------------------------------
class SchemaServer:
    """An OpenAI-compatible chat endpoint on 127.0.0.1 that serves structured outputs: given a json_schema
    response format it answers with ``answer`` after checking the answer against that schema; ``refuse_strict``
    makes it refuse a strict one (400 naming response_format), as OpenAI does for schemas outside its subset."""

    def __init__(self, answer: dict, refuse_strict: bool = False) -> None:
        self.bodies: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _reply(self, status, payload):
                body = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                self._reply(200, {"data": [{"id": "m"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.bodies.append(body)
                answer_format = body.get("response_format") or {}
                if refuse_strict and answer_format.get("json_schema", {}).get("strict"):
                    return self._reply(400, {"error": {"message": "Invalid schema for response_format 'x': "
                                                                  "'required' must list every property"}})
                if answer_format.get("type") == "json_schema":
                    _validator(answer_format["json_schema"]["schema"]).validate(answer)
                message = {"role": "assistant", "content": json.dumps(answer)}
                usage = {"prompt_tokens": 900, "completion_tokens": 120}
                self._reply(200, {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                                  "usage": usage})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.parametrize("refuse_strict", [False, True])
def test_openai__response_format_json_schema_holds_the_answer(refuse_strict):
    server = SchemaServer(GOOD, refuse_strict=refuse_strict)
    try:
        backend = OpenAIBackend("m", base_url=server.base_url, api_key="local", backoff_s=0.01)
        decision = make_engineer("llm:openai:m", backend=backend).propose(_context(), CONFIG, seed=2)
    finally:
        server.close()
    assert decision.accepted and decision.details["answer_mode"] == "constrained", decision.reason
    sent = server.bodies[0]["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["strict"] is True
    assert sent["json_schema"]["schema"] == answer_json_schema(CONFIG)
    assert sent["json_schema"]["name"] == "MAPF-FrozenLake_engineer_answer"
    if refuse_strict:
        assert [body["response_format"]["json_schema"]["strict"] for body in server.bodies] == [True, False]
        assert "strict false" in decision.details["constrained_relaxed"]
    else:
        assert len(server.bodies) == 1 and "constrained_relaxed" not in decision.details


def test_engineer_record__constrained_details_survive_the_json_record():
    decision = make_engineer("llm:openai:m", backend=JsonBackend()).propose(_context(), CONFIG)
    record = json.loads(json.dumps(decision.to_dict(), allow_nan=False))
    assert record["details"]["answer_mode"] == "constrained"
    assert record["details"]["answer_sides"] == sorted(set(BENCHMARK_SIDES) | set(CONFIG.sizes))


def test_smollm2_engineer_arm__is_a_valid_run_config_and_engineer():
    """The named arm a user runs with ``--arm smollm2-engineer``: its overrides make a run config, and its engineer
    options make the constrained ``llm`` engineer (the model itself is made only when it first answers)."""
    from curriculum.commands import MODEL_ARMS, named_arms
    from curriculum.config import preset

    overrides = named_arms()["smollm2-engineer"]
    assert overrides == MODEL_ARMS["smollm2-engineer"]
    config = preset("demo").with_overrides(**overrides)
    assert config.engineer.spec == "llm:hf:@smollm2" and config.engineer.plan_first
    engineer = make_engineer(config.engineer.spec, **dict(config.engineer.options))
    assert engineer.answer_mode == "constrained" and tuple(engineer.sides) == (3, 4, 5, 6)
