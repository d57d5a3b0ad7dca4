"""The cancel watch: stop a handler whose job another party took away.

It listens on the worker's queue channels for ``cancel:<id>`` (a cancel) and
``reclaimed:<id>:<attempts>`` (a lapsed claim taken by a later one) and stops
the held run of that job (``revoke``); a run whose handler already returned is
only logged, its outcome is refused unless written first. A poll-only store
hears none: its heartbeats beat every ``poll_interval_s`` instead. It writes
no outcome and never touches the buffer or the slots.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from alkstore.core.flow import CANCEL_NOTE, RECLAIMED_NOTE
from alkstore.worker.runs import ACKING, DONE, Run

if TYPE_CHECKING:
    from alkstore.store import Store

__all__ = ["watch_cancels"]

log = logging.getLogger("alkstore.worker")


def _parse(payload: str) -> tuple[str, int, int | None] | None:
    """``(why, job id, the announced claim's attempts)`` of a note, else ``None``."""
    if payload.startswith(CANCEL_NOTE):
        why, fields = "cancelled", payload[len(CANCEL_NOTE) :].split(":")
    elif payload.startswith(RECLAIMED_NOTE):
        why, fields = "lost", payload[len(RECLAIMED_NOTE) :].split(":")
    else:
        return None
    if not all(f.isdigit() for f in fields) or not 1 <= len(fields) <= 2:
        return None
    return why, int(fields[0]), int(fields[1]) if len(fields) == 2 else None


async def watch_cancels(
    store: Store, queues: list[str], held: set[Run], revoke: Callable[[Run, str], None]
) -> None:
    """Stop the held runs whose jobs are announced cancelled or reclaimed; until cancelled."""
    if not store.listens:
        return
    async with store.listen(*queues) as sub:
        async for note in sub:
            parsed = _parse(note.payload)
            if parsed is None:
                continue
            why, job_id, newer = parsed
            what = "cancelled" if why == "cancelled" else "reclaimed by another claim"
            for run in list(held):
                job = run.handle.job
                if job.id != job_id or job.queue != note.channel:
                    continue
                if newer is not None and job.attempts >= newer:
                    continue  # that claim is ours (or later than the one announced)
                if run.state is DONE or run.state is ACKING:  # its handler returned
                    log.warning(
                        "job %d (queue %s): %s after its handler returned; its outcome "
                        "is refused unless it was written first",
                        job_id,
                        note.channel,
                        what,
                    )
                    continue
                log.warning("job %d (queue %s): %s; stopping it", job_id, note.channel, what)
                revoke(run, why)
