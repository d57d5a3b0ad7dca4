"""How a user's value is shown in an error message."""

from __future__ import annotations

__all__ = ["describe"]


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
