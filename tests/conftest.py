"""Shared fixtures: a real store per test, on every engine.

Engines come from ``ALKSTORE_TEST_ENGINES`` (default ``sqlite,postgres``).
PostgreSQL is found at ``ALKSTORE_TEST_PG_URL``, else
``postgresql://root@127.0.0.1:5432/test``; each test session creates its own
database and drops it at the end, and each test works in its own schema.
Without a server the PostgreSQL tests skip, except under ``CI=true``, where a
missing server fails the run.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import alkstore

ENGINES = [e for e in os.environ.get("ALKSTORE_TEST_ENGINES", "sqlite,postgres").split(",") if e]
PG_ADMIN_URL = os.environ.get("ALKSTORE_TEST_PG_URL", "postgresql://root@127.0.0.1:5432/test")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@dataclass(frozen=True)
class Target:
    """Where a test's store lives: pass ``url`` and ``schema`` to ``alkstore.connect``
    (also across processes)."""

    engine: str
    url: str
    schema: str

    def connect_kwargs(self) -> dict[str, Any]:
        return {"schema": self.schema} if self.engine == "postgres" else {}


def _pg_database_url(database: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(PG_ADMIN_URL)
    return urlunsplit(parts._replace(path="/" + database))


def _drop_orphans(admin: Any) -> None:
    """Drop test databases left by runs that were killed before their teardown
    (their pid is gone); only for a server on this machine, where pids mean something."""
    from urllib.parse import urlsplit

    if urlsplit(PG_ADMIN_URL).hostname not in ("127.0.0.1", "localhost", "::1", None):
        return
    rows = admin.execute(
        "SELECT datname FROM pg_database WHERE datname LIKE 'alkstore\\_test\\_%'"
    ).fetchall()
    for (datname,) in rows:
        pid = datname.split("_")[2]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            admin.execute(f'DROP DATABASE IF EXISTS "{datname}" WITH (FORCE)')


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A fresh database for this test session, dropped at the end."""
    try:
        import psycopg

        admin = psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=5)
    except Exception as e:
        if IN_CI:
            pytest.fail(f"PostgreSQL is required under CI=true but unreachable: {e}")
        pytest.skip(f"PostgreSQL unreachable at {PG_ADMIN_URL}: {e}")
    name = f"alkstore_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with admin:
        _drop_orphans(admin)
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _pg_database_url(name)
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=ENGINES)
def target(request: pytest.FixtureRequest, tmp_path: Any) -> Target:
    """A fresh, empty store location on each engine."""
    engine = request.param
    if engine == "sqlite":
        return Target("sqlite", f"sqlite:///{tmp_path}/jobs.db", "alkstore")
    if engine == "postgres":
        url = request.getfixturevalue("pg_url")
        return Target("postgres", url, f"t_{uuid.uuid4().hex[:12]}")
    raise ValueError(f"unknown engine {engine!r}")


OpenStore = Callable[..., Awaitable[alkstore.Store]]


@pytest.fixture
async def open_store(target: Target) -> AsyncIterator[OpenStore]:
    """Open more stores on the same target (sibling connections); all closed at teardown."""
    stores: list[alkstore.Store] = []

    async def _open(**options: Any) -> alkstore.Store:
        store = await alkstore.connect(target.url, **target.connect_kwargs(), **options)
        stores.append(store)
        return store

    yield _open
    for store in stores:
        await store.close()


@pytest.fixture
async def store(open_store: OpenStore) -> alkstore.Store:
    """An open store on a fresh target."""
    return await open_store()
