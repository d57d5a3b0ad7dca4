"""The cyclic garbage collector held off while big imports run.

An import allocates tens of thousands of objects (modules, classes, functions) and
frees almost none: the collector's passes over them find nothing. ``import
alkstore`` spent ~4 ms of them and a PostgreSQL store's first open (psycopg, the
engine's modules) another ~4 ms, both on every worker's start (#28).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["paused"]


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No automatic collection in the block; afterwards the collector is as it was
    (a caller that had turned it off keeps it off)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
