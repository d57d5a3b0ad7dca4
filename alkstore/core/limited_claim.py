"""The claim of a limited queue, decided once for both engines as a step flow.

A queue with a settings row (``alk_queues``) may be paused, limited in how
many of its jobs run at once (``concurrency``), in how many run at once per
partition key (``partition_concurrency``) and in how fast it is claimed
(``rate``). :func:`limited_claim` is the order of the reads and writes that
enforce them, and every decision between them (``core.flow`` holds the
arithmetic: :func:`~alkstore.core.flow.admit`, :func:`~alkstore.core.flow.pick_partitions`,
:func:`~alkstore.core.flow.charge`). An engine runs it inside one write
transaction that no other claim of the queue can interleave with (SQLite: the
single writer; PostgreSQL: the settings row held ``FOR UPDATE``), so the count
of running jobs and the rate are read and spent race-free.

Steps (the engine adds the queue, the worker and its clock reading; each
returns rows):

- ``settings()`` → the settings row, with "now" (POSIX seconds) appended as
  its last column; no row: the queue has no settings
- ``count_running()`` → ``[(unexpired claims,)]``
- ``claim_candidates(window)`` → ``(id, partition_key)`` of the first
  ``window`` claimable jobs in claim order (after the engine's pre-claim sweep)
- ``running_partitions()`` → ``(partition_key, unexpired claims)``
- ``claim_ids(ids)`` → the claimed rows of those candidates
- ``claim(n)`` → up to ``n`` claimed rows, in claim order
- ``set_tat(tat)`` → nothing; the rate limiter's new state

A fair queue (``QueueSettings.fair``) takes its admitted jobs through
``core.fair``'s steps instead of ``claim`` / ``claim_candidates``. An engine
need not serialise the claims of a fair queue that has no limits: its key
cursors are locked one by one instead.
"""

from __future__ import annotations

from alkstore.core.fair import fair_claim
from alkstore.core.flow import (
    CANDIDATE_WINDOW,
    Claimed,
    QueueSettings,
    admit,
    charge,
    pick_partitions,
)
from alkstore.core.steps import Flow, Rows

__all__ = ["limited_claim"]


def limited_claim(n: int) -> Flow[Claimed]:
    """Claim up to ``n`` jobs of a queue within its pause, limits and rate.

    An unlimited queue (no settings row, or one without limits) is one plain
    ``claim``; a paused queue claims nothing.
    """
    rows = yield ("settings", {})
    if not rows:
        return Claimed((yield ("claim", {"n": n})))
    settings = QueueSettings.from_row(rows[0])
    now = float(rows[0][-1])
    if settings.paused:
        return Claimed([], settings.limited)
    if not settings.limited:
        if settings.fair:
            return Claimed((yield from fair_claim(n, None)))
        return Claimed((yield ("claim", {"n": n})))
    running = 0
    if settings.concurrency is not None:
        counted = yield ("count_running", {})
        running = int(counted[0][0]) if counted else 0
    admission = admit(settings, now, running, n)
    claimed: Rows = []
    if admission.n and settings.fair:
        claimed = yield from fair_claim(admission.n, settings.partition_concurrency)
    elif admission.n and settings.partition_concurrency is not None:
        window = admission.n + CANDIDATE_WINDOW
        candidates = yield ("claim_candidates", {"window": window})
        busy = {key: int(count) for key, count in (yield ("running_partitions", {}))}
        limit = settings.partition_concurrency
        ids = pick_partitions(candidates, busy, limit, admission.n)
        if ids:
            claimed = yield ("claim_ids", {"ids": ids})
    elif admission.n:
        claimed = yield ("claim", {"n": admission.n})
    tat, wait = charge(settings, now, len(claimed))
    if claimed and tat != settings.tat:
        yield ("set_tat", {"tat": tat})
    return Claimed(claimed, True, wait if admission.rate_capped else None)
