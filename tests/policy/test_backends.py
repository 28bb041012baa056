"""Backends: hf on the embedded tiny models, openai against a local fake server, vllm through a stand-in module."""

from __future__ import annotations

import json
import pickle
import socket
import sys
import threading
import time
import traceback
import types
from pathlib import Path
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from model_fixtures import qwen3_tokenizer, tiny_model_dir, tiny_qwen3_dir

from policy import backends
from policy.backend_base import BackendError, Generation, Sampling, check_prompts
from policy.backend_openai import OpenAIBackend
from policy.backends import make_backend
from simulator.errors import ConfigError

PROMPTS = [
    "n=4\n..H.\nA0..\n....\n...A\nA0 3,2>2,3\nA1 0,0>1,1\n?\n",
    "n=3\n...\n.H.\n...\nA0 0,0>2,2\n?\n",
    "n=2\n..\n..\nA0 0,0>1,1\nA1 1,1>0,0\n?\n",
]
GREEDY = Sampling(max_new_tokens=16, temperature=0)


# --- specs and sampling --------------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["", "hf", "hf:", "hf:   ", "gpt-4o", "foo:bar", "HF:x", None, 42])
def test_make_backend__bad_spec_names_value_and_forms(spec):
    with pytest.raises(ConfigError) as caught:
        make_backend(spec)
    assert caught.value.field == "backend"
    assert "hf:PATH_OR_NAME" in str(caught.value) and "openai:MODEL" in str(caught.value)


def test_backends__registry_has_the_three_kinds():
    assert set(backends.BACKENDS) == {"hf", "vllm", "openai"}


@pytest.mark.parametrize(
    "field, value",
    [
        ("max_new_tokens", 0),
        ("max_new_tokens", 2.5),
        ("temperature", -0.1),
        ("temperature", float("inf")),
        ("top_p", 0.0),
        ("top_p", 1.5),
        ("seed", -1),
        ("seed", True),
        ("enable_thinking", 1),
        ("batch_size", 0),
        ("top_k", -1),
    ],
)
def test_sampling__bad_field_raises_naming_it(field, value):
    with pytest.raises(ConfigError) as caught:
        Sampling(**{field: value})
    assert caught.value.field == f"sampling.{field}"


@pytest.mark.parametrize(
    "prompts, field",
    [
        ("one string", "prompts"),
        ([PROMPTS[0], 7], "prompts[1]"),
        ([[]], "prompts[0]"),
        ([[{"role": "user"}]], "prompts[0][0]"),
        ([[{"role": "user", "content": ["parts"]}]], "prompts[0][0]"),
    ],
)
def test_check_prompts__bad_prompt_names_its_index(prompts, field):
    with pytest.raises(ConfigError) as caught:
        check_prompts(prompts)
    assert caught.value.field == field


# --- hf ------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny():
    pytest.importorskip("transformers")
    return make_backend(f"hf:{tiny_model_dir()}")


@pytest.fixture(scope="module")
def tiny_sharp():
    """The tiny model with wide random weights: greedy outputs differ between prompts (a fresh init repeats one
    token), which is what padding and chunking checks need."""
    import torch

    backend = make_backend(f"hf:{tiny_model_dir()}")
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in backend.model.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.5)
    return backend


def test_hf__greedy_is_deterministic_with_right_token_counts(tiny):
    first = tiny.generate(PROMPTS, GREEDY)
    assert first == tiny.generate(PROMPTS, GREEDY)
    assert [g.prompt_tokens for g in first] == [len(p) for p in PROMPTS]  # one token per character
    for generation in first:
        assert 1 <= generation.completion_tokens <= 16
        assert len(generation.text) <= generation.completion_tokens


def test_hf__left_padding_and_chunks_do_not_change_greedy_output(tiny_sharp):
    batched = tiny_sharp.generate(PROMPTS, GREEDY)
    assert len({g.text for g in batched}) == 3  # the check below means something
    alone = [tiny_sharp.generate([prompt], GREEDY)[0] for prompt in PROMPTS]
    assert alone == batched
    chunked = tiny_sharp.generate(PROMPTS, Sampling(max_new_tokens=16, temperature=0, batch_size=2))
    assert chunked == batched


def test_hf__sampling_is_seeded(tiny_sharp):
    seeded = Sampling(max_new_tokens=16, temperature=1.0, seed=5)
    first = tiny_sharp.generate(PROMPTS, seeded)
    assert first == tiny_sharp.generate(PROMPTS, seeded)
    assert first != tiny_sharp.generate(PROMPTS, Sampling(max_new_tokens=16, temperature=1.0, seed=6))
    repeated = tiny_sharp.generate([PROMPTS[0]] * 4, seeded)
    assert len({g.text for g in repeated}) > 1  # repeated prompts get independent samples


def test_hf__stop_token_is_counted_and_not_decoded(tiny_sharp, monkeypatch):
    first_tokens = tiny_sharp.generate_fixed_length(PROMPTS, Sampling(max_new_tokens=1, temperature=0))
    stop_ids = [tiny_sharp.tokenizer.convert_tokens_to_ids(g.text) for g in first_tokens]
    monkeypatch.setattr(tiny_sharp, "eos_ids", sorted(set(stop_ids)))
    # Those tokens are ordinary characters, so they show in the text; what matters is where counting stops.
    for generation in tiny_sharp.generate(PROMPTS, GREEDY):
        assert generation.completion_tokens == 1


def test_hf__fixed_length_ignores_the_stop_token(tiny):
    for generation in tiny.generate_fixed_length(PROMPTS, Sampling(max_new_tokens=12, seed=1)):
        assert generation.completion_tokens == 12


def test_hf__callers_torch_random_stream_is_untouched(tiny):
    import torch

    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    tiny.generate(PROMPTS[:1], Sampling(max_new_tokens=4, seed=9))
    assert torch.equal(torch.rand(3), expected)


def test_hf__chat_prompt_without_chat_template_is_a_config_error(tiny):
    with pytest.raises(ConfigError, match="no chat template"):
        tiny.generate([[{"role": "user", "content": "n=2"}]], GREEDY)


def test_hf__characters_the_tokenizer_lacks_are_refused_not_dropped(tiny):
    with pytest.raises(ConfigError, match="no token for 'ax'") as caught:
        tiny.generate([PROMPTS[0], "n=3x5\na\n"], GREEDY)
    assert caught.value.field == "prompts[1]"


def test_hf__prompt_longer_than_the_model_is_a_config_error(tiny):
    with pytest.raises(ConfigError, match="1024 positions") as caught:
        tiny.generate([PROMPTS[0], "." * 1020], GREEDY)
    assert caught.value.field == "prompts[1]"


def test_hf__missing_folder_is_a_config_error_not_a_hub_traceback(tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(ConfigError) as caught:
        make_backend(f"hf:{missing}")
    assert "hf:FOLDER" in str(caught.value) and str(missing) in str(caught.value)


def test_hf__folder_without_a_model_is_a_config_error(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="causal LM"):
        make_backend(f"hf:{tmp_path / 'empty'}")


def _damaged_copy(folder: Path, out: Path, damage: str) -> Path:
    """A copy of the model ``folder`` whose ``model.safetensors`` has one tensor renamed in its header (the file
    still reads: transformers alone would start that weight at random), or is cut to its first 1,000 bytes."""
    import shutil

    shutil.copytree(folder, out)
    weights = out / "model.safetensors"
    data = bytearray(weights.read_bytes())
    if damage == "truncated":
        weights.write_bytes(bytes(data[:1000]))
        return out
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + size])
    name = next(key for key in header if key != "__metadata__")
    renamed = name[:-3] + "xyz"  # the same length: the header keeps its size and every offset stays right
    data[8:8 + size] = bytes(data[8:8 + size]).replace(f'"{name}"'.encode(), f'"{renamed}"'.encode(), 1)
    weights.write_bytes(bytes(data))
    return out


@pytest.mark.parametrize("damage", ["renamed", "truncated"])
def test_hf__a_damaged_weights_file_is_one_config_error_not_a_randomly_started_model(tmp_path, damage):
    from tests.cli_runner import mapf_lake

    folder = _damaged_copy(tiny_model_dir(), tmp_path / "model", damage)
    expected = "weights missing" if damage == "renamed" else "weights file cannot be read"
    with pytest.raises(ConfigError, match=expected) as refused:
        make_backend(f"hf:{folder}")
    assert str(folder) in str(refused.value)
    result = mapf_lake("eval", "--policy", f"hf:{folder}", "--quick", "--out", str(tmp_path / "out"), check=False)
    assert result.returncode == 2 and expected in result.stderr
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr and lines[-1].startswith("mapf-lake: error: model = ")
    assert expected in lines[-1] and not any("Loading weights" in line or "MISSING" in line for line in lines)
    assert not (tmp_path / "out").exists()


def test_hf__uncached_hub_name_with_hub_off_is_a_config_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError, match="hf:nobody-here/no-such-model"):
        make_backend("hf:nobody-here/no-such-model")


def test_hf__tiny_qwen3_end_to_end_with_chat_messages():
    backend = make_backend(f"hf:{tiny_qwen3_dir()}")
    assert backend.eos_ids == [151645, 151643]
    tokenizer = qwen3_tokenizer()
    messages = [{"role": "system", "content": "Plan for the agents."}, {"role": "user", "content": PROMPTS[0]}]
    for thinking in (False, True):
        sampling = Sampling(max_new_tokens=8, temperature=0.7, seed=3, enable_thinking=thinking)
        rendered = tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True, enable_thinking=thinking
        )
        assert rendered.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n" if not thinking else "assistant\n")
        assert backend.render(messages, sampling) == rendered
        generations = backend.generate([messages, messages, PROMPTS[1]], sampling)
        assert generations == backend.generate([messages, messages, PROMPTS[1]], sampling)
        expected_prompt = len(tokenizer(rendered, add_special_tokens=False)["input_ids"])
        assert [g.prompt_tokens for g in generations[:2]] == [expected_prompt] * 2
        assert generations[2].prompt_tokens == len(tokenizer(PROMPTS[1], add_special_tokens=False)["input_ids"])
        for generation in generations:
            assert 1 <= generation.completion_tokens <= 8 and isinstance(generation.text, str)


def test_hf__greedy_is_greedy_despite_the_models_sampling_defaults():
    import torch

    backend = make_backend(f"hf:{tiny_qwen3_dir()}")
    assert backend.model.generation_config.do_sample is True  # Qwen3's defaults, which must not leak
    messages = [{"role": "user", "content": PROMPTS[2]}]
    sampling = Sampling(max_new_tokens=4, temperature=0)
    ids = backend.tokenizer(backend.render(messages, sampling), return_tensors="pt")["input_ids"].to(backend.model.device)
    with torch.inference_mode():
        for _ in range(4):  # greedy by hand: argmax of the last position, four times
            ids = torch.cat([ids, backend.model(ids).logits[:, -1:].argmax(-1)], dim=1)
    by_hand = backend.tokenizer.decode(ids[0, -4:], skip_special_tokens=True)
    assert backend.generate([messages], sampling)[0].text == by_hand


# --- vllm ----------------------------------------------------------------------------------------------------


def test_vllm__not_installed_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # makes `import vllm` fail as if absent
    with pytest.raises(ConfigError) as caught:
        make_backend("vllm:Qwen/Qwen3-4B")
    assert "pip install 'mapf-frozenlake[vllm]'" in str(caught.value) and "GPU" in str(caught.value)


def _fake_vllm() -> types.ModuleType:
    """A stand-in for vllm with the calls the backend makes: LLM(...).generate / .chat, SamplingParams."""
    module = types.ModuleType("vllm")

    class SamplingParams:
        def __init__(self, **options):
            self.options = options

    def output(text, prompt_ids, seed):
        completion = types.SimpleNamespace(text=f"{text}|seed={seed}", token_ids=[7] * (1 + seed % 3))
        return types.SimpleNamespace(prompt_token_ids=prompt_ids, outputs=[completion])

    class LLM:
        instances: list = []

        def __init__(self, **options):
            self.options = options
            self.chat_kwargs = None
            LLM.instances.append(self)

        def generate(self, prompts, params, use_tqdm=True):
            return [output(f"raw:{p}", [1] * len(p), sp.options["seed"]) for p, sp in zip(prompts, params)]

        def chat(self, conversations, params, use_tqdm=True, add_generation_prompt=True, chat_template_kwargs=None):
            self.chat_kwargs = chat_template_kwargs
            return [
                output(f"chat:{c[-1]['content']}", [1] * 10, sp.options["seed"]) for c, sp in zip(conversations, params)
            ]

    module.LLM, module.SamplingParams = LLM, SamplingParams
    return module


def test_vllm__routes_raw_and_chat_prompts_and_keeps_order(monkeypatch):
    fake = _fake_vllm()
    monkeypatch.setitem(sys.modules, "vllm", fake)
    backend = make_backend("vllm:some/model")
    assert fake.LLM.instances[-1].options["model"] == "some/model"
    chat = [{"role": "user", "content": "hi"}]
    sampling = Sampling(max_new_tokens=5, seed=10, enable_thinking=True)
    out = backend.generate(["ab", chat, "xyz"], sampling)
    assert [g.text for g in out] == ["raw:ab|seed=10", "chat:hi|seed=11", "raw:xyz|seed=12"]
    assert [g.prompt_tokens for g in out] == [2, 10, 3]
    assert [g.completion_tokens for g in out] == [2, 3, 1]
    assert fake.LLM.instances[-1].chat_kwargs == {"enable_thinking": True}


# --- openai: a local fake endpoint ---------------------------------------------------------------------------

KEY = "sk-test-0123456789abcdefSECRETKEY"
WRONG_KEY = "sk-wrong-9876543210zyxwSECRETKEY"


class FakeOpenAI:
    """An OpenAI-compatible server on 127.0.0.1 with scripted failures; records every request it answers."""

    def __init__(self) -> None:
        self.key = KEY
        self.models = ["fake-model", "other-model"]
        self.failures: list[tuple[int, dict]] = []  # (status, headers) for the next POSTs, in order
        self.delays: list[float] = []  # seconds to stall the next POSTs
        self.refused_fields: set[str] = set()
        self.reasoning: str | None = None
        self.requests: list[tuple[str, str, dict | None]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def _reply(self, status, payload, headers=None):
                body = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def _authorised(self) -> bool:
                given = self.headers.get("Authorization", "").removeprefix("Bearer ")
                if given == server.key:
                    return True
                # Like OpenAI, echo the key back: the backend must scrub it.
                self._reply(401, {"error": {"message": f"Incorrect API key provided: {given}", "type": "auth"}})
                return False

            def do_GET(self):
                with server.lock:
                    server.requests.append(("GET", self.path, None))
                if self.path != "/v1/models":
                    return self._reply(404, {"error": {"message": "not found"}})
                if self._authorised():
                    self._reply(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in server.models]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.requests.append(("POST", self.path, body))
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                    failure = server.failures.pop(0) if server.failures else None
                    delay = server.delays.pop(0) if server.delays else 0.0
                try:
                    time.sleep(delay)  # the request's work: what the client's concurrency bounds
                finally:
                    # Counted down before the reply goes out: a client that reuses its worker at once must not
                    # meet this handler still counted (seen under load: 4 in flight with concurrency 3).
                    with server.lock:
                        server.in_flight -= 1
                if not self._authorised():
                    return
                if failure:
                    return self._reply(failure[0], {"error": {"message": "scripted failure"}}, failure[1])
                for field in sorted(server.refused_fields & set(body)):
                    message = f"Unsupported parameter: '{field}' is not supported with this model."
                    return self._reply(400, {"error": {"message": message, "param": field}})
                if self.path == "/v1/chat/completions":
                    message = {"role": "assistant", "content": "echo:" + body["messages"][-1]["content"]}
                    if server.reasoning:
                        message["reasoning_content"] = server.reasoning
                    choice = {"index": 0, "message": message, "finish_reason": "stop"}
                elif self.path == "/v1/completions":
                    choice = {"index": 0, "text": "echo:" + body["prompt"], "finish_reason": "stop"}
                else:
                    return self._reply(404, {"error": {"message": "not found"}})
                usage = {"prompt_tokens": 11, "completion_tokens": 3 + body.get("seed", 0) % 5}
                self._reply(200, {"choices": [choice], "usage": usage})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        serve = {"poll_interval": 0.05}  # shutdown() waits up to one poll interval
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs=serve, daemon=True)
        self.thread.start()

    def posts(self) -> list[tuple[str, dict]]:
        return [(path, body) for method, path, body in self.requests if method == "POST"]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(monkeypatch):
    fake = FakeOpenAI()
    monkeypatch.setenv("MAPF_LAKE_OPENAI_BASE_URL", fake.base_url)
    monkeypatch.setenv("MAPF_LAKE_OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    yield fake
    fake.close()


def fast_backend(server: FakeOpenAI, **options) -> OpenAIBackend:
    settings = {"base_url": server.base_url, "api_key": KEY, "backoff_s": 0.01, **options}
    return OpenAIBackend("fake-model", **settings)


def assert_no_key(error: BaseException, *keys: str) -> None:
    shown = [str(error), repr(error), repr(error.args), "".join(traceback.format_exception(error))]
    for key in keys:
        for text in shown:
            assert key not in text


CHAT = [{"role": "system", "content": "rules"}, {"role": "user", "content": "map A"}]


def test_openai__chat_and_raw_prompts_in_order_with_usage(server):
    backend = make_backend("openai:fake-model")
    out = backend.generate([CHAT, "raw B", CHAT[:1] + [{"role": "user", "content": "map C"}]], Sampling(seed=7))
    assert [g.text for g in out] == ["echo:map A", "echo:raw B", "echo:map C"]
    assert [g.prompt_tokens for g in out] == [11, 11, 11]
    assert [g.completion_tokens for g in out] == [3 + 7 % 5, 3 + 8 % 5, 3 + 9 % 5]
    posts = dict((body["seed"], (path, body)) for path, body in server.posts())
    assert posts[7][0] == "/v1/chat/completions" and posts[8][0] == "/v1/completions"
    assert posts[7][1]["chat_template_kwargs"] == {"enable_thinking": False}
    assert posts[7][1]["messages"] == CHAT and posts[8][1]["prompt"] == "raw B"
    assert posts[7][1]["max_tokens"] == 256 and posts[7][1]["model"] == "fake-model"
    assert [r[:2] for r in server.requests[:1]] == [("GET", "/v1/models")]  # checked before any work


def test_openai__retries_500_then_succeeds(server):
    server.failures = [(500, {}), (503, {})]
    out = fast_backend(server).generate(["raw"], Sampling())
    assert out[0].text == "echo:raw" and len(server.posts()) == 3


def test_openai__429_honours_retry_after(server):
    server.failures = [(429, {"Retry-After": "0"})]
    assert fast_backend(server, backoff_s=30).generate(["raw"], Sampling())[0].text == "echo:raw"
    assert len(server.posts()) == 2


def test_openai__timeout_is_retried(server):
    server.delays = [1.0]
    start = time.monotonic()
    out = fast_backend(server, timeout_s=0.3).generate(["raw"], Sampling())
    assert out[0].text == "echo:raw" and time.monotonic() - start < 1.0


def test_openai__persistent_5xx_raises_backend_error_after_retries(server):
    server.failures = [(502, {})] * 10
    with pytest.raises(BackendError, match="HTTP 502") as caught:
        fast_backend(server, max_retries=2).generate(["raw"], Sampling())
    assert len(server.posts()) == 3
    assert_no_key(caught.value, KEY)


def test_openai__wrong_key_fails_before_work_and_never_shows_the_key(server, monkeypatch):
    monkeypatch.setenv("MAPF_LAKE_OPENAI_API_KEY", WRONG_KEY)
    with pytest.raises(ConfigError) as caught:
        make_backend("openai:fake-model")
    assert caught.value.field == "MAPF_LAKE_OPENAI_API_KEY" and "401" in str(caught.value)
    assert "Incorrect API key provided" in str(caught.value)  # the server's words, scrubbed
    assert server.posts() == []
    assert_no_key(caught.value, WRONG_KEY, KEY)


def test_openai__key_refused_mid_run_is_a_config_error_without_the_key(server):
    backend = fast_backend(server)
    backend.check()
    server.key = "sk-rotated-key-on-the-server-side"
    with pytest.raises(ConfigError) as caught:
        backend.generate(["raw"], Sampling())
    assert_no_key(caught.value, KEY)


def test_openai__key_stays_out_of_repr_and_pickle(server):
    backend = make_backend("openai:fake-model")
    assert KEY not in repr(backend) and KEY not in str(backend) and "<hidden>" in repr(backend)
    with pytest.raises(TypeError, match="API key"):
        pickle.dumps(backend)


def test_openai__missing_key_fails_naming_both_variables(server, monkeypatch):
    monkeypatch.delenv("MAPF_LAKE_OPENAI_API_KEY")
    with pytest.raises(ConfigError) as caught:
        make_backend("openai:fake-model")
    assert "MAPF_LAKE_OPENAI_API_KEY" in str(caught.value) and "OPENAI_API_KEY" in str(caught.value)
    assert server.requests == []


def test_openai__falls_back_to_openai_api_key(server, monkeypatch):
    monkeypatch.delenv("MAPF_LAKE_OPENAI_API_KEY")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    assert make_backend("openai:fake-model").generate(["x"], Sampling())[0].text == "echo:x"


def test_openai__unreachable_endpoint_fails_before_work(monkeypatch):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("MAPF_LAKE_OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    monkeypatch.setenv("MAPF_LAKE_OPENAI_API_KEY", KEY)
    with pytest.raises(ConfigError) as caught:
        make_backend("openai:fake-model")
    assert caught.value.field == "MAPF_LAKE_OPENAI_BASE_URL" and "reachable" in str(caught.value)
    assert_no_key(caught.value, KEY)


@pytest.mark.parametrize("url", ["api.openai.com/v1", "ftp://host/v1", "http://"])
def test_openai__malformed_base_url_is_a_config_error(url, monkeypatch):
    monkeypatch.setenv("MAPF_LAKE_OPENAI_BASE_URL", url)
    monkeypatch.setenv("MAPF_LAKE_OPENAI_API_KEY", KEY)
    with pytest.raises(ConfigError, match="MAPF_LAKE_OPENAI_BASE_URL"):
        make_backend("openai:fake-model")


@pytest.mark.parametrize("url", ["https://alice:s3cretPass@example.invalid/v1", "http://alice@127.0.0.1:9/v1",
                                 "https://:s3cretPass@host/v1", "https://alice:s3cret/Pass@host/v1",
                                 "http://alice:s3cretPass@[::1]:9/v1"])
def test_openai__base_url_with_credentials_is_refused_without_showing_them(url, monkeypatch):
    """user:password@ in the base URL: http.client raised InvalidURL (a traceback) or the host-name lookup was sent
    'alice:...@host', and the error message printed the URL with its password."""
    monkeypatch.setenv("MAPF_LAKE_OPENAI_BASE_URL", url)
    monkeypatch.setenv("MAPF_LAKE_OPENAI_API_KEY", KEY)
    monkeypatch.setattr(socket, "getaddrinfo", lambda *args, **kwargs: pytest.fail("a host-name lookup was sent"))
    with pytest.raises(ConfigError) as caught:
        make_backend("openai:fake-model")
    message = str(caught.value)
    assert caught.value.field == "MAPF_LAKE_OPENAI_BASE_URL" and "without user:password@" in message
    assert "s3cret" not in message and "alice" not in message and "<hidden>@" in message


@pytest.mark.parametrize("url, detail", [("http://[::1", "IPv6"), ("http://host:abc/v1", "abc"),
                                         ("http://host/v 1", "control characters")])
def test_openai__base_url_that_does_not_parse_is_one_line(url, detail, monkeypatch):
    monkeypatch.setenv("MAPF_LAKE_OPENAI_BASE_URL", url)
    monkeypatch.setenv("MAPF_LAKE_OPENAI_API_KEY", KEY)
    with pytest.raises(ConfigError, match=detail):
        make_backend("openai:fake-model")


def test_openai__a_short_placeholder_key_is_hidden_as_a_word_not_as_letters():
    backend = OpenAIBackend("m", api_key="k")
    assert backend._scrub("Name or service not known: k") == "Name or service not known: <hidden>"


def test_openai__base_url_without_api_root_gets_a_hint(server, monkeypatch):
    monkeypatch.setenv("MAPF_LAKE_OPENAI_BASE_URL", server.base_url.removesuffix("/v1"))
    with pytest.raises(ConfigError, match="/v1"):
        make_backend("openai:fake-model")


def test_openai__unknown_model_lists_the_served_ones(server):
    with pytest.raises(ConfigError, match="fake-model, other-model"):
        make_backend("openai:no-such-model")


def test_openai__refused_fields_are_fixed_and_remembered(server):
    server.refused_fields = {"max_tokens", "chat_template_kwargs"}
    backend = fast_backend(server, concurrency=1)
    out = backend.generate([CHAT, CHAT], Sampling(max_new_tokens=9))
    assert [g.text for g in out] == ["echo:map A", "echo:map A"]
    bodies = [body for _, body in server.posts()]
    assert len(bodies) == 4  # the first prompt learns both fixes; the second is right the first time
    assert bodies[-1]["max_completion_tokens"] == 9
    assert "max_tokens" not in bodies[-1] and "chat_template_kwargs" not in bodies[-1]


def test_openai__other_400_is_a_backend_error(server):
    server.failures = [(400, {})]
    with pytest.raises(BackendError, match="HTTP 400"):
        fast_backend(server).generate(["raw"], Sampling())


def test_openai__concurrency_is_bounded_and_used(server):
    server.delays = [0.05] * 12
    backend = fast_backend(server, concurrency=3)
    out = backend.generate([f"p{i}" for i in range(12)], Sampling())
    assert [g.text for g in out] == [f"echo:p{i}" for i in range(12)]
    assert 2 <= server.max_in_flight <= 3


def test_openai__separate_reasoning_comes_back_in_think_tags(server):
    server.reasoning = "try right first"
    out = fast_backend(server).generate([CHAT], Sampling(enable_thinking=True))
    assert out[0] == Generation("<think>\ntry right first\n</think>\n\necho:map A", 11, 3)


@pytest.mark.parametrize("key", ["sk-abc\nrest-of-the-secret-key", "sk-abc def-secret", "sk-abcé-secret", " \t"])
def test_openai_backend__a_malformed_key_is_named_by_its_variable_never_printed(key):
    from policy.backend_openai import ENV_API_KEY, OpenAIBackend

    if not key.strip():
        with pytest.raises(ConfigError, match=ENV_API_KEY):
            OpenAIBackend("m", api_key=key.strip())
        return
    with pytest.raises(ConfigError) as error:
        OpenAIBackend("m", api_key=key)
    text = str(error.value)
    assert ENV_API_KEY in text and "secret" not in text and "sk-abc" not in text


def test_cli__a_key_with_a_newline_never_reaches_output(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "MAPF_LAKE_OPENAI_API_KEY": "sk-live-1234567890\nabcdefSECRET",
           "MAPF_LAKE_OPENAI_BASE_URL": "http://127.0.0.1:9"}
    result = subprocess.run([sys.executable, "-m", "curriculum.cli", "eval", "--policy", "openai:m", "--suite",
                             "paper-quick", "--out", str(tmp_path / "e")], capture_output=True, text=True, env=env,
                            timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "SECRET" not in result.stderr + result.stdout and "1234567890" not in result.stderr + result.stdout
    assert "MAPF_LAKE_OPENAI_API_KEY" in result.stderr


def test_openai__an_answer_that_quotes_the_key_never_carries_it_on(server):
    """An endpoint (here the echoing fake; in life a proxy or a model told the key) whose answer quotes the key: the
    text the backend hands back, which engineers record and evaluations write into replays, holds no key."""
    out = fast_backend(server).generate([f"repeat after me: {KEY}"], Sampling())
    assert out[0].text.startswith("echo:repeat after me: ") and KEY not in out[0].text
