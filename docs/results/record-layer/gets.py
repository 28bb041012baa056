"""Every ``.get(`` in the library packages, sorted into what it reads.

    .venv/bin/python docs/results/record-layer/gets.py [--list CATEGORY]

Categories (the first rule that matches a call decides; an unmatched call is ``unsorted``, so a new ``.get(`` is
either given a rule here or shows up):

* ``document``: a file, an HTTP payload, a model's answer, a replay header, a user's ``--set``, a bench's JSON
  results: data from outside the process, whose keys may be missing; reading it with ``.get`` is the checked way.
* ``foreign``: another library's objects (TRL's logs and kwargs, verl's config, pygame events, os.environ).
* ``lookup``: a keyed collection (caches, counters, tables keyed by map side or (side, makespan)): the key's
  absence is an answer, not a missing field.
* ``record``: a fixed-field dict made in this process and read by field name: what the record layer types.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("simulator", "render", "policy", "engineer", "curriculum", "replays")

# (file regex, line regex, category): the first match decides.
RULES = [
    (r".*", r"os\.environ\.get|pygame\.event\.get", "foreign"),
    # fixed-field dicts made in this process, read by field name
    (r"policy/evaluation\.py", r"self\.policy\.get", "record"),  # the policy descriptor (a header's too)
    (r"curriculum/loop/validation\.py", r"descriptor\.get", "record"),
    (r"curriculum/benches/gpu\.py|engineer/lookahead\.py", r"details\.get", "record"),  # a decision's free-form details
    (r"curriculum/benches/tokens\.py", r"options\.get", "record"),  # an engineer's options mapping
    (r"curriculum/loop/curriculum\.py", r"clock\.laps\.get", "record"),
    (r"curriculum/training/rft\.py", r"info\.figures\.get", "record"),  # a trainer's other figures
    (r"policy/openenv_env\.py", r"result\.info\.get", "record"),  # a step's info dict (the gym convention)
    # keyed collections
    (r".*", r"_cache|_CACHE|_fonts|_texts|_boards|cache\.|_scenes|_wrapped|_saved_as|_by_prompt|_WEIGHTS|"
            r"CODECS\.get|ENGINEERS\.get|TILE_CODES|_decoders|ranks\.get|best\.get|dists\[|hole_ratios\.get", "lookup"),
    (r".*", r"\.laps\.get\(name|statuses\.get|counts\.get|self\.values\.get|self\.rates\.get|self\.targets\.get|"
            r"values\.get\(side|shares\.get|goals\.get|goal_of|occupant|by_line|marks\.get|tones\.get|"
            r"_SUFFIX_FORMATS|\{\"yml\"|\{\"\.jsonl\"|\{\"llm:self\"|docs\.get", "lookup"),
    (r".*", r"by_size(_wait|_makespan)?\.get\(|signal\.get\(side|by_size\.get\(side|\.sizes\.get\(|"
            r"result\.arms\.get|vs_reference\.get|metrics\.get|vs\.get\(|holm_arms\.get|adjusted\[key\]\.get|"
            r"failures\.get\(name|material\.outcomes\.get", "lookup"),
    # another library's objects
    (r"curriculum/plugins/(verl_sampler|trl_hooks)\.py", r".", "foreign"),
    (r"curriculum/training/common\.py", r"logs\.get", "foreign"),
    (r"policy/(verifiers_env|multiturn|openrlhf_reward|backend_base|rewards|prompts)\.py", r"kwargs|content|role|weights|"
     r"eos_token_id", "foreign"),
    (r"curriculum/benches/gpu\.py", r"config\.get\(key\)", "foreign"),  # a transformers model config
    # data from outside the process
    (r"simulator/(documents|config|pogema)\.py|engineer/(proposal|decision|gap|options|replay|evidence)\.py|"
     r"curriculum/loop/(records|folder|curriculum)\.py|curriculum/reports/report\.py|curriculum/config\.py|"
     r"policy/(score|evaluation|backend_openai|reasoning_gym_task|openenv_env|prompts)\.py|render/(source|svg)\.py|"
     r"curriculum/training/(common|rft)\.py|replays/types\.py|engineer/context\.py|curriculum/commands\.py|"
     r"curriculum/benches/(gen|sim|render|lift)\.py|simulator/config\.py|policy/cli\.py", r".", "document"),
]


def classify(path: str, line: str) -> str:
    for file_pattern, line_pattern, category in RULES:
        if re.fullmatch(file_pattern, path) and re.search(line_pattern, line):
            return category
    return "unsorted"


def calls() -> list[tuple[str, int, str, str]]:
    out = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for number, line in enumerate(path.read_text().splitlines(), 1):
                for _ in re.finditer(r"\.get\(", line):
                    out.append((rel, number, line.strip(), classify(rel, line)))
    return out


def main() -> None:
    found = calls()
    counts: dict[str, int] = {}
    for *_, category in found:
        counts[category] = counts.get(category, 0) + 1
    print(f"{len(found)} .get( calls in {', '.join(PACKAGES)}: " + ", ".join(
        f"{name} {count}" for name, count in sorted(counts.items())))
    shown = sys.argv[sys.argv.index("--list") + 1] if "--list" in sys.argv else "record"
    for path, number, line, category in found:
        if category in (shown, "unsorted"):
            print(f"  {category:<8} {path}:{number}: {line[:100]}")


if __name__ == "__main__":
    main()
