"""The payload of a task call: ``{"task": name, "args": {...}}`` as compact UTF-8 JSON.

``encode_call`` writes it at ``defer``; ``decode_envelope`` reads it on the
worker's per-job path (a fast path for alkstore's own compact shape, the
general JSON path for anything else, which decides and words the errors).
``alkstore.tasks`` re-exports every name here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from alkstore.core.options import describe
from alkstore.core.payload import encode_payload
from alkstore.errors import PayloadError
from alkstore.tracing import headers_of

__all__ = ["BadCall", "decode_call", "decode_envelope", "encode_call"]


class BadCall(Exception):
    """A job's payload is not a call this worker can make (unknown task, bad arguments)."""


def encode_call(
    name: str, arguments: Mapping[str, Any], trace: Mapping[str, str] | None = None
) -> bytes:
    """The payload of one task call: compact UTF-8 JSON (``PayloadError`` if it can't be);
    ``trace`` is the producer's trace context (see ``alkstore.tracing``)."""
    envelope: dict[str, Any] = {"task": name, "args": dict(arguments)}
    if trace:
        envelope["trace"] = dict(trace)
    try:
        return encode_payload(envelope)
    except PayloadError as e:
        raise PayloadError(
            f"arguments of task {describe(name)} cannot be encoded as JSON: {e}"
        ) from e


def decode_call(payload: bytes) -> tuple[str, dict[str, Any]]:
    """``(task name, arguments)`` from a job payload; ``BadCall`` if it is not a task call."""
    name, arguments, _trace = decode_envelope(payload)
    return name, arguments


# the C scanner json.loads itself calls (set by JSONDecoder.__init__, untyped)
_scan_once: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _scan_object(text: str | bytes) -> Any:
    """``json.loads(text)``, faster for what alkstore writes (a compact object with
    nothing around it: no whitespace skipping, no wrappers); anything else takes
    ``json.loads`` itself, with its errors."""
    if type(text) is str and text[:1] == "{":
        try:
            data, end = _scan_once(text, 0)
        except StopIteration:
            data, end = None, -1
        if end == len(text):
            return data
    return json.loads(text)


def decode_envelope(payload: bytes) -> tuple[str, dict[str, Any], dict[str, str] | None]:
    """``(task name, arguments, trace headers)`` from a job payload (``BadCall`` if it is
    not a task call)."""
    if type(payload) is bytes and payload.startswith(b'{"task":"'):
        # the per-job hot path: encode_call's own shape without trace context, compact,
        # a name with no escapes, read without building the envelope object; anything
        # else takes the general path below, which decides (and words the errors)
        try:
            call = payload.decode()
            end = call.find('"', 9)  # the name's closing quote, if it has no escapes
            if end > 0 and call.startswith('","args":', end) and "\\" not in (name := call[9:end]):
                args, stop = _scan_once(call, end + 9)
                if stop == len(call) - 1 and type(args) is dict and call[stop] == "}":
                    return name, args, None
        except (StopIteration, ValueError):  # UnicodeDecodeError is a ValueError
            pass
    try:
        # alkstore writes task calls as UTF-8: decoding first skips json's
        # encoding detection (the per-job hot path)
        text = payload.decode() if type(payload) is bytes else payload
        data = _scan_object(text)
    except (ValueError, UnicodeDecodeError):
        data = None
    if (
        type(data) is not dict
        or type(data.get("task")) is not str
        or not isinstance(args := data.get("args", {}), dict)
    ):
        raise BadCall(
            f"payload {describe(payload[:80])} is not a task call: "
            'expected JSON {"task": name, "args": {...}}'
        )
    trace = data.get("trace")
    return data["task"], args, None if trace is None else headers_of(trace)
