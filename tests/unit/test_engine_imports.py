"""The engines' import graph has no circle, counting imports under TYPE_CHECKING.

import-linter's layer contracts (pyproject.toml) skip TYPE_CHECKING imports,
which is how a transaction typed against its engine used to close a circle
(engine → transaction → engine); upward references go through protocols.
"""

from __future__ import annotations

import ast
from pathlib import Path

import alkstore.engines

ROOT = Path(alkstore.engines.__file__).parent


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT.parent.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> dict[str, set[str]]:
    modules = {_module(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every module that can reach itself, with one path back (depth-first)."""
    found: list[list[str]] = []
    for start in sorted(graph):
        stack: list[tuple[str, list[str]]] = [(start, [start])]
        seen: set[str] = set()
        while stack:
            node, path = stack.pop()
            for nxt in sorted(graph[node]):
                if nxt == start:
                    found.append([*path, start])
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))
    return found


def test_the_engines_import_graph_has_no_circle() -> None:
    graph = _graph()
    assert "alkstore.engines.sqlite.transaction" in graph  # the walk found the engines
    assert _circles(graph) == []


def test_a_transaction_is_typed_against_a_protocol_not_its_engine() -> None:
    graph = _graph()
    for engine in ("sqlite", "postgres"):
        imports = graph[f"alkstore.engines.{engine}.transaction"]
        assert f"alkstore.engines.{engine}.engine" not in imports
        assert f"alkstore.engines.{engine}.protocols" in imports
