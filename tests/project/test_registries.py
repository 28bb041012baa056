"""Every list of names comes from its registry: no hand-typed copy of a registry's names in the library.

A hand-typed list drifts (``mapf-lake eval --suite test-small`` was once refused because ``policy/cli.py`` kept its
own list of suites). The library's source is read with ``ast`` (nothing is run) and every registry below is looked
for in two shapes:

- a list, tuple or set literal of 3 or more string constants, every one a name of the registry;
- a string constant (a help text, a message, a docstring; the text parts of an f-string too) naming 3 or more of
  the registry's names in one run of items separated by commas, ``or``, ``and`` or ``|`` (``fixed, rule or
  bandit``; quotes and backticks around a name are read through). A run that says it is an example (``e.g.`` or
  ``for example`` before it, ``...`` after it) does not claim to be the list and is not counted.

The registry's own definition and the few places that have reason to spell names out are in ``ALLOWED``, each with
its reason. ``python tests/project/test_registries.py`` prints every copy found (exit status 1 when there is one).
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ("simulator", "render", "policy", "engineer", "curriculum", "replays")
MIN_NAMES = 3  # two names side by side are often a comparison ("fixed or rule"), not a copy of the list


def _suites() -> set[str]:
    from simulator.suites import SUITES

    return set(SUITES)


def _presets() -> set[str]:
    from curriculum.config import PRESETS

    return set(PRESETS)


def _engineers() -> set[str]:
    from engineer.engineers import ENGINEERS

    return set(ENGINEERS)


def _prompt_styles() -> set[str]:
    from policy.prompts import PROMPT_STYLES

    return set(PROMPT_STYLES)


def _bench_targets() -> set[str]:
    from curriculum.benches.cli import BENCHES

    return set(BENCHES)


def _scripted_policies() -> set[str]:
    from policy.scripted import SCRIPTED_POLICIES

    return set(SCRIPTED_POLICIES)


def _backends() -> set[str]:
    from policy.backends import BACKENDS

    return set(BACKENDS)


# registry name -> its names (imported when the test runs)
REGISTRIES: dict[str, Callable[[], set[str]]] = {
    "SUITES": _suites,
    "PRESETS": _presets,
    "ENGINEERS": _engineers,
    "PROMPT_STYLES": _prompt_styles,
    "BENCHES": _bench_targets,
    "SCRIPTED_POLICIES": _scripted_policies,
    "BACKENDS": _backends,
}

# (file relative to the root, registry) -> why the names are spelled out there
ALLOWED: dict[tuple[str, str], str] = {
    ("simulator/suites.py", "SUITES"): "the registry's own module: its docstring describes each suite it registers "
                                       "(cells, sizes, seeds), beside the registration",
    ("engineer/engineers.py", "ENGINEERS"): "the registry's own module: its docstring describes each engineer it "
                                            "registers, beside the registration",
    ("policy/scripted.py", "SCRIPTED_POLICIES"): "the registry's own module: its docstring names the policies it "
                                                 "defines and registers",
}


@dataclass(frozen=True)
class Copy:
    path: str  # relative to the root
    line: int
    registry: str
    names: tuple[str, ...]  # the registry's names found there, in order
    shape: str  # "literal" or "text"

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.shape} naming {self.registry} {', '.join(self.names)}"


_ITEM = r"[`'\"]*\w[\w:.-]*[`'\"]*"  # a name, perhaps quoted or in backticks
_SEPARATOR = r"(?:\s*,\s*(?:or\s+|and\s+)?|\s+or\s+|\s+and\s+|\s*\|\s*)"
_RUN = re.compile(rf"{_ITEM}(?:{_SEPARATOR}{_ITEM})+")
_EXAMPLE_BEFORE = re.compile(r"(?:\be\.g\.,?|\bfor example,?)\s*$")
_EXAMPLE_AFTER = re.compile(r"^(?:,\s*)?\.\.\.")


def names_in_text(text: str, names: set[str]) -> list[tuple[str, ...]]:
    """Each run of separated items in ``text`` that holds ``MIN_NAMES`` or more of ``names``: those names."""
    found = []
    for run in _RUN.finditer(text):
        if _EXAMPLE_BEFORE.search(text[:run.start()]) or _EXAMPLE_AFTER.match(text[run.end():]):
            continue
        items = [item.strip("`'\"").rstrip(".:") for item in re.split(_SEPARATOR, run.group(0))]
        named = tuple(item for item in items if item in names)
        if len(set(named)) >= MIN_NAMES:
            found.append(named)
    return found


def _strings(node: ast.AST) -> Iterator[ast.Constant]:
    for child in ast.walk(node):
        if isinstance(child, ast.Constant) and isinstance(child.value, str):
            yield child


def copies_in_source(source: str, path: str, registries: dict[str, set[str]]) -> list[Copy]:
    """Every hand-typed copy of a registry's names in one module's source (see the module docstring)."""
    tree = ast.parse(source)
    found: set[Copy] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            values = [element.value for element in node.elts
                      if isinstance(element, ast.Constant) and isinstance(element.value, str)]
            if len(values) < MIN_NAMES or len(values) != len(node.elts):
                continue
            for registry, names in registries.items():
                if all(value in names for value in values):
                    found.add(Copy(path, node.lineno, registry, tuple(values), "literal"))
    for constant in _strings(tree):
        for registry, names in registries.items():
            for named in names_in_text(constant.value, names):
                found.add(Copy(path, constant.lineno, registry, named, "text"))
    return sorted(found, key=lambda copy: (copy.path, copy.line, copy.registry))


def library_copies(root: Path = ROOT) -> list[Copy]:
    registries = {name: names() for name, names in REGISTRIES.items()}
    found = []
    for package in LIBRARY:
        for file in sorted((root / package).rglob("*.py")):
            path = file.relative_to(root).as_posix()
            found += [copy for copy in copies_in_source(file.read_text(encoding="utf-8"), path, registries)
                      if (copy.path, copy.registry) not in ALLOWED]
    return found


@functools.cache
def _copies_in_this_library() -> tuple[Copy, ...]:
    return tuple(library_copies())


@pytest.mark.parametrize("registry", sorted(REGISTRIES))
def test_registries__no_library_module_spells_out_a_registry_s_names(registry):
    copies = [copy for copy in _copies_in_this_library() if copy.registry == registry]
    assert not copies, (f"a hand-written list of {registry}'s names (derive it from {registry}, or add an "
                        "ALLOWED entry with the reason): " + "; ".join(map(str, copies)))


@pytest.mark.parametrize("registry", sorted(REGISTRIES))
def test_registries__each_registry_has_enough_names_to_be_copied(registry):
    assert len(REGISTRIES[registry]()) >= MIN_NAMES  # else the scan could never find a copy of it


def test_registries__allowed_entries_still_hold_a_copy():
    registries = {name: names() for name, names in REGISTRIES.items()}
    for path, registry in ALLOWED:
        source = (ROOT / path).read_text(encoding="utf-8")
        assert [copy for copy in copies_in_source(source, path, registries) if copy.registry == registry], (
            f"ALLOWED names {path} for {registry} but it holds no copy any more: drop the entry")


ENGINEER_NAMES = {"fixed", "rule", "bandit", "window", "target"}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('CHOICES = ["fixed", "rule", "bandit"]', [("literal", ("fixed", "rule", "bandit"))]),
        ('CHOICES = ("fixed", "rule", "bandit", "window")', [("literal", ("fixed", "rule", "bandit", "window"))]),
        ('CHOICES = {"fixed", "rule", "other"}', []),  # not every item a name
        ('CHOICES = ["fixed", "rule"]', []),  # two names: a pair, not the list
        ('CHOICES = ["fixed", "rule", NAME]', []),  # not every item a constant
        ('HELP = "an engineer: fixed, rule or bandit"', [("text", ("fixed", "rule", "bandit"))]),
        ('HELP = "the `fixed`, `rule`, `bandit` and `window` engineers"',
         [("text", ("fixed", "rule", "bandit", "window"))]),
        ("HELP = \"one of 'fixed' | 'rule' | 'target'\"", [("text", ("fixed", "rule", "target"))]),
        ('HELP = f"{arm}: fixed, rule or bandit"', [("text", ("fixed", "rule", "bandit"))]),
        ('def f():\n    """Compare fixed, rule, bandit."""', [("text", ("fixed", "rule", "bandit"))]),
        ('HELP = "a fixed rule with a bandit"', []),  # the words, not a list
        ('HELP = "fixed or rule"', []),
        ('HELP = "an engineer (e.g. fixed, rule, bandit)"', []),  # an example, not the list
        ('HELP = "``fixed``, ``rule``, ``bandit``, ..."', []),
        ('HELP = "fixed, rule, bandit; e.g. window"', [("text", ("fixed", "rule", "bandit"))]),
        ('HELP = f"one of {\', \'.join(sorted(ENGINEERS))}"', []),  # derived: the way to do it
    ],
)
def test_copies_in_source__finds_lists_and_texts_of_names(source, expected):
    found = copies_in_source(source, "planted.py", {"ENGINEERS": ENGINEER_NAMES})
    assert [(copy.shape, copy.names) for copy in found] == expected


def test_library_copies__a_planted_copy_in_a_library_module_is_found(tmp_path):
    for package in LIBRARY:
        (tmp_path / package).mkdir()
    (tmp_path / "policy" / "planted.py").write_text('STYLES = ("natural", "compact", "compact-nb")\n'
                                                     'HELP = "a suite: paper, paper-quick or test-small"\n')
    found = {(copy.registry, copy.shape) for copy in library_copies(tmp_path)}
    assert found == {("PROMPT_STYLES", "literal"), ("SUITES", "text")}


if __name__ == "__main__":
    copies = library_copies()
    print("\n".join(map(str, copies)) or "no hand-written list of a registry's names")
    sys.exit(1 if copies else 0)
