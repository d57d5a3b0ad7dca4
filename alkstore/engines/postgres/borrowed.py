"""The caller's connection for the outbox (``enqueue_on``): psycopg's own, or the one
under a SQLAlchemy ``Session`` / ``AsyncSession`` / ``Connection``.

SQLAlchemy's psycopg (3) dialect runs each session transaction on one pooled
psycopg connection; the job is inserted on that very connection, so it commits
or rolls back with the session's own writes. A session without a transaction
begins one here (what SQLAlchemy's autobegin does on first use). SQLAlchemy is
only looked at when the caller passed one of its objects (it is then imported).
"""

from __future__ import annotations

import sys
from typing import Any

import psycopg

from alkstore.errors import InvalidArgumentError

__all__ = ["async_connection", "sync_connection"]

_ASYNC_HINT = (
    "psycopg.AsyncConnection, or a SQLAlchemy AsyncSession / AsyncConnection on the "
    "postgresql+psycopg dialect (a blocking connection or Session goes to alkstore.sync's "
    "enqueue_on)"
)
_SYNC_HINT = (
    "psycopg.Connection, or a SQLAlchemy Session / Connection on the postgresql+psycopg "
    "dialect (an async one goes to the async Queue.enqueue_on)"
)


def _driver(raw: Any, wanted: type[Any], hint: str, given: Any) -> Any:
    conn = raw.driver_connection
    if not isinstance(conn, wanted):
        raise InvalidArgumentError(
            f"enqueue_on needs a {hint}; the SQLAlchemy {type(given).__name__} given runs on "
            f"{type(conn).__module__}.{type(conn).__name__} (use a postgresql+psycopg:// URL)"
        )
    return conn


def sync_connection(conn: Any) -> psycopg.Connection[Any]:
    """The blocking psycopg connection ``conn`` is or stands on."""
    if isinstance(conn, psycopg.Connection):
        return conn
    if "sqlalchemy" in sys.modules:
        from sqlalchemy.engine import Connection
        from sqlalchemy.orm import Session

        given = conn
        if isinstance(conn, Session):
            conn = conn.connection()
        if isinstance(conn, Connection):
            found: psycopg.Connection[Any] = _driver(
                conn.connection, psycopg.Connection, _SYNC_HINT, given
            )
            return found
    raise InvalidArgumentError(f"enqueue_on needs a {_SYNC_HINT}, got {type(conn).__name__}")


async def async_connection(conn: Any) -> psycopg.AsyncConnection[Any]:
    """The async psycopg connection ``conn`` is or stands on."""
    if isinstance(conn, psycopg.AsyncConnection):
        return conn
    if "sqlalchemy" in sys.modules:
        from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

        given = conn
        if isinstance(conn, AsyncSession):
            conn = await conn.connection()
        if isinstance(conn, AsyncConnection):
            raw = await conn.get_raw_connection()
            found: psycopg.AsyncConnection[Any] = _driver(
                raw, psycopg.AsyncConnection, _ASYNC_HINT, given
            )
            return found
    raise InvalidArgumentError(f"enqueue_on needs a {_ASYNC_HINT}, got {type(conn).__name__}")
