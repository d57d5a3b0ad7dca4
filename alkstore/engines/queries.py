"""Loader for SQL kept in ``.sql`` files as named queries.

A query file holds blocks headed ``-- name: NAME`` followed by an optional
one-line ``-- description``; the block's text up to the next header is the
query. A block headed ``-- fragment: NAME`` is no query of its own: its text
stands wherever a query writes ``{NAME}`` (SQL two queries must keep identical,
written once). Migrations are loaded by ``migrations.py``.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

__all__ = ["load_queries", "package_folder", "parse_queries"]

_HEADER = re.compile(r"^--\s*(name|fragment):\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


def parse_queries(text: str) -> dict[str, str]:
    """Map each ``-- name:`` header to the SQL below it (comments stripped at the
    ends), with each ``{fragment}`` the file defines put in its place."""
    parts = _HEADER.split(text)
    blocks: dict[str, dict[str, str]] = {"name": {}, "fragment": {}}
    for kind, name, body in zip(parts[1::3], parts[2::3], parts[3::3], strict=True):
        lines = [line for line in body.strip().splitlines() if not line.lstrip().startswith("--")]
        sql = "\n".join(lines).strip().rstrip(";").strip()
        label = "query" if kind == "name" else "fragment"
        if not sql:
            raise ValueError(f"{label} {name!r} is empty")
        if name in blocks[kind]:
            raise ValueError(f"{label} {name!r} is defined twice")
        blocks[kind][name] = sql
    fragments = blocks["fragment"]
    used: set[str] = set()
    queries: dict[str, str] = {}
    for name, sql in blocks["name"].items():
        for fragment, piece in fragments.items():
            token = "{" + fragment + "}"
            if token in sql:
                sql = sql.replace(token, piece)
                used.add(fragment)
        queries[name] = sql
    if unused := sorted(set(fragments) - used):
        raise ValueError(f"fragment {unused[0]!r} is used by no query")
    return queries


def package_folder(package: str) -> Path:
    """The folder of an (unzipped) package: ``importlib.resources`` would import
    tempfile, shutil and zipfile into every worker's start for the same path."""
    return Path(importlib.import_module(package).__path__[0])


def load_queries(package: str, filename: str = "queries.sql") -> dict[str, str]:
    """The named queries of ``package``'s ``sql/`` folder."""
    text = package_folder(package).joinpath("sql", filename).read_text(encoding="utf-8")
    return parse_queries(text)
