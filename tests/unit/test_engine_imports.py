"""The engines' import graph has no circle, counting imports under TYPE_CHECKING.

import-linter's layer contracts (pyproject.toml) skip TYPE_CHECKING imports,
which is how a transaction typed against its engine used to close a circle
(engine → transaction → engine); upward references go through protocols.
"""

from __future__ import annotations

from pathlib import Path

import alkstore.engines

from .import_graph import circles, graph

ROOT = Path(alkstore.engines.__file__).parent


def _graph() -> dict[str, set[str]]:
    return graph(ROOT)


def test_the_engines_import_graph_has_no_circle() -> None:
    graph = _graph()
    assert "alkstore.engines.sqlite.transaction" in graph  # the walk found the engines
    assert circles(graph) == []


def test_a_transaction_is_typed_against_a_protocol_not_its_engine() -> None:
    graph = _graph()
    for engine in ("sqlite", "postgres"):
        imports = graph[f"alkstore.engines.{engine}.transaction"]
        assert f"alkstore.engines.{engine}.engine" not in imports
        assert f"alkstore.engines.{engine}.protocols" in imports
