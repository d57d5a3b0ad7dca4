"""Heartbeats: keep every claim the worker holds, and stop what lapsed by its clock.

One service per worker. A held job (buffered or running) is beaten when a third
of its visibility timeout has passed since its claim or last beat (on a
poll-only store at least every ``poll_interval_s``, so a refused beat stops a
cancelled or reclaimed handler soon). Beats go out in the background: a beat
waiting on a dead connection holds up nothing. A refused beat means the claim
is no longer ours: the handler is stopped (``revoke``), no outcome is written;
it counts as cancelled when the job has no row left (deleted under the claim).
A claim whose deadline by the worker's own clock is a margin away is stopped
the same way: a worker cut off from the database gets no refusal, and the
others reclaim its jobs at their deadline. It writes no outcome and never
touches the buffer or the slots.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from alkstore.errors import AlkstoreError
from alkstore.worker.runs import LIVE, Run, beat_period, lapse_margin

if TYPE_CHECKING:
    from alkstore.worker.netwait import DbWaits

__all__ = ["Heartbeats"]

log = logging.getLogger("alkstore.worker")

IDLE_WAKE_S = 60.0  # with nothing to beat, look again after this long at most


class Heartbeats:
    """The heartbeat service of one worker's held claims."""

    def __init__(
        self,
        held: set[Run],
        db: DbWaits,
        poll_beat_s: float | None,
        revoke: Callable[[Run, str], None],
    ) -> None:
        self.held = held
        self.db = db
        self.poll_beat_s = poll_beat_s
        self.revoke = revoke
        self.changed = asyncio.Event()  # set: a run's beat is due earlier than planned
        self.beat_at = 0.0  # when the service wakes next (monotonic)
        self.horizon_s = IDLE_WAKE_S  # the shortest beat period seen: the longest sleep

    def notice(self, run: Run, now: float) -> None:
        """A new claim (made at ``now``): wake the service only if its first beat is due
        before the next planned wake. The service wakes at least every shortest beat
        period it has seen, so claims of the same timeouts never wake it: a worker
        draining fast claims thousands of jobs a second, and a wake scans every held
        claim."""
        period = run.next_beat - now
        if period < self.horizon_s:
            self.horizon_s = period
        if run.next_beat < self.beat_at:
            self.changed.set()

    async def run(self) -> None:
        """Beat every held claim when due, stop the lapsed ones; until cancelled."""
        beats: set[asyncio.Task[None]] = set()
        try:
            while True:
                now = time.monotonic()
                self._lapse(now)
                due = [
                    r for r in self.held if r.state in LIVE and not r.beating and r.next_beat <= now
                ]
                if due:
                    for run in due:
                        run.beating = True
                    beat = asyncio.ensure_future(self._beat(due, now))
                    beats.add(beat)
                    beat.add_done_callback(beats.discard)
                wake = now + self.horizon_s
                for r in self.held:
                    if r.state not in LIVE:
                        continue
                    wake = min(wake, r.expires - lapse_margin(r.handle.job.visibility_timeout_s))
                    if not r.beating:
                        wake = min(wake, r.next_beat)
                wait = min(max(wake - time.monotonic(), 0.0), IDLE_WAKE_S)
                self.beat_at = time.monotonic() + wait
                self.changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.changed.wait(), wait)
        finally:
            for beat in beats:
                beat.cancel()

    async def _beat(self, due: list[Run], sent: float) -> None:
        """One round of heartbeats, sent at ``sent`` (monotonic)."""
        try:
            results = await self.db.call(self._heartbeats(due), "heartbeat")
        except AlkstoreError as e:
            results = [e] * len(due)
        refused: list[Run] = []
        for run, result in zip(due, results, strict=True):
            run.beating = False
            vt = run.handle.job.visibility_timeout_s
            if result is True:
                run.next_beat = sent + beat_period(vt, self.poll_beat_s)
                run.expires = sent + vt
            elif result is False:
                if run.state in LIVE:
                    refused.append(run)
            else:  # the database hiccuped: beat again soon
                log.debug("heartbeat of job %d failed: %s", run.handle.job.id, result)
                run.next_beat = time.monotonic() + min(0.25, vt / 10)
        if refused:  # each looked up at once (after an outage they come together)
            await asyncio.gather(*(self._refused(run, sent) for run in refused))
        self.changed.set()

    async def _refused(self, run: Run, sent: float) -> None:
        """Stop a run whose beat was refused, named by what the database did: a job
        with no row left while the claim was unexpired was cancelled (its announcement
        may come after the refusal, or never on a poll-only store), else the claim
        lapsed or was taken."""
        why = "lost"
        if sent < run.expires:  # nobody else could have claimed it meanwhile
            try:
                if await self.db.call(run.handle._gone(), "heartbeat"):
                    why = "cancelled"
            except AlkstoreError as e:
                log.debug(
                    "job %d: could not look up why its beat was refused: %s", run.handle.job.id, e
                )
        if run.state not in LIVE:  # the announcement came first
            return
        job = run.handle.job
        log.warning(
            "job %d (queue %s): heartbeat refused; %s: stopping it, no outcome is recorded",
            job.id,
            job.queue,
            "the job was cancelled" if why == "cancelled" else "the claim lapsed or was taken",
        )
        self.revoke(run, why)

    @staticmethod
    async def _heartbeats(due: list[Run]) -> list[Any]:
        """Each run's heartbeat answer (or error); the error itself when all failed."""
        results = await asyncio.gather(*(r.handle.heartbeat() for r in due), return_exceptions=True)
        first = results[0]
        if isinstance(first, AlkstoreError) and all(isinstance(r, AlkstoreError) for r in results):
            raise first
        return results

    def _lapse(self, now: float) -> None:
        """Stop the handlers whose claims lapsed by this worker's clock (less the margin):
        no heartbeat got through in time, so another worker may claim the job now."""
        for run in self.held:
            if run.state not in LIVE:
                continue
            vt = run.handle.job.visibility_timeout_s
            if now < run.expires - lapse_margin(vt):
                continue
            job = run.handle.job
            log.warning(
                "job %d (queue %s): its claim lapses in %.1fs by this worker's clock and no "
                "heartbeat got through: stopping it, no outcome is recorded",
                job.id,
                job.queue,
                max(run.expires - now, 0.0),
            )
            self.revoke(run, "lost")
