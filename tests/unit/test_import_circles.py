"""No import circle among alkstore's modules, counting every import (TYPE_CHECKING too).

import-linter's contracts (pyproject.toml) skip TYPE_CHECKING imports, which is
how a type-only edge back up a layer used to close a circle (store → admin →
store); upward type references go through protocols in a lower layer instead.
"""

from __future__ import annotations

from .import_graph import circles, graph, imports_of


def test_alkstore_has_no_import_circle() -> None:
    edges = graph()
    assert "alkstore.engines.sqlite.transaction" in edges  # the walk found the engines
    assert [sorted(c) for c in circles(edges)] == []


def test_the_store_admin_and_claim_loop_close_no_circle() -> None:
    edges = graph()
    for circle in circles(edges):
        assert not circle & {"alkstore.store", "alkstore.admin", "alkstore.consume"}
        assert not any(m.startswith("alkstore.contrib.") for m in circle)


def test_a_type_checking_import_closes_a_circle() -> None:
    known = {"pkg.a", "pkg.b"}
    a = "from pkg.b import B\n"
    b = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import A\n"
    edges = {
        "pkg.a": imports_of(a, "pkg.a", False, known),
        "pkg.b": imports_of(b, "pkg.b", False, known),
    }
    assert circles(edges) == [frozenset(known)]


def test_a_relative_import_inside_a_function_closes_a_circle() -> None:
    known = {"pkg.sub.a", "pkg.sub.b", "pkg.sub"}
    a = "from .b import B\n"
    b = "def f():\n    from .a import A\n"
    edges = {
        "pkg.sub.a": imports_of(a, "pkg.sub.a", False, known),
        "pkg.sub.b": imports_of(b, "pkg.sub.b", False, known),
    }
    assert circles(edges) == [frozenset({"pkg.sub.a", "pkg.sub.b"})]
