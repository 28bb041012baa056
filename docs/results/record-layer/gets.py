"""Every ``.get(`` in the library packages, sorted into what it reads.

    .venv/bin/python docs/results/record-layer/gets.py [--list CATEGORY]

Each call is judged by its receiver: the expression before ``.get(`` (``decision.details`` in
``decision.details.get("candidates")``), found in the module's syntax tree, so two calls on one line are judged
apart and a file holds no call no rule names. Categories (the first rule whose file and receiver patterns both
match decides; an unmatched call is ``unsorted``, so a new ``.get(`` is either given a rule here or shows up):

* ``document``: a file, an HTTP payload, a model's answer, a replay header, a user's ``--set``, a checkpoint's
  saved state: data from outside the process, whose keys may be missing; reading it with ``.get`` is the checked
  way.
* ``foreign``: another library's objects (TRL's logs and kwargs, verl's config, pygame events, os.environ).
* ``lookup``: a keyed collection (caches, counters, tables keyed by map side or (side, makespan)): the key's
  absence is an answer, not a missing field.
* ``record``: a fixed-field dict made in this process and read by field name: what the record layer types.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("simulator", "render", "policy", "engineer", "curriculum", "replays")

# (file regex, receiver regex, category): both patterns match whole (the receiver's whitespace runs read as one
# space); the first rule that matches decides. A rule names receivers, never a whole file, so a new receiver in a
# file some rule already covers is still unsorted until it is read.
RULES = [
    # anywhere
    (r".*", r"os\.environ|pygame\.event", "foreign"),
    (r".*", r"\{.*\}", "lookup"),  # a literal table: {"yml": "yaml"}.get(format, format)

    # fixed-field dicts made in this process, read by field name
    (r"policy/evaluation\.py", r"self\.policy", "record"),  # the policy descriptor (open-ended by policy kind)
    (r"curriculum/loop/validation\.py", r"model\.descriptor", "record"),
    (r"curriculum/benches/gpu\.py|engineer/lookahead\.py", r"decision\.details", "record"),  # free-form details
    (r"curriculum/loop/curriculum\.py", r"clock\.laps", "record"),  # StageTimings' fields, accumulated
    (r"policy/openenv_env\.py", r"result\.info", "record"),  # a step's info dict (the gym convention)
    (r"curriculum/benches/render\.py", r"row", "record"),  # a draw row of the bench's figures

    # keyed collections
    (r"policy/evaluation\.py", r"recorded", "lookup"),  # two same-keyed runs compared key by key (the key iterated)
    (r"curriculum/benches/(gen|sim)\.py", r"results", "lookup"),  # a peer's section: absent when it was not run
    (r"simulator/config\.py", r"_SUFFIX_FORMATS", "lookup"),
    (r"simulator/fields\.py", r"docs", "lookup"),
    (r"simulator/movingai\.py", r"TILE_CODES", "lookup"),
    (r"simulator/needs_wait\.py", r"dists\[k\]", "lookup"),
    (r"simulator/solver\.py", r"best", "lookup"),
    (r"simulator/text\.py", r"goals", "lookup"),
    (r"render/completion\.py", r"self\._wrapped", "lookup"),
    (r"render/draw\.py", r"self\._(fonts|texts|boards)|cache\.(panels|overlays)|marks|tones|by_line", "lookup"),
    (r"render/play_app\.py", r"self\._saved_as", "lookup"),
    (r"render/term\.py", r"goal_of|occupant|by_line", "lookup"),
    (r"render/timeline\.py", r"self\._scenes", "lookup"),
    (r"render/watch_app\.py", r"tones", "lookup"),
    (r"replays/codec_v1\.py", r"_WEIGHTS|_INSTANCE_CACHE", "lookup"),
    (r"replays/mining\.py", r"hole_ratios", "lookup"),
    (r"replays/registry\.py", r"CODECS", "lookup"),
    (r"replays/types\.py", r"state|state\.get\(\"_decoders\", _NO_DECODERS\)", "lookup"),  # __dict__, decoders
    (r"policy/rewards\.py", r"_INSTANCE_CACHE", "lookup"),
    (r"policy/models\.py", r"ranks", "lookup"),
    (r"policy/multiturn\.py", r"self\._by_prompt", "lookup"),
    (r"policy/backend_openai\.py", r"applied", "lookup"),  # refusals counted by parameter
    (r"policy/verifiers_env\.py", r"weights", "lookup"),  # reward weights by component; absent is 0
    # a diff over the union of two descriptors' keys: a key one side lacks is shown as None
    (r"policy/evaluation\.py", r"was|now", "lookup"),
    (r"engineer/engineers\.py", r"ENGINEERS", "lookup"),
    (r"engineer/bandit\.py", r"signal|self\.(values|counts)", "lookup"),
    (r"engineer/context\.py", r"failures", "lookup"),  # counts by failure category
    (r"engineer/gap\.py", r"by_size_wait", "lookup"),
    (r"engineer/mutate\.py", r"shares", "lookup"),
    (r"engineer/progress\.py", r"by_size|signal\.by_size|self\.(rates|values)", "lookup"),
    (r"engineer/proposal\.py", r"previous\.sizes", "lookup"),
    (r"engineer/replay\.py", r"behavior\.by_size(_makespan)?|material\.outcomes", "lookup"),
    (r"engineer/rule\.py", r"values|by_size", "lookup"),
    (r"engineer/target\.py", r"signal|self\.targets", "lookup"),
    (r"curriculum/benches/solver\.py", r"statuses", "lookup"),
    (r"curriculum/benches/lift\.py", r"row\['by_side'\]", "lookup"),
    (r"curriculum/commands\.py", r"result\.arms|arm\.vs_reference|stage\.sizes", "lookup"),
    (r"curriculum/loop/curriculum\.py", r"self\.laps", "lookup"),
    (r"curriculum/plugins/trl_hooks\.py", r"_STREAMS", "lookup"),
    # versions by package, kernel facts by variable (run_installation, run_kernels) and figures by arm or metric
    (r"curriculum/reports/installation\.py", r"versions|arm|reference|fact", "lookup"),
    (r"curriculum/reports/compare\.py", r"adjusted\[key\]|result\.holm_arms|entry\.metrics|vs", "lookup"),

    # another library's objects
    (r"curriculum/plugins/verl_sampler\.py", r"section|config|row|extra|message|reward", "foreign"),  # verl config, rows
    (r"curriculum/plugins/trl_hooks\.py", r"entry", "foreign"),  # TRL's log_history
    (r"curriculum/loop/records\.py", r"entry", "foreign"),  # TRL's log_history (TrainingReport.from_log)
    (r"curriculum/training/common\.py", r"logs", "foreign"),
    (r"curriculum/benches/gpu\.py", r"config", "foreign"),  # a transformers model's config.json
    (r"policy/models\.py", r"info", "foreign"),  # transformers' loading report (missing_keys, ...)
    (r"policy/verifiers_env\.py", r"kwargs", "foreign"),
    (r"policy/multiturn\.py", r"generation_kwargs or \{\}", "foreign"),
    (r"policy/(openrlhf_reward|rewards)\.py", r"prompt\[-1\]|completion\[-1\]", "foreign"),  # chat messages
    (r"policy/backend_base\.py", r"message", "foreign"),
    (r"policy/prompts\.py", r"m", "foreign"),
    (r"policy/backend_openai\.py", r"error\.headers", "foreign"),  # urllib's HTTPError

    # data from outside the process
    (r"simulator/(documents|config|pogema)\.py", r"data", "document"),
    (r"render/source\.py", r"policy", "document"),  # a replay header's policy descriptor
    (r"engineer/proposal\.py", r"document|inner|entry|parsed\.document", "document"),  # a model's answer
    (r"curriculum/benches/tokens\.py", r"run\.engineer\.options", "document"),  # the user's engineer options (set or not)
    (r"engineer/(decision|options)\.py", r"document", "document"),
    (r"engineer/gap\.py", r"document|spec", "document"),  # a decision's saved state
    (r"engineer/replay\.py", r"state or \{\}|entry", "document"),  # a decision's saved state
    (r"engineer/evidence\.py", r"header\.extra", "document"),
    (r"curriculum/loop/records\.py", r"data|scores", "document"),
    (r"curriculum/loop/folder\.py", r"document|data|recorded|current", "document"),
    (r"curriculum/loop/curriculum\.py", r"read_decision\(previous\)\.details", "document"),
    (r"curriculum/config\.py", r"base", "document"),  # a preset's document
    (r"curriculum/commands\.py", r"overrides", "document"),
    (r"curriculum/loop/manifest\.py", r"document|data|inner", "document"),  # a run's manifest.json
    (r"curriculum/plugins/trl_hooks\.py", r"document", "document"),
    (r"curriculum/plugins/verl_sampler\.py", r"state", "document"),  # a checkpoint's saved state
    (r"curriculum/training/(common|rft)\.py", r"mark", "document"),  # a round's checkpoint mark
    (r"policy/score\.py|policy/openenv_env\.py", r"record", "document"),
    (r"policy/evaluation\.py", r"header\.extra|instances", "document"),
    (r"policy/backend_openai\.py", r"body|answer_format|schema|answer\.payload|choice|message|payload|usage|error",
     "document"),  # the HTTP request and answer bodies
    (r"policy/reasoning_gym_task\.py", r"entry", "document"),  # what reasoning-gym hands back
    (r"policy/prompts\.py", r"load_json\(.*\)", "document"),
    (r"engineer/answer_schema\.py", r"schema", "document"),  # a JSON Schema node, whose keywords are each optional
]


class Get(NamedTuple):
    path: str  # relative to the repository root, e.g. "engineer/lookahead.py"
    line: int  # the line that holds ``.get``
    receiver: str  # the expression before ``.get(``, whitespace runs as one space
    category: str


def classify(path: str, receiver: str) -> str:
    """The category of a ``receiver.get(..)`` call in ``path``: the first rule that matches both, else unsorted."""
    receiver = " ".join(receiver.split())
    for file_pattern, receiver_pattern, category in RULES:
        if re.fullmatch(file_pattern, path) and re.fullmatch(receiver_pattern, receiver):
            return category
    return "unsorted"


def receivers(source: str) -> list[tuple[int, str]]:
    """``(line, receiver)`` of every ``X.get(..)`` call in ``source``, in source order."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            text = ast.get_source_segment(source, node.func.value) or ""
            found.append((node.func.end_lineno or node.lineno, node.func.end_col_offset or 0, " ".join(text.split())))
    return [(line, text) for line, _, text in sorted(found)]


def calls() -> list[Get]:
    out = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for line, receiver in receivers(path.read_text()):
                out.append(Get(rel, line, receiver, classify(rel, receiver)))
    return out


def main() -> None:
    found = calls()
    counts: dict[str, int] = {}
    for call in found:
        counts[call.category] = counts.get(call.category, 0) + 1
    print(f"{len(found)} .get( calls in {', '.join(PACKAGES)}: " + ", ".join(
        f"{name} {count}" for name, count in sorted(counts.items())))
    shown = sys.argv[sys.argv.index("--list") + 1] if "--list" in sys.argv else "record"
    lines: dict[str, list[str]] = {}
    for call in found:
        if call.category in (shown, "unsorted"):
            text = lines.setdefault(call.path, (ROOT / call.path).read_text().splitlines())[call.line - 1].strip()
            receiver = f"({call.receiver})" if " " in call.receiver else call.receiver
            print(f"  {call.category:<8} {call.path}:{call.line}: {receiver}.get  |  {text[:80]}")


if __name__ == "__main__":
    main()
