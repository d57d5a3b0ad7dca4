"""SQLite schema upgrades: ``PRAGMA user_version`` is the version applied.

Each transactional migration runs with its version bump in one ``BEGIN
IMMEDIATE`` transaction, so concurrent openers (many processes at once)
serialise on the write lock and each migration applies exactly once. A
no-transaction migration runs its (idempotent) statements outside, then
records its version in a transaction that re-checks it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

from alkstore.engines.migrations import Migration, latest_version, load_migrations
from alkstore.engines.queries import load_queries

__all__ = ["MIGRATIONS", "QUERIES", "SCHEMA_VERSION", "installed_version", "migrate"]

_PACKAGE = "alkstore.engines.sqlite"
SCHEMA_VERSION = latest_version(_PACKAGE)
MIGRATIONS: list[Migration]  # read on first use (``__getattr__``): only a migration needs them
# The named queries of sql/queries.sql (PostgreSQL's migrator holds its own the same way).
QUERIES = {**load_queries(_PACKAGE), **load_queries(_PACKAGE, "life.sql")}  # life.sql: #24

# Runs a function of the connection inside BEGIN IMMEDIATE … COMMIT.
Write = Callable[[Callable[[sqlite3.Connection], int]], int]


def __getattr__(name: str) -> list[Migration]:
    """``MIGRATIONS``, read and split when first asked for (an up-to-date store never is)."""
    if name != "MIGRATIONS":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    found = globals()["MIGRATIONS"] = load_migrations(_PACKAGE)
    return found


def _version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def installed_version(conn: sqlite3.Connection) -> int:
    """The schema version of ``conn``'s database (0: no alkstore tables), read only."""
    return _version(conn)


def migrate(
    conn: sqlite3.Connection,
    write: Write,
    outside: Callable[[str], object] | None = None,
    migrations: Sequence[Migration] | None = None,
) -> int:
    """Bring ``conn``'s database up to the last of ``migrations`` (default: this
    alkstore's); the version reached. ``write`` runs a unit in a write
    transaction; ``outside`` runs one statement outside any (with the caller's
    busy retry)."""
    run = outside or conn.execute
    if migrations is None:  # MIGRATIONS if read (or set: tests put fixtures there)
        migrations = globals().get("MIGRATIONS")
    target = SCHEMA_VERSION if migrations is None else migrations[-1].version

    def check(c: sqlite3.Connection) -> int:
        version = _version(c)
        if version > target:
            raise sqlite3.DatabaseError(
                f"database schema version {version} is newer than this alkstore ({target})"
            )
        return version

    if migrations is None:
        if write(check) == target:
            return target  # up to date: the scripts stay unread (a version only grows)
        migrations = __getattr__("MIGRATIONS")
    for migration in migrations:

        def apply(c: sqlite3.Connection, m: Migration = migration) -> int:
            version = check(c)
            if version < m.version:
                for statement in m.statements:
                    c.execute(statement)
                c.execute(f"PRAGMA user_version={m.version:d}")  # an int, never input
            return version

        if migration.transactional:
            write(apply)
            continue
        if write(check) >= migration.version:
            continue
        for statement in migration.statements:  # outside a transaction, idempotent
            run(statement)

        def record(c: sqlite3.Connection, m: Migration = migration) -> int:
            current = _version(c)
            if current < m.version:
                c.execute(f"PRAGMA user_version={m.version:d}")
            return current

        write(record)
    return max(write(check), target)
