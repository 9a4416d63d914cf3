"""The import graph of trio_agent's modules: no cycle inside ``trio_agent/loop`` or ``trio_agent/runtime``.

The graph is built from the source with ``ast``, so it sees every import statement, wherever it
is: at module level, inside a function, and under ``if TYPE_CHECKING:`` (a type-only import
that closes a cycle is the symptom of two modules sharing one idea, so it counts).

An edge from a module to one of its own ancestor packages is left out: importing
``trio_agent.loop._driver`` runs ``trio_agent/loop/__init__.py`` first whatever the code says,
and that package imports its submodules, so counting it would make every package a cycle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import trio_agent

ROOT = Path(trio_agent.__file__).parent


def _modules() -> dict[str, tuple[Path, bool]]:
    """Module name → (source path, is a package)."""
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        found[".".join(parts)] = (path, is_package)
    return found


MODULES = _modules()


def _imported(name: str, path: Path, is_package: bool) -> Iterator[str]:
    """The trio_agent modules ``name`` imports, each as named in :data:`MODULES`."""
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            for alias in node.names:
                # ``from pkg import submodule`` imports the submodule; anything else, ``pkg``.
                submodule = f"{source}.{alias.name}"
                yield submodule if submodule in MODULES else source


def import_graph() -> dict[str, set[str]]:
    """Module → the trio_agent modules it imports (ancestor packages left out)."""
    graph = {}
    for name, (path, is_package) in MODULES.items():
        graph[name] = {
            target
            for target in _imported(name, path, is_package)
            if target in MODULES and target != name and not name.startswith(f"{target}.")
        }
    return graph


def find_cycle(graph: dict[str, set[str]], within: str) -> list[str] | None:
    """A cycle among the modules of package ``within`` (``[a, b, ..., a]``), or ``None``."""
    nodes = {n for n in graph if n == within or n.startswith(f"{within}.")}
    state: dict[str, str] = {}  # "open" while on the DFS path, "done" after
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        path.append(node)
        for target in sorted(graph[node] & nodes):
            if state.get(target) == "open":
                return [*path[path.index(target) :], target]
            if target not in state and (cycle := visit(target)) is not None:
                return cycle
        path.pop()
        state[node] = "done"
        return None

    for node in sorted(nodes):
        if node not in state and (cycle := visit(node)) is not None:
            return cycle
    return None


def test_the_graph_sees_every_kind_of_import(tmp_path: Path) -> None:
    source = tmp_path / "_probe.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "from . import _control\n"  # from a package, a submodule
        "from ..agent import Agent\n"  # a sibling package
        "import trio_agent.ids\n"
        "if TYPE_CHECKING:\n"
        "    from ._driver import Driver\n"
        "def later() -> None:\n"
        "    from ..session._store import SessionStore\n",
        encoding="utf-8",
    )
    found = set(_imported("trio_agent.loop._probe", source, is_package=False))
    assert {
        "trio_agent.loop._control",
        "trio_agent.agent",
        "trio_agent.ids",
        "trio_agent.loop._driver",
        "trio_agent.session._store",
    } <= found
    graph = import_graph()
    assert "trio_agent.loop._control" in graph["trio_agent.loop._driver"]
    assert "trio_agent.loop" not in graph["trio_agent.loop._driver"]  # an ancestor: no edge


def test_find_cycle_reports_one() -> None:
    graph = {"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a"}, "q.x": {"p.a"}}
    assert find_cycle(graph, "p") == ["p.a", "p.b", "p.c", "p.a"]
    assert find_cycle(graph, "q") is None


@pytest.mark.parametrize("package", ["trio_agent.loop", "trio_agent.runtime"])
def test_no_import_cycle_inside(package: str) -> None:
    assert package in MODULES
    cycle = find_cycle(import_graph(), package)
    assert cycle is None, f"import cycle in {package}: {' -> '.join(cycle or [])}"
