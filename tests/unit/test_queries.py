"""The SQL loader (engines/queries.py): named queries and migration scripts."""

from __future__ import annotations

from pathlib import Path

import pytest

from alkstore.engines import queries
from alkstore.engines.queries import (
    load_migrations,
    load_queries,
    parse_queries,
    split_statements,
)


def test_named_queries_are_parsed_with_comments_and_semicolons_stripped() -> None:
    text = """
-- a file comment
-- name: first
-- The first query.
SELECT 1;

-- name: second_one
SELECT *
FROM t
WHERE a = :a;
"""
    assert parse_queries(text) == {
        "first": "SELECT 1",
        "second_one": "SELECT *\nFROM t\nWHERE a = :a",
    }


def test_an_empty_query_is_an_error() -> None:
    with pytest.raises(ValueError, match="'empty'"):
        parse_queries("-- name: empty\n-- only a comment\n\n-- name: next\nSELECT 1;")


def test_a_duplicate_name_is_an_error() -> None:
    with pytest.raises(ValueError, match="twice"):
        parse_queries("-- name: q\nSELECT 1;\n-- name: q\nSELECT 2;")


def test_text_without_headers_has_no_queries() -> None:
    assert parse_queries("SELECT 1;") == {}


def test_statements_split_on_a_semicolon_at_end_of_line() -> None:
    text = """-- header comment
CREATE TABLE t (
    a TEXT DEFAULT 'x;y'
);
-- between
CREATE INDEX i ON t (a);
"""
    assert split_statements(text) == [
        "CREATE TABLE t (\n    a TEXT DEFAULT 'x;y'\n)",
        "CREATE INDEX i ON t (a)",
    ]


def test_trailing_comments_are_fine_but_an_unterminated_statement_is_not() -> None:
    assert split_statements("SELECT 1;\n-- the end\n") == ["SELECT 1"]
    with pytest.raises(ValueError, match="unterminated"):
        split_statements("SELECT 1;\nSELECT 2\n")


def test_the_sqlite_engine_queries_load() -> None:
    q = load_queries("alkstore.engines.sqlite")
    for name in ["insert_job", "claim", "ack", "retry", "dead_letter_copy", "get_job"]:
        assert name in q
    assert all(sql and not sql.endswith(";") for sql in q.values())


def test_the_sqlite_migrations_load_in_order() -> None:
    found = load_migrations("alkstore.engines.sqlite")
    assert [v for v, _, _ in found] == list(range(1, len(found) + 1))
    assert all(statements for _, _, statements in found)


def _fake_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str]) -> str:
    folder = tmp_path / "sql" / "migrations"
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    monkeypatch.setattr(queries.resources, "files", lambda package: tmp_path)
    return "fake"


def test_migrations_must_be_numbered_without_gaps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = _fake_package(
        tmp_path, monkeypatch, {"0001_a.sql": "SELECT 1;", "0003_c.sql": "SELECT 3;"}
    )
    with pytest.raises(ValueError, match="not numbered"):
        load_migrations(package)


def test_migrations_are_sorted_and_other_files_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = _fake_package(
        tmp_path,
        monkeypatch,
        {"0002_b.sql": "SELECT 2;", "0001_a.sql": "SELECT 1;", "README.md": "notes"},
    )
    assert load_migrations(package) == [(1, "a", ["SELECT 1"]), (2, "b", ["SELECT 2"])]


def test_a_broken_migration_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = _fake_package(tmp_path, monkeypatch, {"0001_a.sql": "SELECT 1"})
    with pytest.raises(ValueError, match="unterminated"):
        load_migrations(package)
