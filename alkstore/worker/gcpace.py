"""The cyclic garbage collector's pace while workers run in this process.

A draining worker allocates a few short-lived container objects per job (its
claim's row, handle and ``Run``, the handler's coroutine and task, callbacks),
and holds hundreds of claims at once: at the interpreter's default first
threshold (700 allocations) the young generation is collected every ~100 jobs,
each time scanning the held claims, and the survivors promoted into the old
generation bring on full collections of the whole heap (the app's modules and
everything else alive). Measured on PostgreSQL at concurrency 32 (no-op jobs):
2.5–4.5 µs of collector time per job, 10–15% of the worker's client CPU.

So while at least one worker runs, :func:`paced` raises the first threshold to
``YOUNG_THRESHOLD`` (never lowers one set higher) and freezes the objects alive
at the first worker's start (``gc.freeze``: a full collection no longer walks
them). When the last worker of the process stops, both are undone: the
threshold is restored unless someone else changed it meanwhile, and the frozen
objects are unfrozen (cyclic garbage among them is collected as usual then).
Nothing is freed later than it would be by reference counting; cyclic garbage
waits at most for the next (rarer) young collection.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["YOUNG_THRESHOLD", "paced"]

YOUNG_THRESHOLD = 7000  # allocations between young collections (the default is 700)

_running = 0  # workers running in this process
_saved: tuple[int, ...] | None = None  # the thresholds before the first one started
_set: tuple[int, ...] | None = None  # what it set them to


@contextlib.contextmanager
def paced() -> Iterator[None]:
    """Hold the collector at the workers' pace for the block (see the module)."""
    global _running, _saved, _set
    if _running == 0:
        _saved = gc.get_threshold()
        first, *rest = _saved
        if first and first < YOUNG_THRESHOLD:  # 0: collection turned off, left so
            gc.set_threshold(YOUNG_THRESHOLD, *rest)
        _set = gc.get_threshold()
        gc.freeze()
    _running += 1
    try:
        yield
    finally:
        _running -= 1
        if _running == 0:
            gc.unfreeze()
            if _saved is not None and gc.get_threshold() == _set:
                gc.set_threshold(*_saved)
            _saved = _set = None
