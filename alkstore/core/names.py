"""Validation of queue names, notify channels and worker ids.

Queue names and channels share one namespace: 1–63 bytes of ``A–Z a–z 0–9 _ . : -``,
not beginning with ``_`` (reserved for the store's own channels).
"""

from __future__ import annotations

import re

from alkstore.core.display import describe
from alkstore.errors import InvalidArgumentError, InvalidNameError

_NAME = re.compile(r"[A-Za-z0-9.:\-][A-Za-z0-9_.:\-]{0,62}")
_SCHEMA = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def check_name(name: object, what: str = "queue name") -> str:
    """Return ``name`` if it is a valid queue/channel name, else raise InvalidNameError."""
    if type(name) is not str or _NAME.fullmatch(name) is None:
        raise InvalidNameError(
            f"invalid {what} {describe(name)}: use 1-63 characters of A-Z a-z 0-9 _ . : - "
            "not beginning with '_'"
        )
    return name


def check_worker_id(worker_id: object) -> str:
    """Return ``worker_id`` if it is a non-empty string, else raise InvalidArgumentError."""
    if type(worker_id) is not str or not worker_id or not is_storable_text(worker_id):
        raise InvalidArgumentError(
            f"invalid worker_id {describe(worker_id)}: must be a non-empty string of valid UTF-8 "
            "without NUL characters"
        )
    return worker_id


def is_storable_text(text: str) -> bool:
    """Whether every engine can store ``text``: valid UTF-8 (no lone surrogates), no NUL
    (PostgreSQL's text type cannot hold one)."""
    if "\x00" in text:
        return False
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def check_schema(schema: object) -> str:
    """Return ``schema`` if it is a plain lower-case SQL identifier, else raise InvalidNameError."""
    if type(schema) is not str or _SCHEMA.fullmatch(schema) is None or schema.startswith("pg_"):
        raise InvalidNameError(
            f"invalid schema {describe(schema)}: use 1-63 characters of a-z 0-9 _ "
            "not beginning with a digit or pg_ (reserved by PostgreSQL)"
        )
    return schema
