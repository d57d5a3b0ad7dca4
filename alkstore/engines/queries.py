"""Loader for SQL kept in ``.sql`` files as named queries.

A query file holds blocks headed ``-- name: NAME`` followed by an optional
one-line ``-- description``; the block's text up to the next header is the
query. Migrations are whole files ``migrations/NNNN_name.sql`` applied in
order; each statement ends with ``;`` at the end of a line.
"""

from __future__ import annotations

import re
from importlib import resources

__all__ = ["load_migrations", "load_queries", "parse_queries", "split_statements"]

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


def load_queries(package: str, filename: str = "queries.sql") -> dict[str, str]:
    """The named queries of ``package``'s ``sql/`` folder."""
    text = resources.files(package).joinpath("sql", filename).read_text(encoding="utf-8")
    return parse_queries(text)


def split_statements(text: str) -> list[str]:
    """Split a migration script into statements (``;`` at the end of a line ends one)."""
    statements: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        if line.lstrip().startswith("--") and not current:
            continue
        current.append(line)
        if line.rstrip().endswith(";"):
            statement = "\n".join(current).strip().rstrip(";").strip()
            if statement:
                statements.append(statement)
            current = []
    rest = "\n".join(current).strip()
    if rest and not all(line.lstrip().startswith("--") for line in rest.splitlines()):
        raise ValueError(f"migration ends with an unterminated statement: {rest[:60]!r}")
    return statements


def load_migrations(package: str) -> list[tuple[int, str, list[str]]]:
    """``(version, name, statements)`` for each ``sql/migrations/NNNN_name.sql``, in order."""
    folder = resources.files(package).joinpath("sql", "migrations")
    found = []
    for entry in folder.iterdir():
        match = re.fullmatch(r"(\d{4})_([a-z0-9_]+)\.sql", entry.name)
        if match:
            statements = split_statements(entry.read_text(encoding="utf-8"))
            found.append((int(match.group(1)), match.group(2), statements))
    found.sort()
    versions = [v for v, _, _ in found]
    if versions != list(range(1, len(found) + 1)):
        raise ValueError(f"migrations of {package} are not numbered 1..n: {versions}")
    return found
