"""Loader for SQL kept in ``.sql`` files as named queries.

A query file holds blocks headed ``-- name: NAME`` followed by an optional
one-line ``-- description``; the block's text up to the next header is the
query. Migrations are loaded by ``migrations.py``.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

__all__ = ["load_queries", "package_folder", "parse_queries"]

_HEADER = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


def parse_queries(text: str) -> dict[str, str]:
    """Map each ``-- name:`` header to the SQL below it (comments stripped at the ends)."""
    parts = _HEADER.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = [line for line in body.strip().splitlines() if not line.lstrip().startswith("--")]
        sql = "\n".join(lines).strip().rstrip(";").strip()
        if not sql:
            raise ValueError(f"query {name!r} is empty")
        if name in queries:
            raise ValueError(f"query {name!r} is defined twice")
        queries[name] = sql
    return queries


def package_folder(package: str) -> Path:
    """The folder of an (unzipped) package: ``importlib.resources`` would import
    tempfile, shutil and zipfile into every worker's start for the same path."""
    return Path(importlib.import_module(package).__path__[0])


def load_queries(package: str, filename: str = "queries.sql") -> dict[str, str]:
    """The named queries of ``package``'s ``sql/`` folder."""
    text = package_folder(package).joinpath("sql", filename).read_text(encoding="utf-8")
    return parse_queries(text)
