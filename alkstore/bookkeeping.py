"""The bookkeeping the worker and the schedules write: presence rows, outcome counts,
schedule marks. Internal: the operator reads them through ``alkstore.admin.Admin``
(``workers``, ``outcome_history``, ``schedule_marks``).

Each method validates its input, then makes one engine call.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from alkstore.core.names import check_name, check_worker_id
from alkstore.core.options import check_positive
from alkstore.engine_door import StoreDoor, engine_of
from alkstore.errors import InvalidArgumentError

__all__ = ["HISTORY_MINUTES_MAX", "OUTCOMES", "OUTCOMES_KEPT_S", "Bookkeeping"]

# How a worker's run of a job ended (the worker's log and metrics use the same words).
OUTCOMES = ("success", "retry", "dead", "lost", "interrupted", "snoozed", "cancelled")
# The per-minute outcome history is kept this long unless the worker says otherwise
# (Worker(history_retention_s=…), --history-retention); each write purges older minutes.
OUTCOMES_KEPT_S = 7 * 24 * 3600.0
HISTORY_MINUTES_MAX = 366 * 1440  # the longest history Admin.outcome_history reads


class Bookkeeping:
    """What a worker and the schedules record in a store (not the operator's API)."""

    __slots__ = ("_store",)

    def __init__(self, store: StoreDoor) -> None:
        self._store = store

    async def schedule_marks(self, names: list[str]) -> list[tuple[str, float, int | None]]:
        """``(name, last tick as POSIX seconds, last job id)`` of the named schedules."""
        engine = engine_of(self._store)
        return await engine.schedule_marks(names)

    async def mark_schedule(self, name: str, tick: float, job_id: int | None) -> None:
        """Move a schedule's mark forward to ``tick`` (never back)."""
        engine = engine_of(self._store)
        await engine.mark_schedule(name, tick, job_id)

    async def report_worker(
        self,
        worker_id: str,
        host: str,
        pid: int,
        queues: Sequence[str],
        concurrency: int,
        running: int,
    ) -> None:
        """Register a worker or refresh its row (the worker's presence heartbeat)."""
        engine = engine_of(self._store)
        check_worker_id(worker_id)
        names = [check_name(q) for q in queues]
        for label, value in (("pid", pid), ("concurrency", concurrency), ("running", running)):
            if type(value) is not int or not 0 <= value < 2**31:
                raise InvalidArgumentError(f"{label} must be an int >= 0, got {value!r}")
        if type(host) is not str or not host:
            raise InvalidArgumentError(f"host must be a non-empty str, got {host!r}")
        await engine.upsert_worker(worker_id, host, pid, names, concurrency, running)

    async def remove_worker(self, worker_id: str) -> bool:
        """Delete a worker's row (it stopped)."""
        engine = engine_of(self._store)
        return await engine.delete_worker(check_worker_id(worker_id))

    async def purge_workers(self, older_than_s: float) -> int:
        """Delete workers not seen for ``older_than_s``; count them."""
        engine = engine_of(self._store)
        return await engine.purge_workers(check_positive("older_than_s", older_than_s))

    async def record_outcomes(
        self, counts: Iterable[tuple[str, str, int]], keep_s: float = OUTCOMES_KEPT_S
    ) -> None:
        """Add ``(queue, outcome, n)`` counts to the current minute of the outcome history;
        drop minutes older than ``keep_s`` (one transaction, one statement each)."""
        engine = engine_of(self._store)
        check_positive("keep_s", keep_s)
        items = []
        for queue, outcome, n in counts:
            check_name(queue)
            if outcome not in OUTCOMES:
                raise InvalidArgumentError(
                    f"invalid outcome {outcome!r}: use one of {', '.join(OUTCOMES)}"
                )
            if type(n) is not int or n < 0:
                raise InvalidArgumentError(f"count must be an int >= 0, got {n!r}")
            if n:
                items.append((queue, outcome, n))
        if items:
            await engine.add_outcomes(items, keep_s)
