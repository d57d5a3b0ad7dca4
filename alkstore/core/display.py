"""How values are shown to a person: a user's value in an error message, an age,
a job's payload in one line (the CLI and the dashboard alike)."""

from __future__ import annotations

import json

from alkstore.core.job import Job

__all__ = ["age", "describe", "describe_payload"]


def describe(value: object, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters; never raises (an int past
    Python's 4300-digit limit, or a ``__repr__`` that raises, is shown by type)."""
    try:
        text = repr(value)
    except Exception:  # a message must never fail to be built
        if type(value) is int:
            return f"<int of {value.bit_length()} bits>"
        text = f"<{type(value).__name__} object>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def age(seconds: float | None) -> str:
    """``850ms``, ``12s``, ``3m05s``, ``2h10m``."""
    if seconds is None:
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"


def describe_payload(job: Job, width: int = 60) -> str:
    """A task call as ``task(args)``, else the payload text, cut to ``width``."""
    text: str
    try:
        data = json.loads(job.payload)
    except (ValueError, UnicodeDecodeError):
        data = None
    if isinstance(data, dict) and type(data.get("task")) is str:
        args = data.get("args") or {}
        inner = ", ".join(f"{k}={json.dumps(v)}" for k, v in args.items())
        text = f"{data['task']}({inner})"
    else:
        try:
            text = job.payload.decode()
        except UnicodeDecodeError:
            text = repr(job.payload)
    return text if len(text) <= width else text[: width - 1] + "…"
