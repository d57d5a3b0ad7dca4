"""Where a worker's SQLite store is, said in full: a relative ``sqlite:///jobs.db``
depends on the directory the worker starts in, so the worker resolves it to an
absolute path (and logs that), and refuses to start on the *default* store when
that file does not exist (it would create an empty store no producer writes to)."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from alkstore.connect import DEFAULT_URL, resolve_url

__all__ = ["absolute_url", "missing_default_store"]


def _relative_path(url: str) -> str | None:
    """The relative file path of a ``sqlite:///relative.db`` URL, else ``None``."""
    parts = urlsplit(url)
    if parts.scheme != "sqlite" or parts.netloc:
        return None
    path = parts.path[1:] if parts.path.startswith("/") else parts.path
    if not path or path.startswith(("/", ":", "file:")):
        return None  # absolute, in memory, or a URI: nothing to resolve
    return path


def absolute_url(url: str | None) -> str | None:
    """``url`` (``None``: ``$ALKSTORE_URL``, else the default) with a relative SQLite
    path made absolute against the current directory; other URLs as they are."""
    resolved = resolve_url(url)
    path = _relative_path(resolved)
    if path is None:
        return url
    query = urlsplit(resolved).query
    return f"sqlite:///{os.path.abspath(path)}" + (f"?{query}" if query else "")


def missing_default_store(url: str | None) -> str | None:
    """When nobody named a store (``url`` is ``None`` and ``$ALKSTORE_URL`` unset) and the
    default file does not exist: the message refusing to create it; else ``None``."""
    if url is not None or os.environ.get("ALKSTORE_URL"):
        return None
    path = os.path.abspath(_relative_path(DEFAULT_URL) or "alkstore.db")
    if os.path.exists(path):
        return None
    return (
        f"no store at {path}: the default store ({DEFAULT_URL}, in the current "
        "directory) does not exist, and a worker does not create an empty one. Name the "
        f"producers' store: --url sqlite:///{path} (an absolute path), $ALKSTORE_URL or "
        "alkstore.App(url); or run `alkstore migrate` here to create it"
    )
