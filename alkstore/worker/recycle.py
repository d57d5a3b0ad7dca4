"""Recycling: a worker that stops itself after ``max_jobs`` jobs or above
``max_memory`` bytes of resident memory, so a fresh process can take over
(Celery's ``max_tasks_per_child`` / ``max_memory_per_child``, RQ's
``--max-jobs``). The stop is the graceful one: no more claims, buffered jobs
released, running jobs finish. ``Worker.run`` then returns :data:`RECYCLE_EXIT`
and the CLI's supervisor (``alkstore.cli.supervisor``) starts a fresh process.

The job count is of jobs *started*: the N-th start stops the claiming, so one
process runs exactly N handlers; its claims never reach past the N-th job, so it
has none claimed ahead to give back at the stop. Memory is the resident set
size, read from ``/proc/self/statm`` every ``MEMORY_CHECK_S`` (elsewhere: the
peak, ``ru_maxrss``), never on the job path.
"""

from __future__ import annotations

import logging
import os
import re
import resource
import sys
from collections.abc import Awaitable, Callable

from alkstore.core.options import describe
from alkstore.errors import InvalidArgumentError
from alkstore.worker.runs import StopFlag

__all__ = ["MEMORY_CHECK_S", "RECYCLE_EXIT", "Recycler", "parse_size", "resident_bytes"]

log = logging.getLogger("alkstore.worker")

RECYCLE_EXIT = 75  # EX_TEMPFAIL: "stopped to be replaced; start me again"
MEMORY_CHECK_S = 1.0

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "kib": 1024,
    "m": 1000**2,
    "mb": 1000**2,
    "mib": 1024**2,
    "g": 1000**3,
    "gb": 1000**3,
    "gib": 1024**3,
}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", re.IGNORECASE)


def parse_size(value: int | str) -> int:
    """Bytes from an int or a size such as ``"512MB"``, ``"1.5GiB"``, ``"200m"``."""
    if type(value) is int:
        if value < 1:
            raise InvalidArgumentError(f"max_memory must be >= 1 byte, got {value}")
        return value
    if isinstance(value, str):
        match = _SIZE.fullmatch(value)
        if match is not None and match.group(2).lower() in _UNITS:
            size = int(float(match.group(1)) * _UNITS[match.group(2).lower()])
            if size >= 1:
                return size
    raise InvalidArgumentError(
        f"max_memory must be a size such as 512MB, 1GiB or a number of bytes, got {describe(value)}"
    )


def resident_bytes() -> int:
    """This process's resident memory now (Linux), else its peak."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


class Recycler:
    """Decides when a worker stops to be replaced; ``stop`` is its graceful stop."""

    def __init__(
        self, max_jobs: int | None, max_memory: int | str | None, stop: Callable[[], None]
    ) -> None:
        if max_jobs is not None and (type(max_jobs) is not int or max_jobs < 1):
            raise InvalidArgumentError(f"max_jobs must be an int >= 1, got {describe(max_jobs)}")
        self.max_jobs = max_jobs
        self.max_memory = None if max_memory is None else parse_size(max_memory)
        self._stop = stop
        self.reason: str | None = None  # why it recycled, once it did

    @property
    def enabled(self) -> bool:
        return self.max_jobs is not None or self.max_memory is not None

    def started(self, count: int) -> None:
        """The producer started its ``count``-th job."""
        if self.max_jobs is not None and count >= self.max_jobs and self.reason is None:
            self._recycle(f"{count} job(s) started (--max-jobs {self.max_jobs})")

    async def watch_memory(self, stop: StopFlag, pause: Callable[[float], Awaitable[None]]) -> None:
        """Check the resident size every ``MEMORY_CHECK_S`` until the worker stops."""
        limit = self.max_memory
        if limit is None:
            return
        while self.reason is None and not stop.requested:
            rss = resident_bytes()
            if rss > limit:
                self._recycle(
                    f"resident memory {rss / 1e6:.1f} MB is above --max-memory {limit / 1e6:.1f} MB"
                )
                return
            await pause(MEMORY_CHECK_S)

    def _recycle(self, why: str) -> None:
        self.reason = why
        log.info("recycling: %s; no more claims, running jobs finish", why)
        self._stop()
