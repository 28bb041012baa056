"""Completion text -> joint plan, or a parse error with a reason.

Tolerant of what models really write: a ``<think>...</think>`` block (or several) before the answer, code
fences, ``Agent 0:`` / ``agent 0 -`` / ``A0`` labels, words ``up/down/left/right/wait`` or letters
``U D L R W`` (also run together, ``UURD``; each letter may carry the cell it leads to as two to six digits,
``U22R23``, as the ``compact-xy`` style writes them: the cells are ignored), separated by spaces, commas, arrows
or brackets, prose around the answer. Strict about what matters: every agent exactly once, no unknown token
inside an agent's sequence, no sequence longer than the horizon.

Where the answer is: the last ``<answer>...</answer>`` block after the thinking; else the last fenced code
block that holds a plan (an agent line with an action; a map drawn in a later block is not the answer); else
the whole text after the thinking. Inside it, lines that carry no agent label are ignored; several agents on
one line (``{"agent 0": "RR", "agent 1": "L"}``) are split at the comma before each label.

:func:`parse_plan` never raises for any input string: every problem is a :class:`ParseResult` with
``plan = None`` and ``error`` saying why (the reasons are listed in ``PARSE_ERRORS``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from simulator import constants as C
from simulator.types import JointPlan

MAX_COMPLETION_CHARS = 1_000_000  # longer answers are rejected unread (documented limit)

PARSE_ERRORS = {
    "empty": "the answer is empty",
    "too_long": f"the answer is longer than {MAX_COMPLETION_CHARS} characters",
    "unfinished_thinking": "a <think> block is never closed, so there is no answer after it",
    "no_agents": "no line of the answer names an agent",
    "unknown_agent": "the answer names an agent that does not exist",
    "duplicate_agent": "an agent appears more than once",
    "missing_agent": "an agent is missing from the answer",
    "unknown_action": "an agent's sequence has a token that is not an action",
    "too_many_steps": "an agent's sequence is longer than the horizon",
}

# Tags are found one at a time, each search starting where the last ended, so the work stays linear in the text
# (a non-greedy ``<think>.*?</think>`` regex rescans the rest of the text from every unclosed opening tag: 8,000
# ``<think>`` tags took ~6 s).
_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_ANSWER_OPEN = re.compile(r"<answer>", re.IGNORECASE)
_ANSWER_CLOSE = re.compile(r"</answer>", re.IGNORECASE)
_FENCE_BLOCK = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)
# "agent 0:", "Agent 0 -", "Agent 0 ->", "A0", "a_0", "**Agent 0**:", "1. Agent 0:", '"agent 0": [...]' (markdown
# bold, list markers, a numbered list and JSON quotes around the label are tolerated). Group 1 is the agent's
# number, group 2 what follows the label; the viewers find action tokens with it too (``render.completion``).
AGENT_LINE = re.compile(r"^[\s*#>\-{\"']*(?:\d{1,3}[.)]\s+)?[\s*#>\-\"']*(?:agent|a)[\s_#]*(\d{1,4})\b[\s*\"']*"
                        r"(?:->|=>|→|[:=\-])?[\s*]*(.*)$", re.IGNORECASE)
# An answer line may restate its agent's prompt line before the actions (the ``compact-nb-copy`` style copies it
# whole): the start and goal ``r,c>r,c`` and, optionally, the start's four neighbours ``U.DHL.R.``. Skipped.
_RESTATED = re.compile(r"\s*\d{1,4},\d{1,4}>\d{1,4},\d{1,4}(?:\s+U[.H]D[.H]L[.H]R[.H](?=\s|$))?")
# A comma that starts another agent's entry on the same line ('{"agent 0": "RR", "agent 1": "L"}', "A0: R, A1: L").
_NEXT_AGENT = re.compile(r",\s*(?=[\"']?(?:agent|a)[\s_#]*\d{1,4}\b[\s\"']*(?:->|=>|→|[:=\-]))", re.IGNORECASE)
_SEPARATORS = re.compile(r"[\s,;|\[\]()'\"`*{}]+|->|→|=>|\.(?=\s|$)")
_TRAILING_COMMENT = re.compile(r"\(([^()]*)\)[\s.,;]*$")  # "R R (reaches goal)"
_ARROWS = {"→": C.RIGHT, "←": C.LEFT, "↑": C.UP, "↓": C.DOWN}
_ONLY_ARROWS = re.compile(r"[\s,→←↑↓]*[→←↑↓][\s,→←↑↓]*")
_NO_ACTIONS = ("none", "(none)", "-", "nothing", "stay", "(stays)", "stays")
_WORDS = {"up": C.UP, "down": C.DOWN, "left": C.LEFT, "right": C.RIGHT, "wait": C.WAIT}
_LETTER_CHARS = "".join(letter.lower() for letter in C.ACTION_LETTERS)
# Letters each followed by the cell they lead to ("u22r23", the compact-xy answers); the digits are dropped.
_CELL_TRACE = re.compile(rf"(?:[{_LETTER_CHARS}](?:\d{{2,6}})?)+")
_CELL_DIGITS = re.compile(r"\d+")
_LETTER_CODES = bytes.maketrans(_LETTER_CHARS.encode(), bytes(range(len(C.ACTION_LETTERS))))

_WORD = re.compile(r"[A-Za-z]+")
_ACTION_WORD_SET = frozenset(_WORDS)
_ACTION_LETTER_SET = frozenset(_LETTER_CHARS)


def line_action_spans(line: str) -> tuple[int, list[tuple[int, int]]] | None:
    """``(agent, spans)`` when ``line`` starts with an agent label (:data:`AGENT_LINE`) and every word after it is
    an action word (up, down, left, right, wait) or a run of action letters (``UURD``, one span per letter; the
    digits of ``compact-xy`` cells and the separators are skipped): ``spans`` are the ``(start, end)`` columns of
    its action tokens, step by step. None for any other line (prose, a map row, no actions). Finding the tokens is
    not parsing (the judged plan comes from :func:`parse_plan`): the viewers highlight them, and GRPO's failure
    credit (``policy.rewards.failure_spans``) finds the move that failed with them."""
    label = AGENT_LINE.match(line)
    if not label:
        return None
    found: list[tuple[int, int]] = []
    restated = _RESTATED.match(line, label.start(2))
    for word in _WORD.finditer(line, restated.end() if restated else label.start(2)):
        lowered = word.group().lower()
        if lowered in _ACTION_WORD_SET:
            found.append((word.start(), word.end()))
        elif set(lowered) <= _ACTION_LETTER_SET:
            found.extend((word.start() + i, word.start() + i + 1) for i in range(len(lowered)))
        else:
            return None  # prose, not an action list
    return (int(label.group(1)), found) if found else None


@dataclass(frozen=True)
class ParseResult:
    plan: JointPlan | None
    error: str | None  # None when parsed; else a reason from PARSE_ERRORS (plus detail)

    @property
    def ok(self) -> bool:
        return self.plan is not None


def _fail(key: str, detail: str = "") -> ParseResult:
    return ParseResult(None, PARSE_ERRORS[key] + (f": {detail}" if detail else ""))


def _without_thinking(text: str) -> str | None:
    """``text`` with every closed ``<think>...</think>`` block replaced by a newline (each opening tag closes at
    the first closing tag after it), or None when a block is never closed. Linear time."""
    parts: list[str] = []
    position = 0
    while (opening := _THINK_OPEN.search(text, position)) is not None:
        closing = _THINK_CLOSE.search(text, opening.end())
        if closing is None:  # an unclosed block: whatever follows is still thinking
            return None
        parts.append(text[position:opening.start()])
        parts.append("\n")
        position = closing.end()
    parts.append(text[position:])
    return "".join(parts)


def _last_answer_block(text: str) -> str | None:
    """The content of the last closed ``<answer>...</answer>`` block (each opening tag closes at the first closing
    tag after it), or None. Once an opening tag has no closing tag after it, no later one can. Linear time."""
    found = None
    position = 0
    while (opening := _ANSWER_OPEN.search(text, position)) is not None:
        closing = _ANSWER_CLOSE.search(text, opening.end())
        if closing is None:
            break
        found = text[opening.end():closing.start()]
        position = closing.end()
    return found


def after_thinking(text: str) -> tuple[str, int]:
    """``text`` after its last ``</think>`` (any case) and how many characters came before; ``(text, 0)``
    without one. Linear in the text's length."""
    close = text.lower().rfind("</think>")
    if close < 0:
        return text, 0
    end = close + len("</think>")
    return text[end:], end


def strip_thinking(text: str) -> str | None:
    """``text`` without its thinking: every closed ``<think>...</think>`` block becomes a newline, and what comes
    before a lone ``</think>`` (a template that opens the block in the prompt leaves only the closing tag) is
    dropped; None when a ``<think>`` block is never closed. Linear time."""
    kept = _without_thinking(text)
    if kept is None:
        return None
    last_close = None
    for last_close in _THINK_CLOSE.finditer(kept):  # noqa: B007 (the answer follows the last closing tag)
        pass
    if last_close is not None:
        kept = kept[last_close.end():]
    return kept


def _answer_region(text: str) -> str | None:
    """The part of ``text`` that holds the answer, or None when thinking never ends."""
    after_thinking = strip_thinking(text)
    if after_thinking is None:
        return None
    block = _last_answer_block(after_thinking)
    if block is not None:
        return block
    fences: list[str] = _FENCE_BLOCK.findall(after_thinking)  # one group: the blocks' contents
    for fence in reversed(fences):  # the last block that holds a plan: not, say, a map drawn after the answer
        if _holds_a_plan(fence):
            return fence
    if not fences:
        return after_thinking
    outside = _FENCE_BLOCK.sub("\n", after_thinking)  # the plan is in the prose; the blocks hold something else
    return outside if _holds_a_plan(outside) else fences[-1]


def _holds_a_plan(text: str) -> bool:
    """Whether some agent line of ``text`` has at least one action."""
    for line in text.splitlines():
        match = AGENT_LINE.match(line)
        if match:
            actions = _actions(match.group(2))
            if isinstance(actions, list) and actions:
                return True
    return False


def _actions(body: str) -> list[int] | str:
    """Action codes of one agent's sequence, or the first token that is not an action. Arrows alone are moves
    (``→ →`` is R R; between letters they separate); ``none`` is no actions; a trailing parenthesised comment
    that is not itself a sequence (``R R (reaches goal)``) is ignored; a restated prompt line before the actions
    (``0,1>0,2 UHD.LHR. R``: :data:`_RESTATED`) is skipped."""
    restated = _RESTATED.match(body)
    stripped = (body[restated.end():] if restated else body).strip().rstrip(",;")
    if stripped.lower().strip("\"'") in _NO_ACTIONS:
        return []
    if _ONLY_ARROWS.fullmatch(stripped):
        return [_ARROWS[char] for char in stripped if char in _ARROWS]
    comment = _TRAILING_COMMENT.search(stripped)
    if comment and comment.start() > 0 and isinstance(_tokens(comment.group(1)), str):
        stripped = stripped[:comment.start()]
    return _tokens(stripped)


def _tokens(body: str) -> list[int] | str:
    out: list[int] = []
    for token in _SEPARATORS.split(body):
        if not token:
            continue
        word = token.lower().rstrip(".:")
        if not word:
            continue
        if word in _WORDS:
            out.append(_WORDS[word])
        elif not word.strip(_LETTER_CHARS) and word.isascii():
            out.extend(word.encode().translate(_LETTER_CODES))  # "uurd" -> codes, in C
        elif word.isascii() and _CELL_TRACE.fullmatch(word):
            out.extend(_CELL_DIGITS.sub("", word).encode().translate(_LETTER_CODES))  # "u22r23" -> U R
        else:
            return token[:40]
    return out


def parse_plan(text: str, n_agents: int, horizon: int = C.MAX_PLAN_LENGTH) -> ParseResult:
    """Parse ``text`` into a joint plan for ``n_agents`` agents, each sequence at most ``horizon`` long."""
    if not isinstance(text, str) or not text.strip():
        return _fail("empty")
    if len(text) > MAX_COMPLETION_CHARS:
        return _fail("too_long")
    region = _answer_region(text)
    if region is None:
        return _fail("unfinished_thinking")
    sequences: dict[int, list[int]] = {}
    for line in (part for whole in region.splitlines() for part in _NEXT_AGENT.split(whole)):
        match = AGENT_LINE.match(line)
        if not match:
            continue
        agent = int(match.group(1))
        if agent >= n_agents:
            return _fail("unknown_agent", f"agent {agent} (agents are 0..{n_agents - 1})")
        if agent in sequences:
            return _fail("duplicate_agent", f"agent {agent}")
        actions = _actions(match.group(2))
        if isinstance(actions, str):
            return _fail("unknown_action", f"agent {agent}: {actions!r}")
        if len(actions) > min(horizon, C.MAX_PLAN_LENGTH):
            return _fail("too_many_steps", f"agent {agent}: {len(actions)} > {min(horizon, C.MAX_PLAN_LENGTH)}")
        sequences[agent] = actions
    if not sequences:
        return _fail("no_agents")
    missing = [k for k in range(n_agents) if k not in sequences]
    if missing:
        return _fail("missing_agent", f"agent {missing[0]}")
    return ParseResult(JointPlan.from_sequences([sequences[k] for k in range(n_agents)]), None)
