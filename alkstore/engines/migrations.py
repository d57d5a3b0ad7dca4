"""Migration files: numbered scripts beside each engine's current ``schema.sql``.

An engine package keeps ``sql/migrations/NNNN_name.sql`` (applied in number
order; numbers are unique and ascend from 1, and may skip one a parallel
branch reserved: a gap is allowed, a repeat is not) and ``sql/schema.sql``,
the schema every migration in order builds (a test compares the two
catalogs). A script is split into statements on ``;`` outside quotes, ``$tag$`` bodies, comments and
trigger bodies (``BEGIN … END;``), so function bodies and literals such as
``'{}'::jsonb`` or ``'a;b'`` are kept whole.

A script whose first line is ``-- alkstore: no-transaction`` is applied
statement by statement outside a transaction (``CREATE INDEX CONCURRENTLY``,
``VACUUM``); its statements must be idempotent (``IF NOT EXISTS``), since a
crash before the version is recorded runs them again.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple

from alkstore.engines.queries import package_folder

if TYPE_CHECKING:
    from importlib.abc import Traversable

__all__ = [
    "NO_TRANSACTION",
    "Migration",
    "latest_version",
    "load_migrations",
    "load_schema",
    "read_migrations",
    "split_statements",
]

NO_TRANSACTION = "-- alkstore: no-transaction"
_FILE = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql")
_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")
# A SQLite trigger's body holds `;`s: its statement ends at `END;`.
_TRIGGER = re.compile(r"CREATE\s+(TEMP\s+|TEMPORARY\s+)?TRIGGER\b", re.IGNORECASE)
_END = re.compile(r"\bEND\s*$", re.IGNORECASE)


class Migration(NamedTuple):
    """One migration script: its number, name, statements and whether it runs in a transaction."""

    version: int
    name: str
    statements: list[str]
    transactional: bool = True


def split_statements(text: str) -> list[str]:
    """Split a script into statements on ``;`` outside strings, dollar bodies and comments.

    Comments are dropped; a script ending in an unterminated statement is an error.
    """
    statements: list[str] = []
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "-" and text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end  # keep the newline
        elif c == "/" and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise ValueError("migration has an unterminated /* comment")
            out.append(" ")
            i = end + 2
        elif c in "'\"":
            end = i + 1
            while True:
                end = text.find(c, end)
                if end < 0:
                    raise ValueError(f"migration has an unterminated {c} quote")
                if text.startswith(c * 2, end):  # '' is an escaped quote
                    end += 2
                    continue
                break
            out.append(text[i : end + 1])
            i = end + 1
        elif c == "$" and (match := _DOLLAR.match(text, i)):
            tag = match.group(0)
            end = text.find(tag, match.end())
            if end < 0:
                raise ValueError(f"migration has an unterminated {tag} body")
            out.append(text[i : end + len(tag)])
            i = end + len(tag)
        elif c == ";":
            statement = "".join(out).strip()
            if _TRIGGER.match(statement) and not _END.search(statement):
                out.append(c)
                i += 1
                continue
            if statement:
                statements.append(statement)
            out = []
            i += 1
        else:
            out.append(c)
            i += 1
    rest = "".join(out).strip()
    if rest:
        raise ValueError(f"migration ends with an unterminated statement: {rest[:60]!r}")
    return statements


def _check_numbers(folder: Traversable, versions: list[int]) -> None:
    if not versions or min(versions) < 1 or len(set(versions)) != len(versions):
        raise ValueError(f"migrations in {folder} are not numbered uniquely from 1: {versions}")


def read_migrations(folder: Traversable) -> list[Migration]:
    """The migrations of a folder of ``NNNN_name.sql`` files, in order (other files ignored)."""
    found = []
    for entry in folder.iterdir():
        match = _FILE.fullmatch(entry.name)
        if match:
            text = entry.read_text(encoding="utf-8")
            transactional = not text.lstrip().startswith(NO_TRANSACTION)
            found.append(
                Migration(
                    int(match.group(1)), match.group(2), split_statements(text), transactional
                )
            )
    found.sort()
    _check_numbers(folder, [m.version for m in found])
    return found


def latest_version(package: str) -> int:
    """The number of ``package``'s last migration, from the file names alone: an
    up-to-date store is opened without reading and splitting every script (~3 ms
    of each start)."""
    folder = package_folder(package).joinpath("sql", "migrations")
    versions = [int(m.group(1)) for e in folder.iterdir() if (m := _FILE.fullmatch(e.name))]
    _check_numbers(folder, versions)
    return max(versions)


def load_migrations(package: str) -> list[Migration]:
    """The migrations of ``package``'s ``sql/migrations/`` folder, in order."""
    return read_migrations(package_folder(package).joinpath("sql", "migrations"))


def load_schema(package: str) -> list[str]:
    """The statements of ``package``'s ``sql/schema.sql`` (the current schema, built at once)."""
    text = package_folder(package).joinpath("sql", "schema.sql").read_text(encoding="utf-8")
    return split_statements(text)
