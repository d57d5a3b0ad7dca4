"""The SQL loaders: named queries (engines/queries.py) and migration scripts (migrations.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from alkstore.engines import migrations
from alkstore.engines.migrations import (
    Migration,
    latest_version,
    load_migrations,
    split_statements,
)
from alkstore.engines.queries import load_queries, parse_queries


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


def test_a_fragment_stands_where_a_query_names_it_and_is_no_query_itself() -> None:
    text = """
-- fragment: pick
-- What both queries pick.
SELECT id FROM t WHERE a = '{}'

-- name: one
WITH p AS ({pick}) SELECT * FROM p;

-- name: two
DELETE FROM t WHERE id IN ({pick});
"""
    assert parse_queries(text) == {
        "one": "WITH p AS (SELECT id FROM t WHERE a = '{}') SELECT * FROM p",
        "two": "DELETE FROM t WHERE id IN (SELECT id FROM t WHERE a = '{}')",
    }


def test_a_fragment_no_query_uses_or_one_defined_twice_is_an_error() -> None:
    with pytest.raises(ValueError, match="fragment 'lost' is used by no query"):
        parse_queries("-- fragment: lost\nSELECT 1;\n-- name: q\nSELECT 2;")
    with pytest.raises(ValueError, match="fragment 'f' is defined twice"):
        parse_queries("-- fragment: f\nSELECT 1;\n-- fragment: f\nSELECT 2;\n-- name: q\n{f}")


def test_claim_and_claim_lean_share_one_update() -> None:
    queries = load_queries("alkstore.engines.postgres")
    update = queries["claim_lean"][queries["claim_lean"].index("UPDATE {schema}.alk_jobs AS j") :]
    update = update[: update.index("\n)")]
    assert "RETURNING j.id" in update and update in queries["claim"]
    assert "{claim_update}" not in queries["claim"] + queries["claim_lean"]


def test_an_empty_query_is_an_error() -> None:
    with pytest.raises(ValueError, match="'empty'"):
        parse_queries("-- name: empty\n-- only a comment\n\n-- name: next\nSELECT 1;")


def test_a_duplicate_name_is_an_error() -> None:
    with pytest.raises(ValueError, match="twice"):
        parse_queries("-- name: q\nSELECT 1;\n-- name: q\nSELECT 2;")


def test_text_without_headers_has_no_queries() -> None:
    assert parse_queries("SELECT 1;") == {}


def test_statements_split_on_semicolons_outside_quotes_and_comments() -> None:
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
    assert split_statements("SELECT 1; SELECT 2;") == ["SELECT 1", "SELECT 2"]
    with pytest.raises(ValueError, match="unterminated"):
        split_statements("SELECT 1;\nSELECT 2\n")


def test_the_sqlite_engine_queries_load() -> None:
    q = load_queries("alkstore.engines.sqlite")
    for name in ["insert_job", "claim", "ack", "retry", "dead_letter_copy", "get_job"]:
        assert name in q
    assert all(sql and not sql.endswith(";") for sql in q.values())


def test_the_sqlite_migrations_load_in_order() -> None:
    found = load_migrations("alkstore.engines.sqlite")
    versions = [m.version for m in found]
    assert versions == sorted(set(versions)) and versions[0] == 1
    assert all(m.statements for m in found)


def _fake_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str]) -> str:
    folder = tmp_path / "sql" / "migrations"
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    monkeypatch.setattr(migrations, "package_folder", lambda package: tmp_path)
    return "fake"


def test_migrations_may_skip_a_number_a_parallel_branch_holds_but_never_repeat_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = _fake_package(
        tmp_path, monkeypatch, {"0001_a.sql": "SELECT 1;", "0003_c.sql": "SELECT 3;"}
    )
    assert [m.version for m in load_migrations(package)] == [1, 3]
    assert latest_version(package) == 3
    (tmp_path / "sql" / "migrations" / "0003_d.sql").write_text("SELECT 4;")
    with pytest.raises(ValueError, match="not numbered"):
        load_migrations(package)
    with pytest.raises(ValueError, match="not numbered"):
        latest_version(package)


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_the_schema_version_read_from_file_names_is_the_last_migrations(engine: str) -> None:
    """The migrators read the scripts only to migrate: their version comes from the
    names, and ``MIGRATIONS`` is read on first use."""
    import importlib

    module = importlib.import_module(f"alkstore.engines.{engine}.migrator")
    found = load_migrations(f"alkstore.engines.{engine}")
    assert found[-1].version == module.SCHEMA_VERSION
    assert found == module.MIGRATIONS


def test_migrations_are_sorted_and_other_files_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = _fake_package(
        tmp_path,
        monkeypatch,
        {"0002_b.sql": "SELECT 2;", "0001_a.sql": "SELECT 1;", "README.md": "notes"},
    )
    assert load_migrations(package) == [
        Migration(1, "a", ["SELECT 1"], True),
        Migration(2, "b", ["SELECT 2"], True),
    ]


def test_a_broken_migration_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = _fake_package(tmp_path, monkeypatch, {"0001_a.sql": "SELECT 1"})
    with pytest.raises(ValueError, match="unterminated"):
        load_migrations(package)


def test_dollar_bodies_braces_and_quoted_semicolons_stay_in_one_statement() -> None:
    text = """CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $body$
BEGIN
    RETURN 1; -- a ; inside the body
END;
$body$;
CREATE TABLE t (a jsonb DEFAULT '{}'::jsonb, b text DEFAULT 'x;'';y', "c;" int);
DO $$ BEGIN PERFORM 1; END $$;
/* a ; in a block comment */ SELECT 2;
"""
    assert split_statements(text) == [
        "CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $body$\nBEGIN\n"
        "    RETURN 1; -- a ; inside the body\nEND;\n$body$",
        "CREATE TABLE t (a jsonb DEFAULT '{}'::jsonb, b text DEFAULT 'x;'';y', \"c;\" int)",
        "DO $$ BEGIN PERFORM 1; END $$",
        "SELECT 2",
    ]


def test_a_sqlite_trigger_body_ends_at_end() -> None:
    text = (
        "CREATE TRIGGER t AFTER INSERT ON a BEGIN\n  DELETE FROM b;\n  DELETE FROM c;\nEND;\n"
        "SELECT 1;"
    )
    assert split_statements(text) == [
        "CREATE TRIGGER t AFTER INSERT ON a BEGIN\n  DELETE FROM b;\n  DELETE FROM c;\nEND",
        "SELECT 1",
    ]


def test_unterminated_quotes_and_bodies_are_reported() -> None:
    for text in ["SELECT 'a;", "DO $$ BEGIN; ", "SELECT /* a"]:
        with pytest.raises(ValueError, match="unterminated"):
            split_statements(text)


def test_a_no_transaction_marker_on_the_first_line_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = _fake_package(
        tmp_path,
        monkeypatch,
        {
            "0001_a.sql": "SELECT 1;",
            "0002_b.sql": "-- alkstore: no-transaction\nCREATE INDEX CONCURRENTLY i ON t (a);",
        },
    )
    assert [m.transactional for m in load_migrations(package)] == [True, False]
