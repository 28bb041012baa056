"""One redaction at every sink: once the process holds a key (the OpenAI-compatible backend read it), no run
record, replay episode, log line or command-line error the project writes carries it."""

from __future__ import annotations

import json

import pytest

from simulator import secrets
from simulator.secrets import HIDDEN, hold, redact, redacted_where_held

KEY = "sk-held-0123456789abcdefHELDKEY"


@pytest.fixture()
def held(monkeypatch):
    """A key held for the test alone (the process-wide set restored after it)."""
    monkeypatch.setattr(secrets, "_HELD", set())
    hold(KEY)
    return KEY


def test_redact__hides_a_held_key_anywhere_and_key_shaped_tokens(held):
    text = f"the server said: invalid key {KEY}; try Bearer abc.def or AIza{'x' * 24}"
    out = redact(text)
    assert KEY not in out and "abc.def" not in out and "AIza" not in out
    assert out.count(HIDDEN) == 3


def test_hold__a_short_placeholder_is_not_held_so_lone_letters_survive(monkeypatch):
    monkeypatch.setattr(secrets, "_HELD", set())
    hold("x")
    hold("EMPTY")
    assert redacted_where_held("a 3 x 3 board, EMPTY cells") == "a 3 x 3 board, EMPTY cells"


def test_redacted_where_held__nothing_held_leaves_a_models_key_shaped_words_alone(monkeypatch):
    monkeypatch.setattr(secrets, "_HELD", set())
    assert redacted_where_held("sk-abcdefghijklmnop") == "sk-abcdefghijklmnop"


def test_openai_backend__holds_its_key_from_construction(monkeypatch):
    from policy.backend_openai import OpenAIBackend

    monkeypatch.setattr(secrets, "_HELD", set())
    OpenAIBackend("m", base_url="http://127.0.0.1:9/v1", api_key=KEY)
    assert secrets.holding() and redacted_where_held(f"echo {KEY}") == f"echo {HIDDEN}"


def test_sinks__run_record_replay_log_and_error_line_never_carry_the_key(held, tmp_path, capsys):
    from curriculum.loop.curriculum import log_to_stderr
    from curriculum.loop.records import write_record
    from replays.reader import read_replay
    from replays.writer import ReplayWriter
    from tests.replays.test_replay_format import header, simple_episode

    write_record(tmp_path / "decision.json", {"raw_answer": f"my key is {KEY}", "config": {}}, "decision")
    assert KEY not in (tmp_path / "decision.json").read_text()
    assert json.loads((tmp_path / "decision.json").read_text())["raw_answer"] == f"my key is {HIDDEN}"

    with ReplayWriter(tmp_path / "r.mlr", header()) as writer:
        writer.write(simple_episode(completion=f"answer quoting {KEY}", parse_error=f"bad answer {KEY}"))
    assert KEY.encode() not in (tmp_path / "r.mlr").read_bytes()
    (back,) = read_replay(tmp_path / "r.mlr")[1]
    assert back.completion == f"answer quoting {HIDDEN}" and back.parse_error == f"bad answer {HIDDEN}"

    log_to_stderr(f"stage 1: engineer said {KEY}")
    assert KEY not in capsys.readouterr().err


def test_replay_writer__holding_a_key_leaves_a_non_text_field_to_the_codecs_refusal(held, tmp_path):
    from replays.errors import ReplayError
    from replays.writer import ReplayWriter
    from tests.replays.test_replay_format import header, simple_episode

    with ReplayWriter(tmp_path / "r.mlr", header()) as writer:
        with pytest.raises(ReplayError, match="prompt"):
            writer.write(simple_episode(prompt=b"bytes"))
