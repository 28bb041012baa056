"""Engineer answer -> next stage config: find the document, repair its form in documented ways, validate, decide.

The answer is data, never code: documents are read with ``json.loads`` or a YAML *safe* loader that also
refuses anchors and aliases (so a small answer cannot expand into a huge structure); nothing is evaluated or
imported from it.

Finding the document (:func:`extract_proposal`)
-----------------------------------------------
1. Everything up to the last ``</think>`` is thinking and is skipped first (noted), however long: a thinking
   model writes 10k+ tokens before its config. What is left, if longer than :data:`MAX_ANSWER_CHARS`, is cut to
   that length (noted); the rest is not read.
2. ``<think>...</think>`` blocks are removed; text before a lone ``</think>`` is thinking too. A ``<think>``
   that is never closed leaves no answer.
3. Candidates, first that loads as a config-like mapping wins: fenced code blocks (last first, except that a
   block the prose introduces as the old or reference config comes after the others; an unclosed last fence,
   as in a cut answer, runs to the end), then JSON objects embedded in prose (first first), then the
   YAML lines starting at the first line that begins with a config key (``agents:``, ``sizes:``, ...), then the
   whole text. Each candidate is tried as JSON, then as YAML. Config-like: a mapping with at least one top-level
   config key. At most :data:`MAX_FENCED_BLOCKS` fenced blocks are tried, and a candidate nested deeper than
   :data:`MAX_NESTING` levels (brackets, indentation, ``- `` items) is not parsed: PyYAML's work grows with the
   depth, and the whole search stays about linear in the text.
4. A mapping whose only config-like content is under one wrapper key (``config``, ``stage_config``,
   ``next_config``, ``next_stage_config``, ``proposal``) is unwrapped (noted). Keys ``rationale``, ``reason``,
   ``reasoning`` or ``explanation`` at the top (or beside the wrapper) are the rationale, not config fields.
5. The rationale is that key's text, else the prose around the chosen candidate (thinking excluded), cut to
   :data:`MAX_RATIONALE_CHARS`.

Repairs (:func:`repair_proposal`), each recorded in words; everything else that is wrong rejects the proposal
--------------------------------------------------------------------------------------------------------------
* a document from an unclosed block whose sizes lack fields, or whose listed data ratios sum to less than 1
  (cut at a line boundary after a whole size), is an answer cut off at the length limit: it is rejected (the
  lost sizes cannot be told from sizes meant to be dropped); any document from an unclosed block is noted so;
* a key listed twice (a size, a field) rejects the document, with that reason;
* an answer that lists only some current sizes with data ratios summing to less than 1 edits part of the
  config: the sizes it leaves out are kept, scaled to fill the rest, so the listed ones get exactly what was
  written (ratios summing to 1 are a whole distribution, and the sizes left out are dropped);
* integers written with thousands separators (``6,000``) are read as integers;
* unknown keys, top-level or per size, are dropped;
* missing fields are taken from the previous config: top-level keys, and per-size keys of a side the previous
  config lists (a new side missing a key is rejected);
* numbers written as text are read as numbers: ``"0.3"`` -> 0.3, ``"30%"`` -> 0.3; integer fields written
  as integral floats (``4000.0``) become integers;
* ``samples``, ``seed`` and ``horizon`` values that are not allowed are replaced by the previous config's (the
  curriculum may set them anyway; they never carry the proposal's substance);
* ``sizes`` given as a list of ``{size: 4, data_ratio: ..}`` entries becomes a mapping; a size key written
  ``"4x4"`` means side 4;
* ``data_ratio`` values that are all finite and >= 0, with a positive finite sum other than 1 (beyond the
  1e-6 tolerance), are divided by their sum.

Not repaired (the proposal is rejected and the previous config kept): NaN or infinite ratios, ratios out of
range, sides out of range or negative, capacity or wait rules broken, agents out of range, no document found.
:func:`decide_from_answer` ties it together and never raises for any text.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from engineer.decision import EngineerDecision, make_decision
from policy.parsing import after_thinking, strip_thinking
from simulator.config import (
    DATA_RATIO_TOLERANCE,
    MAX_HORIZON,
    MAX_SAMPLES,
    MAX_SEED,
    REQUIRED_SIZE_KEYS,
    SIZE_KEYS,
    TOP_LEVEL_KEYS,
    StageConfig,
    read_exponent_floats,
    reject_duplicate_json_keys,
)
from simulator.documents import is_integer
from simulator.errors import ConfigError

MAX_ANSWER_CHARS = 32_000  # longer answers are cut here before parsing (a config document is < 2,000 chars)
MAX_RATIONALE_CHARS = 2_000  # the rationale kept in the record
MAX_JSON_STARTS = 64  # '{' positions tried as embedded JSON objects (bounds the work on hostile text)
MAX_FENCED_BLOCKS = 32  # fenced blocks tried, the last ones first (each costs a YAML parse)
MAX_NESTING = 24  # deepest nesting a candidate may have to be parsed (a config document nests 3 or 4 levels)

WRAPPER_KEYS = ("config", "stage_config", "next_config", "next_stage_config", "proposal")
RATIONALE_KEYS = ("rationale", "reason", "reasoning", "explanation")
SIDE_KEYS = ("size", "side", "map_size")  # how a list entry of ``sizes`` names its side
_INTEGER_FIELDS = {"samples": (1, MAX_SAMPLES), "seed": (0, MAX_SEED), "horizon": (1, MAX_HORIZON)}

_FENCE = re.compile(r"```[^\n`]*\n(.*?)(?:```|\Z)", re.DOTALL)
_KEY_LINE = re.compile(r"^(?:" + "|".join(TOP_LEVEL_KEYS) + r")\s*:", re.MULTILINE)
_NUMBER_TEXT = re.compile(r"^\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*$")
_PERCENT_TEXT = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+))\s*%\s*$")
_CONFIG_WORD = re.compile(r"\b(?:agents|samples|sizes|data_ratio|hole_ratio|wait_ratio)\b")
_THOUSANDS_TEXT = re.compile(r"^\s*\d{1,3}(?:,\d{3})+\s*$")
# Prose that introduces a block as the config the engineer was given, not its proposal.
_REFERENCE_INTRO = re.compile(r"for reference|the old|old config|old one|previous config|the previous|original "
                              r"config|current config was|config was:|before:", re.IGNORECASE)
_SQUARE_KEY = re.compile(r"^\s*(\d{1,3})\s*[xX×]\s*(\d{1,3})\s*$")


class _AnswerLoader(yaml.SafeLoader):
    """A YAML safe loader that refuses anchors/aliases and reads ``1e-3`` as a number (as JSON and YAML 1.2 do)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(None, None, "anchors and aliases are not accepted", event.start_mark)
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key: the base constructor says so
                break
            if duplicate:
                raise yaml.constructor.ConstructorError(None, None, f"the key {str(key)[:40]!r} is listed twice",
                                                        key_node.start_mark)
        return super().construct_mapping(node, deep)


read_exponent_floats(_AnswerLoader)


@dataclass
class ParsedAnswer:
    """What :func:`extract_proposal` found in an answer."""

    document: dict | None
    """The config-like mapping (unwrapped, rationale keys removed), or None."""
    rationale: str = ""
    notes: list[str] = field(default_factory=list)
    """How the document was found, when that is worth recording (cut answer, unwrapped, which block)."""
    problem: str | None = None
    """Why there is no document, when there is none."""
    unclosed: bool = False
    """The document came from a fenced block that is never closed: the answer may have been cut off in it."""


def _why_not(block: str, problem: str = "") -> str:
    """Why a block that looks like a config does not load, in words a model's author would act on; ``problem``
    is the YAML loader's complaint when the caller has it already (parsing again costs as much as the first time)."""
    if re.search(r"^\t", block, re.MULTILINE):
        return "a tab in the indentation (YAML indents with spaces)"
    if re.search(r"(^|\s)//", block):
        return "a // comment (JSON has no comments)"
    if re.search(r"^---\s*$", block.strip(), re.MULTILINE):
        return "two YAML documents in one block"
    if re.search(r"\d{4000,}", block):
        return "a number too long to read"
    if problem:
        return " ".join(problem.split())[:120]
    try:
        yaml.load(block, Loader=_AnswerLoader)
    except Exception as error:  # the loader's own words, shortened
        problem = getattr(error, "problem", None) or str(error)
        return " ".join(str(problem).split())[:120]
    return "not a mapping"


_BRACKET = re.compile(r"[\[\]{}]")
_LINE_START = re.compile(r"^( *)((?:-[ \t]+)*)", re.MULTILINE)


def _nesting(text: str) -> int:
    """How deeply ``text`` nests, counted generously in one pass: brackets open at once, and per line the
    indentation levels open plus the ``- `` items that start the line. PyYAML's work per token grows with the
    depth and it recurses once per level, so 30 blocks nested 500 deep took 14-26 s to refuse."""
    deepest = depth = 0
    for match in _BRACKET.finditer(text):
        depth = depth + 1 if match.group() in "[{" else max(depth - 1, 0)
        deepest = max(deepest, depth)
    indents: list[int] = []
    for match in _LINE_START.finditer(text):
        width = len(match.group(1))
        while indents and indents[-1] >= width:
            indents.pop()
        indents.append(width)
        deepest = max(deepest, len(indents) + match.group(2).count("-"))
    return deepest


def _load(text: str, complaints: list[str] | None = None, problems: list[str] | None = None) -> Any:
    """``text`` as JSON, else as safe YAML; None when neither loads (any loader complaint counts as no load).
    A complaint worth telling (aliases, a key listed twice, nesting past :data:`MAX_NESTING`) is appended to
    ``complaints``. Text nested deeper than that is not parsed at all (a config needs 3 or 4 levels)."""
    depth = _nesting(text)
    if depth > MAX_NESTING:
        if complaints is not None and _CONFIG_WORD.search(text):
            complaints.append(f"nested {depth} levels deep (a config needs 3 or 4; more than {MAX_NESTING} is not read)")
        return None
    try:
        return json.loads(text, object_pairs_hook=reject_duplicate_json_keys)
    except (ValueError, RecursionError):
        pass
    try:
        return yaml.load(text, Loader=_AnswerLoader)  # a SafeLoader subclass: plain data only
    except Exception as error:  # YAML raises several types on bad text (and ValueError/OverflowError from constructors)
        problem = getattr(error, "problem", None)
        if complaints is not None and isinstance(problem, str) and ("listed twice" in problem or "alias" in problem):
            complaints.append(problem)
        if problems is not None:
            problems.append(str(problem or error))
        return None


def _config_like(value: Any) -> bool:
    return isinstance(value, Mapping) and any(key in value for key in TOP_LEVEL_KEYS)


def _unwrap(document: Mapping, notes: list[str]) -> tuple[dict | None, str]:
    """The config mapping inside ``document`` and the rationale text beside it (see the module docstring)."""
    rationale = ""
    for key in RATIONALE_KEYS:
        if isinstance(document.get(key), str) and not rationale:
            rationale = document[key]
    if _config_like(document):
        return {key: value for key, value in document.items() if key not in RATIONALE_KEYS}, rationale
    wrapped = [key for key in WRAPPER_KEYS if _config_like(document.get(key))]
    if wrapped:
        notes.append(f"took the config from the answer's {wrapped[0]!r} key")
        inner = document[wrapped[0]]
        for key in RATIONALE_KEYS:
            if isinstance(inner.get(key), str) and not rationale:
                rationale = inner[key]
        return {key: value for key, value in inner.items() if key not in RATIONALE_KEYS}, rationale
    return None, rationale


def _json_objects(text: str) -> list[tuple[int, int]]:
    """Spans of JSON objects embedded in ``text``, left to right, outermost only (bounded work)."""
    decoder = json.JSONDecoder()
    spans: list[tuple[int, int]] = []
    position, tries = 0, 0
    while tries < MAX_JSON_STARTS:
        start = text.find("{", position)
        if start < 0:
            break
        tries += 1
        try:
            _, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            position = start + 1
            continue
        spans.append((start, end))
        position = end
    return spans


def _yaml_block(text: str) -> tuple[int, int] | None:
    """The span of YAML lines starting at the first line that begins with a config key: that line, and the
    following lines that are blank, indented, list items or another ``key:`` line."""
    match = _KEY_LINE.search(text)
    if not match:
        return None
    start = match.start()
    end = start
    for line in text[start:].splitlines(keepends=True):
        stripped = line.strip()
        if end > start and stripped and not line[:1].isspace() and not stripped.startswith("-") and not re.match(
            r"^[\w\"']+\s*:", stripped
        ):
            break
        end += len(line)
    return start, end


def extract_proposal(text: Any) -> ParsedAnswer:
    """Find the proposed document in an engineer's answer (see the module docstring). Never raises."""
    if not isinstance(text, str) or not text.strip():
        return ParsedAnswer(None, problem="the answer is empty")
    notes: list[str] = []
    text, thinking = after_thinking(text)
    if thinking:
        notes.append(f"{thinking} characters of thinking (up to the last </think>) skipped")
    if len(text) > MAX_ANSWER_CHARS:
        notes.append(f"the answer was cut from {len(text)} to {MAX_ANSWER_CHARS} characters before parsing")
        text = text[:MAX_ANSWER_CHARS]
    text = strip_thinking(text)
    if text is None:
        return ParsedAnswer(None, notes=notes, problem="a <think> block is never closed, so there is no answer")
    if not text.strip():
        return ParsedAnswer(None, notes=notes, problem="the answer holds only thinking")

    # (what, start, end, outer_start, outer_end): the document's span, and the span the prose excludes (a
    # fence's markers and language tag are not prose)
    spans: list[tuple[str, int, int, int, int]] = []
    fences = list(_FENCE.finditer(text))
    fresh: list[re.Match[str]] = []
    reference: list[re.Match[str]] = []
    for index, match in enumerate(fences):
        intro = text[fences[index - 1].end() if index else 0:match.start()][-160:]
        (reference if _REFERENCE_INTRO.search(intro) else fresh).append(match)
    unclosed = {match.start(1) for match in fences if not match.group(0).rstrip().endswith("```")}
    # the last block first (models draft, then answer), but a block introduced as the old config comes last
    ordered = [*reversed(fresh), *reversed(reference)]
    if len(ordered) > MAX_FENCED_BLOCKS:
        notes.append(f"only {MAX_FENCED_BLOCKS} of the answer's {len(ordered)} fenced blocks were tried")
    for match in ordered[:MAX_FENCED_BLOCKS]:
        spans.append(("a fenced block", match.start(1), match.end(1), match.start(), match.end()))
    spans += [("a JSON object in the text", start, end, start, end) for start, end in _json_objects(text)]
    block = _yaml_block(text)
    if block:
        spans.append(("YAML lines in the text", *block, *block))
    spans.append(("the whole answer", 0, len(text), 0, len(text)))

    seen: set[tuple[int, int]] = set()
    complaints: list[str] = []
    for what, start, end, outer_start, outer_end in spans:
        if (start, end) in seen:
            continue
        seen.add((start, end))
        problems: list[str] = []
        loaded = _load(text[start:end], complaints, problems)
        if loaded is None and what == "a fenced block" and _CONFIG_WORD.search(text[start:end]) and not complaints:
            complaints.append(_why_not(text[start:end], problems[-1] if problems else ""))
        if not isinstance(loaded, Mapping):
            continue
        document, rationale = _unwrap(loaded, notes)
        if document is None:
            continue
        if what != "the whole answer":
            notes.append(f"read the config from {what}")
        if not rationale:
            prose = text[:outer_start] + " " + text[outer_end:]
            rationale = " ".join(prose.split())
        rationale = rationale.strip()
        if len(rationale) > MAX_RATIONALE_CHARS:
            rationale = rationale[:MAX_RATIONALE_CHARS] + " ...(cut)"
        cut = what == "a fenced block" and start in unclosed
        if cut:  # named whatever is decided: an answer that ends inside its block may have lost its last lines
            notes.append("the config block is never closed: read to the end of the answer, which may have been cut "
                         "off at the length limit")
        return ParsedAnswer(document, rationale, notes, unclosed=cut)
    problem = "no JSON or YAML config document found in the answer"
    if complaints:  # the real reason, when a block that looked like a config said why it is not one
        problem += f": {complaints[0]}"
    return ParsedAnswer(None, notes=notes, problem=problem)


# --- repairs -------------------------------------------------------------------------------------------------
def _as_number(value: Any, where: str, repairs: list[str]) -> Any:
    """Text that spells a number (or a percentage) as that number; anything else unchanged."""
    if isinstance(value, str):
        if _NUMBER_TEXT.match(value):
            number = float(value)
            repairs.append(f"{where}: read the text {value!r} as the number {number!r}")
            return number
        percent = _PERCENT_TEXT.match(value)
        if percent:
            number = float(percent.group(1)) / 100
            repairs.append(f"{where}: read {value!r} as {number!r}")
            return number
    return value


def _as_integer(value: Any, where: str, repairs: list[str]) -> Any:
    if isinstance(value, str) and _THOUSANDS_TEXT.match(value):
        number = int(value.replace(",", ""))
        repairs.append(f"{where}: read {value.strip()!r} as the integer {number}")
        return number
    value = _as_number(value, where, repairs)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        repairs.append(f"{where}: {value!r} read as the integer {int(value)}")
        return int(value)
    return value


def _side_of(key: Any) -> Any:
    """A size key as an int where it plainly names one (``4``, ``"4"``, ``4.0``, ``"4x4"``); anything else is
    returned unchanged for validation to reject with its reason."""
    if isinstance(key, str):
        if re.fullmatch(r"[1-9][0-9]{0,2}", key):
            return int(key)
        match = _SQUARE_KEY.match(key)
        if match and match.group(1) == match.group(2):
            return int(match.group(1))
    if isinstance(key, float) and math.isfinite(key) and key.is_integer():
        return int(key)
    return key


def _sizes_mapping(sizes: Any, repairs: list[str]) -> Any:
    """A ``sizes`` list of ``{size: 4, ...}`` entries as a mapping; other values unchanged."""
    if not isinstance(sizes, list) or not all(isinstance(entry, Mapping) for entry in sizes):
        return sizes
    table: dict[Any, Any] = {}
    for entry in sizes:
        names = [key for key in SIDE_KEYS if key in entry]
        if not names:
            return sizes  # no side named: leave it for validation to reject
        side = entry[names[0]]
        if not isinstance(side, (int, float, str)) or side in table:
            return sizes  # not a plain side, or a side listed twice: leave it for validation to reject
        table[side] = {key: value for key, value in entry.items() if key not in SIDE_KEYS}
    repairs.append("sizes: a list of entries read as a mapping from side to entry")
    return table


def _repair_sizes(sizes: Any, previous: StageConfig, repairs: list[str]) -> Any:
    sizes = _sizes_mapping(sizes, repairs)
    if not isinstance(sizes, Mapping):
        return sizes  # validation rejects it with the reason
    table: dict[Any, Any] = {}
    for key, entry in sizes.items():
        side = _side_of(key)
        if side in table:
            return sizes  # two keys for one side (4 and "4x4"): validation rejects the original as a duplicate
        if side != key and isinstance(key, str) and not key.isdigit():
            repairs.append(f"sizes: key {key!r} read as side {side}")
        if not isinstance(entry, Mapping):
            table[side] = entry
            continue
        where = f"sizes.{side}"
        fixed: dict[str, Any] = {}
        for name, value in entry.items():
            if name in REQUIRED_SIZE_KEYS:
                fixed[name] = _as_number(value, f"{where}.{name}", repairs)
            elif name in SIZE_KEYS:  # a makespan bound: an integer or null
                fixed[name] = None if value is None else _as_integer(value, f"{where}.{name}", repairs)
            else:
                repairs.append(f"{where}: dropped unknown key {str(name)[:60]!r}")
        previous_spec = previous.sizes.get(int(side)) if is_integer(side) else None
        for name in SIZE_KEYS:
            if name not in fixed and previous_spec is not None and getattr(previous_spec, name) is not None:
                fixed[name] = getattr(previous_spec, name)
                repairs.append(f"{where}.{name}: missing; kept the previous {fixed[name]!r}")
        table[side] = fixed
    _merge_partial(table, previous, repairs)
    _renormalise(table, repairs)
    return table


def _merge_partial(table: dict, previous: StageConfig, repairs: list[str]) -> None:
    """An answer that lists only some of the current sizes with data ratios summing to less than 1 edits part
    of the config: the sizes it leaves out are kept from the current config, scaled to fill the rest, so the
    listed sizes get exactly the ratios written. (Listed ratios summing to 1 are a whole distribution: the
    sizes left out are dropped.)"""
    missing = [side for side in previous.sizes if side not in table]
    ratios = [entry.get("data_ratio") if isinstance(entry, Mapping) else None for entry in table.values()]
    if not missing or not all(isinstance(r, (int, float)) and not isinstance(r, bool) and math.isfinite(r) and r >= 0
                              for r in ratios):
        return
    listed = math.fsum(float(r) for r in ratios if r is not None)
    if listed >= 1.0 - DATA_RATIO_TOLERANCE:
        return
    rest = math.fsum(previous.sizes[side].data_ratio for side in missing)
    for side in missing:
        spec = previous.sizes[side]
        share = spec.data_ratio * (1.0 - listed) / rest if rest > 0 else (1.0 - listed) / len(missing)
        table[side] = {**spec.to_dict(), "data_ratio": share}
    repairs.append(f"sizes {', '.join(str(s) for s in sorted(missing))}: not in the answer, whose data ratios "
                   f"summed to {listed:.4g}; kept from the current config, scaled to fill the rest (a partial answer)")


def _renormalise(table: dict, repairs: list[str]) -> None:
    """Divide the data ratios by their sum when they are all finite, >= 0, and sum to a positive finite value
    other than 1 (beyond the tolerance). Otherwise leave them for validation."""
    ratios = [entry.get("data_ratio") if isinstance(entry, Mapping) else None for entry in table.values()]
    try:
        numeric = all(
            isinstance(ratio, (int, float)) and not isinstance(ratio, bool) and math.isfinite(ratio) and ratio >= 0
            for ratio in ratios
        )
        total = math.fsum(float(ratio) for ratio in ratios if ratio is not None) if ratios and numeric else 0.0
    except OverflowError:  # an integer beyond any float, or a sum that overflows: not repairable
        return
    if not ratios or not numeric:
        return
    if not (math.isfinite(total) and total > 0) or abs(total - 1.0) <= DATA_RATIO_TOLERANCE:
        return
    for entry in table.values():
        entry["data_ratio"] = float(entry["data_ratio"]) / total
    repairs.append(f"sizes.*.data_ratio: the ratios summed to {total:.6g}; divided each by the sum")


def repair_proposal(document: Mapping, previous: StageConfig) -> tuple[StageConfig | None, list[str], str]:
    """Apply the documented repairs to ``document`` and validate: ``(config, repairs, reason)``.

    ``config`` is None when the proposal is rejected; ``reason`` then says why (the validation message).
    Never raises for any mapping.
    """
    repairs: list[str] = []
    if not _config_like(document):
        return None, repairs, "the proposal sets no config field (" + ", ".join(TOP_LEVEL_KEYS) + ")"
    before = previous.to_dict()
    fixed: dict[str, Any] = {}
    for key, value in document.items():
        if key in TOP_LEVEL_KEYS:
            fixed[key] = value
        else:
            repairs.append(f"dropped unknown key {str(key)[:60]!r}")
    for key in TOP_LEVEL_KEYS:
        if key not in fixed:
            fixed[key] = before[key]
            repairs.append(f"{key}: missing; kept the previous {before[key]!r}" if key != "sizes"
                           else "sizes: missing; kept the previous sizes")
    agents = fixed["agents"]
    if isinstance(agents, list):
        fixed["agents"] = [_as_integer(entry, "agents", repairs) for entry in agents]
    else:
        fixed["agents"] = _as_integer(agents, "agents", repairs)
    fixed["slip"] = _as_number(fixed["slip"], "slip", repairs)
    for key, (low, high) in _INTEGER_FIELDS.items():
        value = fixed[key]
        if key == "horizon" and value is None:
            continue
        value = _as_integer(value, key, repairs)
        if not (is_integer(value) and low <= value <= high):
            shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
            repairs.append(f"{key}: {shown} is not an integer {low}..{high}; kept the previous {before[key]!r}")
            value = before[key]
        fixed[key] = value
    fixed["sizes"] = _repair_sizes(fixed["sizes"], previous, repairs)
    try:
        config = StageConfig.from_dict(fixed)
    except ConfigError as error:
        return None, repairs, str(error)
    except (TypeError, ValueError, OverflowError, RecursionError) as error:  # e.g. an unhashable or odd key
        return None, repairs, f"not a valid config: {type(error).__name__}: {str(error)[:200]}"
    return config, repairs, "accepted after repairs" if repairs else "accepted"


def _cut_off(parsed: ParsedAnswer) -> str | None:
    """Why the document looks cut off (an unclosed block whose last size lacks fields), or None. A truncated
    answer is rejected rather than completed: the sizes it lost cannot be told from sizes it meant to drop."""
    if not parsed.unclosed:
        return None
    sizes = parsed.document.get("sizes") if isinstance(parsed.document, Mapping) else None
    if isinstance(sizes, Mapping):
        for side, entry in sizes.items():
            lacking = [key for key in REQUIRED_SIZE_KEYS if not isinstance(entry, Mapping) or key not in entry]
            if lacking:
                return (f"the answer stops inside its config block (cut off at the length limit?): size {side} "
                        f"lacks {', '.join(lacking)}, and sizes after it may be lost")
        # Cut at a line boundary, after a whole size: the listed data ratios fall short of 1, which would otherwise
        # read as a partial answer and fill the lost sizes from the current config without a word.
        ratios = [entry.get("data_ratio") for entry in sizes.values()]
        if sizes and all(isinstance(r, (int, float)) and not isinstance(r, bool) and math.isfinite(r) for r in ratios):
            total = sum(ratios)
            if total < 1 - DATA_RATIO_TOLERANCE:
                last = list(sizes)[-1]
                return (f"the answer stops inside its config block (cut off at the length limit?) after size {last}: "
                        f"its data ratios sum to {total:.4g}, so sizes after it may be lost")
    return None


def decide_from_answer(
    engineer: str,
    answer: Any,
    previous: StageConfig,
    context_text: str = "",
    started: float | None = None,
    details: dict | None = None,
) -> EngineerDecision:
    """The decision for an engineer's text answer: parse, repair, validate; the fallback on any failure.

    ``started`` is the ``time.perf_counter()`` at which the decision began (for ``seconds``). Never raises for
    any ``answer``; the returned ``config`` is always valid.
    """
    started = time.perf_counter() if started is None else started
    raw = answer if isinstance(answer, str) else None
    details = dict(details or {})
    if raw is not None:
        details["answer_chars"] = len(raw)
        raw, thinking = after_thinking(raw)
        if thinking:
            details["thinking_chars"] = thinking  # skipped, as extract_proposal does: the record keeps what was read
        if len(raw) > MAX_ANSWER_CHARS:
            raw = raw[:MAX_ANSWER_CHARS]  # the record keeps what was read, no more
    parsed = extract_proposal(answer)
    if parsed.document is None:
        return make_decision(
            engineer, previous, None, f"rejected: {parsed.problem}", raw_answer=raw, repairs=parsed.notes,
            rationale=parsed.rationale, context_text=context_text, seconds=time.perf_counter() - started,
            details=details,
        )
    cut = _cut_off(parsed)
    if cut:
        return make_decision(
            engineer, previous, None, f"rejected: {cut}", raw_answer=raw, repairs=parsed.notes,
            rationale=parsed.rationale, context_text=context_text, seconds=time.perf_counter() - started,
            details=details,
        )
    try:
        config, repairs, reason = repair_proposal(parsed.document, previous)
    except Exception as error:  # a shape no repair foresaw: still the engineer's fault, never a crashed run
        config, repairs, reason = None, [], f"the proposal could not be read: {type(error).__name__}: {error}"[:300]
    return make_decision(
        engineer, previous, config, reason if config is not None else f"rejected: {reason}",
        raw_answer=raw, proposal=parsed.document, repairs=parsed.notes + repairs, rationale=parsed.rationale,
        context_text=context_text, seconds=time.perf_counter() - started, details=details,
    )


__all__ = [
    "MAX_ANSWER_CHARS",
    "MAX_RATIONALE_CHARS",
    "ParsedAnswer",
    "decide_from_answer",
    "extract_proposal",
    "repair_proposal",
]
