"""The import graph of the project's packages, read from the source with ``ast`` (nothing is imported).

Each import is listed with when it runs: ``load`` (a module's body, its ``if``/``try`` blocks and class bodies:
run when the module is imported), ``call`` (inside a function: run when it is called) or ``typing`` (in an
``if TYPE_CHECKING:`` block: never run). The rules of the layout (docs/reference/layout.md) checked here:
- no import cycles among the ``load`` imports (a module would meet a half-initialised one);
- none either once the ``call`` imports are added: the late imports that used to hide a circle
  (``curriculum.training.run`` <-> ``curriculum.training.trainers``, ``simulator.solver`` <-> ``simulator.needs_wait``) are gone;
- no library package imports ``curriculum`` (the top of the graph: the stage loop, the trainers, the CLI's entry
  point and the benchmarks), in any of the three ways;
- every module of ``curriculum/benches/`` is a ``mapf-lake bench`` target of the same name, and the other way round.

``python tests/project/test_layout.py`` prints the graph's edge counts, its cycles and every import of ``curriculum``
from below (exit status 1 when there is one).
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The packages pyproject.toml installs; curriculum is the top, the others are the library.
PACKAGES = ("simulator", "replays", "policy", "engineer", "render", "curriculum")
TOP = "curriculum"


@dataclass(frozen=True)
class Import:
    source: str  # the importing module, e.g. "curriculum.training.run"
    target: str  # the project module it loads, e.g. "curriculum.training.trainers"
    line: int
    when: str  # "load", "call" or "typing" (the module docstring says which is which)


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the packages by dotted name (a package by its own name, for its ``__init__.py``)."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The project module that loading ``name`` runs last: ``name`` itself, or its nearest parent that is one."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    """The imports of project modules in one file, each with when it runs."""
    is_package = path.name == "__init__.py"
    found: list[Import] = []

    def add(target: str | None, node: ast.stmt, when: str) -> None:
        edge = Import(name, target or "", node.lineno, when)
        if target is not None and target != name and edge not in found:  # one per line: `from a import b, c`
            found.append(edge)

    def visit(body: list[ast.stmt], when: str) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    add(_resolve(alias.name, modules), node, when)
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: from the module's package, up level - 1 more
                    package = name.split(".") if is_package else name.split(".")[:-1]
                    base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                for alias in node.names:  # ``from simulator import constants`` loads simulator.constants
                    add(_resolve(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base, modules),
                        node, when)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(node.body, "typing" if when == "typing" else "call")
            elif isinstance(node, ast.If) and _is_type_checking(node.test):
                visit(node.body, "typing")
                visit(node.orelse, when)
            else:  # class bodies, if/try/with/for blocks: run with the code around them (their functions are not)
                for field in ("body", "orelse", "finalbody", "handlers"):
                    visit(getattr(node, field, []) or [], when)
                if isinstance(node, ast.Match):
                    for case in node.cases:
                        visit(case.body, when)

    visit(ast.parse(path.read_text(), str(path)).body, "load")
    return found


def import_graph(root: Path = ROOT) -> list[Import]:
    modules = module_files(root)
    return [edge for name, path in modules.items() for edge in imports_of(name, path, modules)]


def cycles(edges: list[Import]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted; sorted by first name."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
        graph.setdefault(edge.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(node: str) -> None:  # recursive: the graph is a few hundred modules deep at most
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph[node]):
            if successor not in index:
                connect(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return sorted(components)


def describe(component: list[str], edges: list[Import]) -> str:
    """One cycle as its edges inside the component: ``a -> b (line 12)``."""
    members = set(component)
    inside = sorted({(e.source, e.target, e.line) for e in edges if e.source in members and e.target in members})
    return "; ".join(f"{source} -> {target} (line {line})" for source, target, line in inside)


def upward_imports(edges: list[Import]) -> list[Import]:
    """Imports of ``curriculum`` from the library packages, top-level or not."""
    return [e for e in edges if e.target.split(".")[0] == TOP and e.source.split(".")[0] != TOP]


def _run(edges: list[Import]) -> list[Import]:
    return [e for e in edges if e.when != "typing"]


def test_layout__no_import_cycles_among_top_level_imports():
    edges = [e for e in import_graph() if e.when == "load"]
    assert [describe(component, edges) for component in cycles(edges)] == []


def test_layout__no_import_cycles_through_imports_inside_functions_either():
    edges = _run(import_graph())
    assert [describe(component, edges) for component in cycles(edges)] == []


def test_layout__no_library_package_imports_curriculum():
    assert [f"{e.source} -> {e.target} (line {e.line}, {e.when})" for e in upward_imports(import_graph())] == []


def test_layout__every_bench_module_is_a_bench_target_of_its_name():
    from curriculum.benches.cli import BENCHES

    modules = {path.stem for path in (ROOT / "curriculum" / "benches").glob("*.py")} - {"__init__", "cli"}
    assert sorted(modules) == sorted(BENCHES)


def test_layout__the_graph_reader_sees_each_kind_of_import(tmp_path):
    """The reader itself, on a made-up package: top-level, relative, from-package, class-body, function-level and
    TYPE_CHECKING imports, and the cycles of each set."""
    package = tmp_path / "simulator"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text(
        "from typing import TYPE_CHECKING\nfrom . import b\nif TYPE_CHECKING:\n    from simulator import c\n"
        "class K:\n    import simulator.d\ndef f():\n    from simulator.e import x\n")
    (package / "b.py").write_text("from simulator.a import K\n")
    (package / "c.py").write_text("import simulator.a\n")
    (package / "d.py").write_text("")
    (package / "e.py").write_text("try:\n    pass\nexcept ImportError:\n    from simulator import a\n")
    edges = import_graph(tmp_path)
    assert {(e.source, e.target, e.when) for e in edges} == {
        ("simulator.a", "simulator.b", "load"), ("simulator.a", "simulator.c", "typing"),
        ("simulator.a", "simulator.d", "load"), ("simulator.a", "simulator.e", "call"),
        ("simulator.b", "simulator.a", "load"), ("simulator.c", "simulator.a", "load"),
        ("simulator.e", "simulator.a", "load")}
    assert cycles([e for e in edges if e.when == "load"]) == [["simulator.a", "simulator.b"]]
    assert cycles(_run(edges)) == [["simulator.a", "simulator.b", "simulator.e"]]
    assert cycles(edges) == [["simulator.a", "simulator.b", "simulator.c", "simulator.e"]]


def main() -> int:
    edges = import_graph()
    counts = {when: sum(e.when == when for e in edges) for when in ("load", "call", "typing")}
    print(f"{len(module_files())} modules; imports of project modules: {counts['load']} top-level, "
          f"{counts['call']} inside functions, {counts['typing']} under TYPE_CHECKING")
    top_level = [e for e in edges if e.when == "load"]
    found = cycles(top_level)
    print(f"cycles of top-level imports: {len(found)}")
    for component in found:
        print(f"  {describe(component, top_level)}")
    run = _run(edges)
    late = [c for c in cycles(run) if c not in found]
    print(f"cycles closed by imports inside functions: {len(late)}")
    for component in late:
        print(f"  {describe(component, run)}")
    upward = upward_imports(edges)
    print(f"library imports of {TOP}: {len(upward)}")
    for e in upward:
        print(f"  {e.source} -> {e.target} (line {e.line}, {e.when})")
    return 1 if found or late or upward else 0


if __name__ == "__main__":
    sys.exit(main())


def test_layout__tests_import_each_other_through_the_tests_package():
    """A test module that imports one in a folder of ``tests/`` does it as ``tests.PACKAGE.MODULE``: a bare ``test_x`` only
    resolves when pytest happened to put that module's folder on the path while collecting the whole suite, so the
    importing file failed when run alone (``pytest tests/curriculum/test_compare.py``)."""
    nested = {path.stem for path in (ROOT / "tests").glob("*/*.py")}  # tests/ itself is on the path (conftest)
    bare = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            bare += [f"{path.relative_to(ROOT)}:{node.lineno} {name}" for name in names
                     if name.split(".")[0] in nested]
    assert not bare, "import these as tests.PACKAGE.MODULE: " + ", ".join(bare)
