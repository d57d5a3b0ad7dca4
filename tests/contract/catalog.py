"""Schema building and catalog reading for the migration tests (the engine-specific corner).

``migrate_to`` runs the engine's own migration runner with a chosen list of
migrations; ``build_from_schema`` runs ``sql/schema.sql`` at once; ``catalog``
reads what either built, normalised so two builds of one schema compare equal:

- SQLite: every ``sqlite_master`` object, with ``PRAGMA table_xinfo`` columns,
  ``index_xinfo`` keys, the CHECK clauses and whitespace-normalised index,
  trigger and view SQL.
- PostgreSQL: relations with their kind and storage options, columns with
  type, nullability, default and identity, index definitions (predicates
  included), constraints, sequences, functions and triggers of the schema.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any, Protocol

import psycopg
from psycopg import sql

from alkstore.engines import migrations as files
from alkstore.engines.migrations import Migration
from alkstore.engines.postgres import migrator as pg_migrate
from alkstore.engines.sqlite import migrator as sqlite_migrate


class Target(Protocol):
    engine: str
    url: str
    schema: str


FIXTURES = Path(__file__).parent / "fixtures" / "migrations"


def real_migrations(engine: str) -> list[Migration]:
    module = sqlite_migrate if engine == "sqlite" else pg_migrate
    return list(module.MIGRATIONS)


def with_fixtures(engine: str) -> list[Migration]:
    """This alkstore's migrations, then the test-only ones numbered after them."""
    real = real_migrations(engine)
    extra = []
    for number, path in enumerate(sorted((FIXTURES / engine).glob("*.sql")), start=1):
        text = path.read_text()
        extra.append(
            Migration(
                real[-1].version + number,
                path.stem.split("_", 1)[1],
                files.split_statements(text),
                not text.startswith(files.NO_TRANSACTION),
            )
        )
    return real + extra


def sqlite_path(target: Target) -> str:
    return target.url.removeprefix("sqlite:///")


def _sqlite_write(conn: sqlite3.Connection) -> Any:
    def write(fn: Any) -> Any:
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = fn(conn)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return result

    return write


async def migrate_to(target: Target, migrations: list[Migration]) -> int:
    """Run the engine's migration runner with exactly ``migrations``."""
    if target.engine == "sqlite":
        conn = sqlite3.connect(sqlite_path(target), isolation_level=None)
        try:
            return sqlite_migrate.migrate(conn, _sqlite_write(conn), None, migrations)
        finally:
            conn.close()
    aconn = await psycopg.AsyncConnection.connect(target.url, autocommit=True)
    try:
        return await pg_migrate.migrate_connection(aconn, target.schema, migrations)
    finally:
        await aconn.close()


async def build_from_schema(target: Target) -> None:
    """Run ``sql/schema.sql`` on an empty target in one transaction."""
    if target.engine == "sqlite":
        conn = sqlite3.connect(sqlite_path(target), isolation_level=None)
        try:
            conn.execute("BEGIN")
            for statement in files.load_schema("alkstore.engines.sqlite"):
                conn.execute(statement)
            conn.execute("COMMIT")
        finally:
            conn.close()
        return
    with psycopg.connect(target.url) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(target.schema)))
        for statement in files.load_schema("alkstore.engines.postgres"):
            conn.execute(pg_migrate.format_sql(statement, target.schema))


def _space(text: str | None) -> str:
    return re.sub(r"\s+", " ", text or "").strip()


def _checks(table_sql: str) -> list[str]:
    found = []
    for match in re.finditer(r"CHECK\s*\(", table_sql, re.IGNORECASE):
        depth, i = 1, match.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(table_sql[i], 0)
            i += 1
        found.append(_space(table_sql[match.end() : i - 1]))
    return sorted(found)


def _sqlite_catalog(path: str) -> dict[str, Any]:
    conn = sqlite3.connect(path)
    try:
        out: dict[str, Any] = {"auto_vacuum": conn.execute("PRAGMA auto_vacuum").fetchone()}
        objects = conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
        ).fetchall()
        for kind, name, table, text in objects:
            if kind == "table":
                entry: Any = {
                    "columns": conn.execute(f'PRAGMA table_xinfo("{name}")').fetchall(),
                    "checks": _checks(text or ""),
                    "autoincrement": "AUTOINCREMENT" in (text or "").upper(),
                    "foreign_keys": conn.execute(f'PRAGMA foreign_key_list("{name}")').fetchall(),
                }
            elif kind == "index":
                entry = {
                    "table": table,
                    "keys": conn.execute(f'PRAGMA index_xinfo("{name}")').fetchall(),
                    "sql": _space(text),
                }
            else:
                entry = {"table": table, "sql": _space(text)}
            out[f"{kind} {name}"] = entry
        return out
    finally:
        conn.close()


_PG_QUERIES = {
    "relations": """
        SELECT c.relname, c.relkind::text, COALESCE(c.reloptions, '{}') FROM pg_class c
        WHERE c.relnamespace = %(ns)s::regnamespace AND c.relname NOT LIKE 'alk_migrations%%'
        ORDER BY 1""",
    "columns": """
        SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
               pg_get_expr(d.adbin, d.adrelid), a.attidentity::text, a.attgenerated::text
        FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE c.relnamespace = %(ns)s::regnamespace AND c.relkind = 'r' AND a.attnum > 0
          AND NOT a.attisdropped AND c.relname <> 'alk_migrations'
        ORDER BY c.relname, a.attnum""",
    "indexes": """
        SELECT indexname, indexdef FROM pg_indexes
        WHERE schemaname = %(ns)s AND tablename <> 'alk_migrations' ORDER BY 1""",
    "constraints": """
        SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint
        WHERE connamespace = %(ns)s::regnamespace AND conrelid::regclass::text
              NOT LIKE '%%alk_migrations' ORDER BY 1, 2""",
    "sequences": """
        SELECT sequencename, data_type::text, start_value, increment_by, min_value, max_value,
               cycle FROM pg_sequences WHERE schemaname = %(ns)s ORDER BY 1""",
    "functions": """
        SELECT proname, pg_get_functiondef(oid) FROM pg_proc
        WHERE pronamespace = %(ns)s::regnamespace ORDER BY 1""",
    "triggers": """
        SELECT tgname, pg_get_triggerdef(t.oid) FROM pg_trigger t JOIN pg_class c
        ON c.oid = t.tgrelid WHERE c.relnamespace = %(ns)s::regnamespace AND NOT t.tgisinternal
        ORDER BY 1""",
}


def _pg_catalog(url: str, schema: str) -> dict[str, Any]:
    with psycopg.connect(url) as conn:
        out: dict[str, Any] = {}
        for part, query in _PG_QUERIES.items():
            rows = conn.execute(query, {"ns": schema}).fetchall()
            # the schema's own name is the one thing two builds differ in
            out[part] = [
                tuple(v.replace(schema, "{schema}") if isinstance(v, str) else v for v in row)
                for row in rows
            ]
        return out


def row_counts(target: Target) -> dict[str, int]:
    """Rows in every table of the store (the runner's bookkeeping included)."""
    if target.engine == "sqlite":
        conn = sqlite3.connect(sqlite_path(target))
        try:
            rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            names = [n for (n,) in rows]
            return {n: conn.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0] for n in names}
        finally:
            conn.close()
    with psycopg.connect(target.url) as conn:
        names = [
            n
            for (n,) in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s", (target.schema,)
            )
        ]
        counts = {}
        for n in names:
            table = sql.Identifier(target.schema, n)
            row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(table)).fetchone()
            counts[n] = row[0] if row else 0
        return counts


def catalog(target: Target) -> dict[str, Any]:
    """The normalised catalog of what is built at ``target``."""
    if target.engine == "sqlite":
        return _sqlite_catalog(sqlite_path(target))
    return _pg_catalog(target.url, target.schema)
