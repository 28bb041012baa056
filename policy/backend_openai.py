"""``openai:MODEL``: any OpenAI-compatible HTTP endpoint (OpenAI, ``vllm serve``, ``trl vllm-serve``'s OpenAI
front, Gemini's compatibility API, ...), standard library only.

Base URL from ``MAPF_LAKE_OPENAI_BASE_URL`` (default ``https://api.openai.com/v1``), key from
``MAPF_LAKE_OPENAI_API_KEY`` or else ``OPENAI_API_KEY``. No API key ever appears in an error message, a repr or a
log line.

Answers held to a JSON Schema (:meth:`OpenAIBackend.generate_json`) send ``response_format={"type":
"json_schema", "json_schema": {"name", "schema", "strict": true}}``: the endpoint's own structured outputs
(OpenAI's, ``vllm serve``'s guided decoding, Gemini's compatibility API). An endpoint that refuses it (a 400
naming ``response_format``, as OpenAI does for a schema outside its strict subset: optional keys, bounds on
object sizes) is asked again with ``strict: false`` (the schema guides the model, the server does not enforce
it), and if refused again, without ``response_format``; both are learnt like the other refused fields and
reported by :attr:`OpenAIBackend.schema_relaxed`, which the engineer records.
"""

from __future__ import annotations

import json
import os
import random
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

from policy.backend_base import BackendError, Generation, Prompt, Sampling, check_prompts
from simulator.errors import ConfigError
from simulator.secrets import HIDDEN, SHORT_SECRET, hold, redact

ENV_BASE_URL = "MAPF_LAKE_OPENAI_BASE_URL"
ENV_API_KEY = "MAPF_LAKE_OPENAI_API_KEY"
ENV_API_KEY_FALLBACK = "OPENAI_API_KEY"
DEFAULT_BASE_URL = "https://api.openai.com/v1"

# A 400/422 answer that names one of these request fields means the endpoint does not take it. The fix is applied
# to that request and to every later one of this backend: OpenAI's reasoning models want max_completion_tokens;
# only vLLM/SGLang know chat_template_kwargs and top_k; a few gateways refuse seed.
_FIELD_FIXES: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "max_tokens": lambda body: {
        **{k: v for k, v in body.items() if k != "max_tokens"}, "max_completion_tokens": body["max_tokens"]
    },
    "chat_template_kwargs": lambda body: {k: v for k, v in body.items() if k != "chat_template_kwargs"},
    "top_k": lambda body: {k: v for k, v in body.items() if k != "top_k"},
    "seed": lambda body: {k: v for k, v in body.items() if k != "seed"},
    "response_format": lambda body: _relaxed_format(body),
}
_RETRY_STATUSES = frozenset({408, 409, 425, 429})  # plus every 5xx
_KEY_CHARACTERS = re.compile(r"[\x21-\x7e]+")  # what an Authorization header can carry unmangled


def _relaxed_format(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with its response format one step looser: a strict json_schema becomes the same schema with
    ``strict: false``; anything else is dropped (the module docstring)."""
    answer_format = body.get("response_format")
    if isinstance(answer_format, dict) and isinstance(answer_format.get("json_schema"), dict):
        schema = answer_format["json_schema"]
        if schema.get("strict"):
            return {**body, "response_format": {**answer_format, "json_schema": {**schema, "strict": False}}}
    return {k: v for k, v in body.items() if k != "response_format"}


def _without_userinfo(url: str) -> str:
    """``url`` with everything between ``//`` and its last ``@`` replaced by ``<hidden>`` (for messages): a password
    may hold an unescaped ``/`` or ``:``, so the parser's idea of where it ends is not trusted."""
    head, slashes, rest = url.partition("//")
    if "@" not in rest:
        return url
    return f"{head}{slashes}{HIDDEN}@{rest.rsplit('@', 1)[1]}"


def check_base_url(base_url: Any, scrub: Callable[[str], str] = lambda text: text) -> None:
    """ConfigError naming ``MAPF_LAKE_OPENAI_BASE_URL`` unless ``base_url`` is an http(s) URL with a host, a numeric
    port if any, and no ``user:password@`` part. Credentials in the URL are refused, not used: the host-name lookup
    was sent ``user:password@host`` and every error message printed them; the key belongs in the key variable."""
    allowed = f"an http:// or https:// URL such as {DEFAULT_BASE_URL}"
    if not isinstance(base_url, str):
        raise ConfigError(ENV_BASE_URL, type(base_url).__name__, allowed)
    shown = scrub(_without_userinfo(base_url))
    if "@" in base_url:
        raise ConfigError(ENV_BASE_URL, shown, f"{allowed}, without user:password@ (put the key in {ENV_API_KEY}; "
                          "a key in the URL would be sent to the host-name lookup and shown in messages)")
    try:
        parsed = urllib.parse.urlparse(base_url)
        parsed.port  # noqa: B018 (a port that is not a number raises ValueError here)
    except ValueError as error:  # "http://[::1", "http://host:abc"
        raise ConfigError(ENV_BASE_URL, shown, allowed, scrub(str(error))) from None
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ConfigError(ENV_BASE_URL, shown, allowed)
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in base_url):
        raise ConfigError(ENV_BASE_URL, shown, f"{allowed}, without spaces or control characters")


class _TransportError(Exception):
    """No HTTP answer at all: connection refused or reset, DNS failure, timeout."""


@dataclass(frozen=True)
class _Answer:
    status: int
    payload: Any  # parsed JSON, or the text when the body is not JSON
    retry_after_s: float | None


class OpenAIBackend:
    """Chat completions for chats, completions for raw text, over any OpenAI-compatible endpoint.

    Requests run ``concurrency`` at a time in a thread pool and keep their order in the result. A request that
    times out, cannot connect, or gets 408/409/425/429/5xx is retried up to ``max_retries`` times, waiting
    ``backoff_s * 2**attempt`` (with a little jitter, or the server's ``Retry-After``, at most 60 s). 401/403
    raise ConfigError naming the key variable. :meth:`check` (``GET {base}/models``, short timeout) runs before
    any generation: a missing key, an unreachable endpoint or an unknown model fails before work starts.

    The key lives only in this object's private attribute and the Authorization header; every message that
    leaves this class is scrubbed of it (and of anything shaped like a bearer token or an API key).
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str,
        timeout_s: float = 120.0,
        check_timeout_s: float = 10.0,
        max_retries: int = 5,
        backoff_s: float = 1.0,
        concurrency: int = 8,
    ) -> None:
        self.spec = f"openai:{model}"
        self._api_key = api_key
        hold(api_key)  # every text the project prints or stores from now on is redacted of it
        self.model = model
        check_base_url(base_url, self._scrub)
        if not api_key:
            raise ConfigError(
                ENV_API_KEY, "<unset>",
                f"an API key in {ENV_API_KEY} (or {ENV_API_KEY_FALLBACK}); for a server that needs none, any value",
            )
        if not isinstance(api_key, str) or not _KEY_CHARACTERS.fullmatch(api_key):
            # never the value itself: say what is wrong with it (an HTTP header would print the whole key)
            flaw = ("a line break" if any(c in api_key for c in "\r\n") else "a space" if any(c.isspace() for c in api_key)
                    else "a character outside printable ASCII") if isinstance(api_key, str) else type(api_key).__name__
            raise ConfigError(ENV_API_KEY, f"{HIDDEN} (a key that contains {flaw})",
                              "printable ASCII without spaces or line breaks (check the variable for a pasted "
                              "newline)")
        for name, value, low in (("timeout_s", timeout_s, 0), ("check_timeout_s", check_timeout_s, 0),
                                 ("backoff_s", backoff_s, -1e-12)):
            if not isinstance(value, (int, float)) or value <= low:
                raise ConfigError(f"openai.{name}", value, "a positive number of seconds")
        for name, value, low in (("max_retries", max_retries, 0), ("concurrency", concurrency, 1)):
            if not isinstance(value, int) or value < low:
                raise ConfigError(f"openai.{name}", value, f"an integer >= {low}")
        self.base_url = base_url.rstrip("/")
        self.timeout_s = float(timeout_s)
        self.check_timeout_s = float(check_timeout_s)
        self.max_retries = max_retries
        self.backoff_s = float(backoff_s)
        self.concurrency = concurrency
        self._checked = False
        self._fixes: list[str] = []  # field names of _FIELD_FIXES this endpoint needed, in the order learnt
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls, model: str) -> "OpenAIBackend":
        """The backend for ``model`` configured from the environment (see the module docstring)."""
        base_url = os.environ.get(ENV_BASE_URL, "").strip() or DEFAULT_BASE_URL
        api_key = os.environ.get(ENV_API_KEY, "").strip() or os.environ.get(ENV_API_KEY_FALLBACK, "").strip()
        return cls(model, base_url=base_url, api_key=api_key)

    def __repr__(self) -> str:
        return f"OpenAIBackend(spec={self.spec!r}, base_url={self._scrub(self.base_url)!r}, api_key={HIDDEN!r})"

    def __reduce__(self) -> Any:  # a pickled backend would carry the key into a file: refuse
        raise TypeError("OpenAIBackend holds an API key and cannot be pickled; make it again from the environment")

    def _scrub(self, text: str) -> str:
        key = self._api_key
        if key and len(key) < SHORT_SECRET:  # a placeholder ("x", "EMPTY"): whole tokens only, here only
            text = re.sub(rf"(?<![\w-]){re.escape(key)}(?![\w-])", HIDDEN, text)
        return redact(text)  # the key itself is held (simulator.secrets) from __init__ on: every sink hides it

    # --- HTTP ------------------------------------------------------------------------------------------------

    def _send(self, method: str, path: str, body: dict[str, Any] | None, timeout_s: float) -> _Answer:
        request = urllib.request.Request(
            self.base_url + path,
            data=None if body is None else json.dumps(body).encode("utf-8"),
            method=method,
            headers={
                "Authorization": f"Bearer {self._api_key}",
                "Content-Type": "application/json",
                "Accept": "application/json",
                "User-Agent": "mapf-lake",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                return _Answer(response.status, _parse_body(response.read()), None)
        except urllib.error.HTTPError as error:
            retry_after = _retry_after_s(error.headers.get("Retry-After") if error.headers else None)
            try:
                raw = error.read()
            except OSError:
                raw = b""
            finally:
                error.close()
            return _Answer(error.code, _parse_body(raw), retry_after)
        except (urllib.error.URLError, TimeoutError, socket.timeout, ConnectionError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise _TransportError(f"{type(reason).__name__}: {reason}") from None

    def _call(self, method: str, path: str, body: dict[str, Any] | None, timeout_s: float,
              max_retries: int) -> _Answer:
        """One request with retries; returns the last answer (any status) or raises _TransportError."""
        attempt = 0
        while True:
            try:
                answer = self._send(method, path, body, timeout_s)
            except _TransportError:
                if attempt >= max_retries:
                    raise
                wait_s = None
            else:
                if not (answer.status in _RETRY_STATUSES or answer.status >= 500) or attempt >= max_retries:
                    return answer
                wait_s = answer.retry_after_s
            if wait_s is None:
                wait_s = self.backoff_s * 2**attempt * (1 + 0.25 * random.random())
            time.sleep(min(wait_s, 60.0))
            attempt += 1

    def check(self) -> None:
        """Fail now, with a clear ConfigError, if the endpoint is unreachable, refuses the key, or lacks the model."""
        url = self._scrub(self.base_url)
        try:
            answer = self._call("GET", "/models", None, self.check_timeout_s, max_retries=1)
        except _TransportError as error:
            raise ConfigError(
                ENV_BASE_URL, url,
                "a reachable OpenAI-compatible endpoint (e.g. https://api.openai.com/v1, http://HOST:8000/v1)",
                detail=self._scrub(str(error)),
            ) from None
        if answer.status in (401, 403):
            raise self._key_refused(answer, "GET /models")
        if answer.status == 404:
            raise ConfigError(ENV_BASE_URL, url, "the API root that serves GET /models (it usually ends in /v1)")
        if not 200 <= answer.status < 300:
            raise ConfigError(
                ENV_BASE_URL, url, "an endpoint that answers GET /models",
                detail=self._scrub(f"HTTP {answer.status}: {_error_message(answer.payload)}"),
            )
        data = answer.payload.get("data") if isinstance(answer.payload, dict) else None
        listed = [str(item["id"]) for item in data or [] if isinstance(item, dict) and "id" in item]
        # Some gateways list ids with a prefix ("models/gemini-2.0-flash"); accept a match after the last "/".
        if listed and self.model not in listed and not any(name.endswith("/" + self.model) for name in listed):
            shown = ", ".join(sorted(listed)[:8]) + (", ..." if len(listed) > 8 else "")
            raise ConfigError("backend", self.spec, f"a model this endpoint serves: {shown}")
        self._checked = True

    def _key_refused(self, answer: _Answer, what: str) -> ConfigError:
        return ConfigError(
            ENV_API_KEY, HIDDEN, f"a key that {self._scrub(self.base_url)} accepts",
            detail=self._scrub(f"HTTP {answer.status} on {what}: {_error_message(answer.payload)}"),
        )

    # --- generation ------------------------------------------------------------------------------------------

    @property
    def schema_relaxed(self) -> str | None:
        """What this endpoint refused of :meth:`generate_json`'s response format, in words; None when nothing."""
        with self._lock:
            steps = self._fixes.count("response_format")
        if steps == 0:
            return None
        if steps == 1:
            return "the endpoint refused a strict json_schema response_format: sent with strict false (the schema " \
                   "guides the model, the server does not enforce it)"
        return "the endpoint refused response_format: the answer is free text, read by the repair path"

    def _request_body(self, prompt: Prompt, sampling: Sampling, index: int,
                      schema: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": sampling.max_new_tokens,
            "temperature": float(sampling.temperature),
            "top_p": float(sampling.top_p),
            "seed": (sampling.seed + index) % (2**63),
            "n": 1,
        }
        if sampling.top_k:
            body["top_k"] = sampling.top_k
        if schema is not None:
            name = re.sub(r"[^A-Za-z0-9_-]+", "_", str(schema.get("title") or "answer"))[:64]
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": name, "schema": schema, "strict": True}}
        if isinstance(prompt, str):
            return "/completions", {**body, "prompt": prompt}
        body = {**body, "messages": prompt, "chat_template_kwargs": {"enable_thinking": sampling.enable_thinking}}
        return "/chat/completions", body

    def _one(self, prompt: Prompt, sampling: Sampling, index: int,
             schema: dict[str, Any] | None = None) -> Generation:
        path, body = self._request_body(prompt, sampling, index, schema)
        with self._lock:
            learnt = list(self._fixes)
        for field in learnt:
            if field in body:
                body = _FIELD_FIXES[field](body)
        tried: set[str] = set()
        applied: dict[str, int] = {}
        while True:
            try:
                answer = self._call("POST", path, body, self.timeout_s, self.max_retries)
            except _TransportError as error:
                raise BackendError(
                    self._scrub(f"{self.spec}: POST {self.base_url}{path} failed after {self.max_retries + 1} "
                                f"attempts: {error}")
                ) from None
            if 200 <= answer.status < 300:
                return self._parse_generation(answer.payload, path)
            if answer.status in (401, 403):
                raise self._key_refused(answer, f"POST {path}")
            message = _error_message(answer.payload)
            refused = _refused_field(answer.status, message, body, tried)
            if refused is None:
                raise BackendError(
                    self._scrub(f"{self.spec}: HTTP {answer.status} on POST {self.base_url}{path}: {message}")
                )
            fixed = _FIELD_FIXES[refused](body)
            if refused not in fixed:  # a fix that removes its field is the last; one that loosens it may be followed
                tried.add(refused)
            body = fixed
            applied[refused] = applied.get(refused, 0) + 1
            with self._lock:
                while self._fixes.count(refused) < applied[refused]:
                    self._fixes.append(refused)

    def _parse_generation(self, payload: Any, path: str) -> Generation:
        try:
            choice = payload["choices"][0]
            if path == "/completions":
                text = choice.get("text") or ""
            else:
                message = choice["message"]
                text = message.get("content") or ""
                # Servers with a reasoning parser return the thinking apart; put it back in Qwen3's tags so the
                # completion reads the same as from the other backends.
                reasoning = message.get("reasoning_content") or message.get("reasoning")
                if isinstance(reasoning, str) and reasoning:
                    text = f"<think>\n{reasoning}\n</think>\n\n{text}"
            usage = payload.get("usage") or {}
            return Generation(
                text=self._scrub(str(text)),  # an answer that quotes the key (an echoing proxy) never carries it on
                prompt_tokens=int(usage.get("prompt_tokens") or 0),
                completion_tokens=int(usage.get("completion_tokens") or 0),
            )
        except (KeyError, IndexError, TypeError, AttributeError, ValueError):
            shown = self._scrub(json.dumps(payload)[:300] if not isinstance(payload, str) else payload[:300])
            raise BackendError(f"{self.spec}: unexpected answer shape from {path}: {shown}") from None

    def generate_json(self, prompts: list[Prompt], sampling: Sampling, schema: dict[str, Any]) -> list[Generation]:
        """Like :meth:`generate`, each request sent with the JSON Schema ``schema`` as its ``response_format``
        (the module docstring says what happens where the endpoint refuses it)."""
        if not isinstance(schema, dict):
            raise ConfigError("schema", schema, "a JSON Schema (a mapping)")
        return self.generate(prompts, sampling, schema)

    def generate(self, prompts: list[Prompt], sampling: Sampling,
                 schema: dict[str, Any] | None = None) -> list[Generation]:
        """See the module contract; ``completion_tokens``/``prompt_tokens`` are the server's ``usage`` (0 if none);
        ``schema``: :meth:`generate_json`."""
        prompts = check_prompts(prompts)
        if not self._checked:
            self.check()
        if not prompts:
            return []
        workers = min(self.concurrency, len(prompts))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mapf-lake-openai") as pool:
            futures = [pool.submit(self._one, prompt, sampling, index, schema) for index, prompt in enumerate(prompts)]
            try:
                return [future.result() for future in futures]
            except BaseException:
                for future in futures:  # stop queued requests; running ones finish on their own
                    future.cancel()
                raise


def _parse_body(raw: bytes) -> Any:
    text = raw.decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


def _retry_after_s(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff


def _error_message(payload: Any) -> str:
    if isinstance(payload, dict):
        error = payload.get("error", payload)
        if isinstance(error, dict):
            return str(error.get("message") or error)[:500]
        if isinstance(error, list) and error:  # some gateways wrap the error object in a list
            return _error_message(error[0])
        return str(error)[:500]
    return str(payload)[:500]


def _refused_field(status: int, message: str, body: dict[str, Any], tried: set[str]) -> str | None:
    """The request field a 400/422 ``message`` says the endpoint does not take, if we know a fix for it."""
    if status not in (400, 422):
        return None
    for field in _FIELD_FIXES:
        if field in body and field not in tried and re.search(rf"(?<![\w]){re.escape(field)}(?![\w])", message):
            return field
    return None
