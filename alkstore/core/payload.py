"""Encoding of job and notification payloads."""

from __future__ import annotations

import json

from alkstore.core.display import describe
from alkstore.errors import InvalidArgumentError, PayloadError, PayloadTooLargeError

__all__ = [
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "NOTIFY_PAYLOAD_MAX_BYTES",
    "check_max_payload_bytes",
    "check_size",
    "encode_notify_payload",
    "encode_payload",
]

NOTIFY_PAYLOAD_MAX_BYTES = 7999  # PostgreSQL's limit (under 8000 bytes), on every engine

# A job's payload (and a kept result) is at most this by default: 1 MiB (docs/contract.md,
# "Payload size"). connect(max_payload_bytes=...) changes it; None removes the limit.
DEFAULT_MAX_PAYLOAD_BYTES = 1 << 20
_MAX_PAYLOAD_BYTES_CAP = 1 << 30  # PostgreSQL's bytea/text field limit is 1 GB


def check_max_payload_bytes(value: object) -> int | None:
    """The ``max_payload_bytes`` option: an int in [1, 2**30], or ``None`` (no limit)."""
    if value is None:
        return None
    if type(value) is not int or not 1 <= value <= _MAX_PAYLOAD_BYTES_CAP:
        raise InvalidArgumentError(
            f"max_payload_bytes must be None or an int in [1, {_MAX_PAYLOAD_BYTES_CAP}], "
            f"got {describe(value)}"
        )
    return value


def check_size(what: str, size: int, limit: int | None) -> None:
    """Refuse ``size`` bytes past ``limit`` with :class:`PayloadTooLargeError`."""
    if limit is not None and size > limit:
        raise PayloadTooLargeError(what, size, limit)


_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


_describe = describe


def encode_payload(payload: object) -> bytes:
    """Bytes verbatim, ``str`` as UTF-8, anything else as compact UTF-8 JSON."""
    kind = type(payload)
    if kind is bytes:
        return payload  # type: ignore[return-value]  # checked by type() above
    if kind is str:
        try:
            return payload.encode()  # type: ignore[attr-defined,no-any-return]
        except UnicodeEncodeError as e:
            raise PayloadError(f"payload {_describe(payload)} is not valid UTF-8: {e}") from e
    if isinstance(payload, bytearray | memoryview):
        return bytes(payload)
    try:
        return _dumps(payload).encode()
    except Exception as e:  # TypeError, ValueError (4300 digits), a raising __iter__…
        raise PayloadError(
            f"payload {_describe(payload)} of type {kind.__name__} is not JSON-serialisable: {e}"
        ) from e


def encode_notify_payload(payload: object) -> str:
    """Validate a notification payload: a ``str`` under 8000 UTF-8 bytes."""
    if type(payload) is not str:
        raise PayloadError(f"notification payload must be a str, got {_describe(payload)}")
    try:
        size = len(payload.encode())
    except UnicodeEncodeError as e:
        raise PayloadError(f"notification payload {_describe(payload)} is not valid UTF-8") from e
    if size > NOTIFY_PAYLOAD_MAX_BYTES:
        raise PayloadError(
            f"notification payload of {size} bytes is too long (limit {NOTIFY_PAYLOAD_MAX_BYTES})"
        )
    if "\x00" in payload:
        raise PayloadError("notification payload must not contain NUL characters")
    return payload
