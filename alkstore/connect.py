"""``alkstore.connect``: open a store from a URL."""

from __future__ import annotations

from typing import Any

from alkstore.core.names import check_schema
from alkstore.core.payload import DEFAULT_MAX_PAYLOAD_BYTES, check_max_payload_bytes
from alkstore.engines import DEFAULT_URL, import_engine, open_engine, resolve_url
from alkstore.store import Store

__all__ = ["DEFAULT_URL", "connect", "import_engine", "resolve_url"]


async def connect(
    url: str | None = None,
    *,
    schema: str = "alkstore",
    max_payload_bytes: int | None = DEFAULT_MAX_PAYLOAD_BYTES,
    **options: Any,
) -> Store:
    """Open a store, creating or upgrading its tables.

    ``url`` is ``sqlite:///relative.db``, ``sqlite:////abs/path.db`` or
    ``postgresql://user@host:port/db``; with none, ``$ALKSTORE_URL``, else
    ``sqlite:///alkstore.db``. Engine options come from the URL's query string
    or from keyword arguments (see docs/configuration.md). ``max_payload_bytes``
    (default 1 MiB; ``None``: no limit) caps each job payload and kept result: a
    larger one raises ``PayloadTooLargeError`` and writes nothing.

    >>> store = await alkstore.connect("sqlite:///jobs.db")
    >>> async with await alkstore.connect() as store: ...
    """
    resolved = resolve_url(url)
    limit = check_max_payload_bytes(max_payload_bytes)
    engine = open_engine(resolved, check_schema(schema), options)
    await engine.open()
    return Store(engine, resolved, max_payload_bytes=limit)
