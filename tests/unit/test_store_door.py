"""The layers built on the store reach its engine through ``store.engine_of`` only."""

from __future__ import annotations

import ast
import pathlib

import pytest

import alkstore

_PACKAGE = pathlib.Path(alkstore.__file__).parent


def _private_members_of_store() -> set[str]:
    """The private methods and attributes of ``alkstore.store.Store``."""
    return _private_members("store.py", "Store")


def _private_members(module: str, *classes: str) -> set[str]:
    """The private methods and attributes of ``classes`` (all: none named) of ``module``."""
    tree = ast.parse((_PACKAGE / module).read_text())
    found = [
        n for n in tree.body if isinstance(n, ast.ClassDef) and (not classes or n.name in classes)
    ]
    names = set()
    for node in (inner for cls in found for inner in ast.walk(cls)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            names.add(node.attr)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def _reaches(source: str, private: set[str]) -> list[str]:
    """Every ``x._name`` of ``source`` with ``_name`` in ``private`` and ``x`` not ``self``."""
    return [
        f"line {node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute)
        and node.attr in private
        and not (isinstance(node.value, ast.Name) and node.value.id == "self")
    ]


@pytest.mark.parametrize("module", ["admin.py", "bookkeeping.py", "copy.py", "waiters.py"])
def test_no_layer_on_the_store_touches_a_private_member_of_it(module: str) -> None:
    private = _private_members_of_store()
    assert {"_engine", "_closed"} <= private
    assert _reaches((_PACKAGE / module).read_text(), private) == []


def test_the_door_is_a_leaf_that_imports_no_part_of_the_store() -> None:
    tree = ast.parse((_PACKAGE / "engine_door.py").read_text())
    imported = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    }
    assert imported <= {
        "__future__",
        "typing",
        "alkstore.core.options",
        "alkstore.errors",
        "alkstore.engine",
    }


def test_the_check_sees_a_reach_into_the_store() -> None:
    source = "engine = self._store._engine\nown = self._engine"
    assert _reaches(source, _private_members_of_store()) == ["line 1: self._store._engine"]


# the store's parts and what the blocking twins call; the twins' own fields are theirs
_ASYNC_PARTS = ["store.py", "queue.py", "enqueuing.py", "job_handle.py", "transaction.py"]
_TWINS_OWN = {"_async", "_runner"}


@pytest.mark.parametrize("module", ["sync.py", "sync_admin.py"])
def test_the_blocking_twins_reach_no_private_member_of_the_async_api(module: str) -> None:
    private = set().union(*(_private_members(m) for m in _ASYNC_PARTS)) - _TWINS_OWN
    assert {"_limit", "_resolve", "_store"} <= private  # what the outbox preparation reads
    assert _reaches((_PACKAGE / module).read_text(), private) == []
