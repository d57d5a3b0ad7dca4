"""alkstore's import graph, counting every import: top level, inside functions, under
TYPE_CHECKING, absolute and relative (import-linter skips TYPE_CHECKING ones here).
The same rules as ../shared/tools/import_circles.py, so the two agree."""

from __future__ import annotations

import ast
from pathlib import Path

import alkstore

PACKAGE = Path(alkstore.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(source: str, name: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules of ``known`` that module ``name`` (with this ``source``) imports."""
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            targets = [module] + [f"{module}.{alias.name}" for alias in node.names]
        for target in targets:
            while target and target not in known:  # a name imported from a module: that module
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Module → the package's modules it imports, for every module under ``root``."""
    paths = {module_name(p): p for p in root.rglob("*.py")}
    known = set(paths)
    edges = {}
    for name, path in paths.items():
        is_package = path.name == "__init__.py"
        found = imports_of(path.read_text(encoding="utf-8"), name, is_package, known)
        if is_package:  # a package's __init__ re-exporting its children is no circle with them
            found = {t for t in found if not t.startswith(name + ".")}
        edges[name] = found
    return edges


def circles(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """The import circles: each set of modules that all reach one another (Tarjan's SCCs)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found
