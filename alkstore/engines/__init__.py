"""The composition root: a store URL chooses and configures an engine."""

from __future__ import annotations

import importlib
import os
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from alkstore.core.options import describe
from alkstore.engine import Engine
from alkstore.errors import EngineError, InvalidArgumentError

__all__ = ["DEFAULT_URL", "import_engine", "open_engine", "resolve_url"]

DEFAULT_URL = "sqlite:///alkstore.db"


def resolve_url(url: str | None) -> str:
    """``url``, else ``$ALKSTORE_URL``, else the SQLite default."""
    if url is None:
        url = os.environ.get("ALKSTORE_URL") or DEFAULT_URL
    if type(url) is not str or not url:
        raise InvalidArgumentError(f"store URL must be a non-empty str, got {describe(url)}")
    return url


def import_engine(url: str | None) -> None:
    """Import the engine ``url`` names (with its driver) ahead of :func:`open_engine`,
    for a caller that wants the imports done at a time of its choosing (the worker
    command: under a paused collector). A bad URL or a missing driver is left for
    :func:`open_engine` to report."""
    try:
        scheme = urlsplit(resolve_url(url)).scheme
    except (InvalidArgumentError, ValueError):
        return
    engines = {"sqlite": "sqlite", "postgresql": "postgres", "postgres": "postgres"}
    if scheme in engines:
        try:
            importlib.import_module(f"alkstore.engines.{engines[scheme]}.engine")
        except ImportError:
            return


def open_engine(url: str, schema: str, options: dict[str, Any]) -> Engine:
    """Build (not yet open) the engine a URL names."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    if parts.scheme == "sqlite":
        from alkstore.engines.sqlite.engine import SqliteEngine

        # sqlite:///relative.db -> "relative.db"; sqlite:////abs.db -> "/abs.db"
        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        if parts.netloc or not path or "\x00" in path:
            raise InvalidArgumentError(
                f"invalid SQLite URL {describe(url)}: use sqlite:///relative.db or sqlite:////abs/path.db"
            )
        return SqliteEngine.from_options(path, {**query, **options})
    if parts.scheme in ("postgresql", "postgres"):
        try:
            import psycopg  # noqa: F401
            import psycopg_pool  # noqa: F401
        except ImportError as e:
            raise EngineError(
                f"a PostgreSQL store needs the driver: pip install 'alkstore[postgres]' ({e})"
            ) from None
        from alkstore.engines.postgres.engine import PostgresEngine

        return PostgresEngine.from_url(url, schema, options)
    raise InvalidArgumentError(
        f"unsupported store URL {describe(url)}: use sqlite:///path.db or postgresql://user@host/db"
    )
