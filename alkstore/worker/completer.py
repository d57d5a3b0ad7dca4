"""The completer: the only part of the worker that writes outcomes.

Each :class:`~alkstore.worker.outcome.Outcome` goes through the handle's own
fenced operation of its kind (``ack_result``, ``retry``, ``fail``, ``snooze``);
a plain success joins the ack batch (:class:`~alkstore.group_ack.Batcher`, the
one batching primitive): one receipted, fenced ack for every success that
arrived while the previous batch was in flight (docs/contract.md, "Ack
receipts"). A success counts only when the receipt proves it. At the stop it
gives back the handlers cut off by the end of the grace period. Every outcome
is counted (``Worker.counts``, the presence history, the metrics) and logged
here: one line per job at DEBUG for a success, at WARNING for any other
outcome, and at INFO a summary of the outcomes recorded every
``SUMMARY_EVERY_S`` (and at the stop), counted from the database's answers.
It never runs a handler and never claims.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import Counter
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from alkstore.errors import AlkstoreError, StoreClosedError
from alkstore.group_ack import Batcher
from alkstore.worker.job_life import park
from alkstore.worker.outcome import Kind, Outcome, outcome_records
from alkstore.worker.runs import ACKING, CANCELLED, LOST, Run, StopFlag, task_name

if TYPE_CHECKING:
    from alkstore.metrics import Metrics
    from alkstore.store import Store
    from alkstore.worker.attempt_log import AttemptLog
    from alkstore.worker.netwait import DbWaits
    from alkstore.worker.presence import Presence
    from alkstore.worker.protocols import WorkerApp

__all__ = ["INTERRUPTED", "SUMMARY_EVERY_S", "Completer", "ack_backoff_s"]

log = logging.getLogger("alkstore.worker")

INTERRUPTED = "interrupted: the worker stopped before the handler finished"
SUMMARY_EVERY_S = 10.0  # the INFO summary of recorded outcomes, at most this often


def ack_backoff_s(failures: int) -> float:
    """The pause after ``failures`` failed tries of one ack batch: 0.2 s doubling to 2 s."""
    return min(0.1 * 2.0**failures, 2.0)


class Completer:
    """Writes, counts and logs the outcomes of one worker's runs."""

    def __init__(
        self,
        store: Store,
        app: WorkerApp,
        worker_id: str,
        db: DbWaits,
        stop: StopFlag,
        *,
        counts: Counter[str],
        held: set[Run],
        room: asyncio.Event,
        presence: Presence | None,
        metrics: Metrics | None,
    ) -> None:
        self.store = store
        self.app = app
        self.worker_id = worker_id
        self.db = db
        self.stop = stop
        self.counts = counts
        self.held = held  # every claim the worker holds: a run leaves it once recorded
        self.room = room  # set when a batch was written: room under the hold limit again
        self.presence = presence
        self.metrics = metrics
        self._acks: Batcher[Run] = Batcher(self._flush, self._abandon)
        self.history: AttemptLog | None = None  # the attempt history's writer (#24)
        # the INFO summary: the counts as of the last one, and its timer while armed
        self._summarized: Counter[str] = Counter()
        self._summary_at = time.monotonic()
        self._summary_timer: asyncio.TimerHandle | None = None

    # -- settling one run -------------------------------------------------------------
    def settle(self, run: Run, outcome: Outcome) -> bool:
        """Handle ``outcome`` without waiting if it can be: a revoked run (nothing to
        write) or a success (to the ack batch); ``False``: :meth:`write` it."""
        state = run.state
        if state is CANCELLED or state is LOST:  # no longer ours: write nothing
            self.record_revoked(run, outcome.name)
            return True
        if outcome.kind is Kind.ACK:
            run.name = outcome.name
            run.state = ACKING  # held until the batch recorded it
            self._acks.add(run)
            return True
        return False

    async def write(self, run: Run, outcome: Outcome) -> None:
        """Write ``outcome`` with the handle's fenced operation, then count and log it."""
        handle = run.handle
        kind = outcome.kind
        op: Awaitable[bool]
        if kind is Kind.ACK_RESULT:
            op = handle.ack_result(outcome.value, outcome.seconds)
        elif kind is Kind.RETRY:
            op = handle.retry(outcome.error)
        elif kind is Kind.FAIL:
            op = handle.fail(outcome.error)
        elif kind is Kind.SNOOZE and outcome.value is not None:  # parked on a signal
            op = park(handle, outcome.seconds, outcome.value)
        elif kind is Kind.SNOOZE or kind is Kind.GIVE_BACK:
            op = handle.snooze(outcome.seconds)
        else:
            raise AssertionError(f"not written here: {outcome!r}")
        label = outcome.label
        try:
            done = await self.db.call(op, f"outcome {label}")
        except StoreClosedError:
            done = False
        except AlkstoreError as e:
            log.warning("job %d: writing outcome %s failed: %s", run.handle.job.id, label, e)
            done = False
        self.record(run, outcome.name, label if done else "lost", outcome.error)
        if self.history is not None and kind is not Kind.GIVE_BACK:
            self.history.add(run, label if done else "lost", outcome.error or _refused(done))

    # -- the ack batch ------------------------------------------------------------------
    @property
    def flushing(self) -> asyncio.Task[None] | None:
        """The ack batch being written, if any (the stop waits for it)."""
        return self._acks.flushing

    async def _flush(self, runs: list[Run]) -> None:
        if len({run.handle.job.id for run in runs}) < len(runs):
            runs = self._one_run_per_job(runs)
        answers = await self._ack_runs(runs)
        held = self.held
        acked: list[Run] = []
        for run, done in zip(runs, answers, strict=True):
            held.discard(run)
            if done:
                acked.append(run)
                continue
            self.record(run, run.name, "lost", None)
            if self.history is not None:  # a refused ack is not a success
                self.history.add(run, "lost", _refused(False))
        if acked:
            self._record_successes(acked)
        self.room.set()

    def _one_run_per_job(self, runs: list[Run]) -> list[Run]:
        """The batch without a second run of a job already in it. This worker held
        two claims of one job at once (seen once in a chaos run around a server
        restart, both at attempt 1): the batch acks the job once, the other run is
        counted ``lost``. Left in, it made the whole batch an error that every retry
        met again until the claims lapsed (a minute of no acks)."""
        seen: set[int] = set()
        kept: list[Run] = []
        for run in runs:
            job = run.handle.job
            if job.id not in seen:
                seen.add(job.id)
                kept.append(run)
                continue
            log.warning(
                "job %d: claimed twice at once (attempt %d); acked once", job.id, job.attempts
            )
            self.held.discard(run)
            self.record(run, run.name, "lost", None)
        return kept

    def _abandon(self, runs: list[Run]) -> None:
        """The batch task was cancelled: these claims lapse and their jobs run again."""
        for run in runs:
            self.held.discard(run)

    async def _ack_runs(self, runs: list[Run]) -> list[bool]:
        """The fenced acks, with this worker's receipt (docs/contract.md, "Ack
        receipts"). A database error is retried with the same batch token until the
        batch's claims lapse (or a forced stop), so a retry answers for an attempt
        whose reply was lost: a claim counts as acked only when the receipt proves
        it, never because its row is gone (another claim may have acked it). If no
        try gets through, the claims lapse and the jobs run again (at-least-once):
        counted ``lost``."""
        handles = [run.handle for run in runs]
        # 32 random hex digits, as uuid4().hex gave, without importing uuid (and with
        # it platform: ~2-3 ms of an in-process worker's start; the CLI's click imports it)
        token = os.urandom(16).hex()
        # past the claims' lapse a retry acks nothing new, but the receipt still proves
        # an earlier attempt; later batches wait behind this one meanwhile
        until = max(run.expires + run.handle.job.visibility_timeout_s for run in runs)
        failures = 0
        db = self.db
        while True:
            sent = time.monotonic()
            try:
                ack = self.store._ack_receipted(handles, self.worker_id, token)
                return await db.call(ack, "ack")
            except StoreClosedError:
                break
            except AlkstoreError as e:
                if db.own_fault(e, sent):  # its connection, not the database: no long pause
                    failures = 0
                failures += 1
                pause = max(ack_backoff_s(failures) - (time.monotonic() - sent), 0.0)
                if self.stop.forced or time.monotonic() + pause > until:
                    log.warning("ack of %d job(s) failed: %s", len(handles), e)
                    break
                if failures == 1:
                    log.warning("ack of %d job(s) failed (%s); retrying", len(handles), e)
                # after an outage, the retry goes as soon as another call gets through
                await db.until_back(asyncio.sleep, pause)
        return [False] * len(handles)

    # -- the stop's give-backs ------------------------------------------------------------
    async def give_back(self, leftovers: list[Run]) -> None:
        """Give back the jobs whose handlers the stop cut off (``retry(delay_s=0)``,
        the attempt counted: ``interrupted``, or ``dead`` at the budget); one that
        cannot be given back is left to its claim's lapse (``lost``)."""
        back = [r for r in leftovers if not r.handle.consumed and r.revoked is None]
        results = await self.db.each(
            (run.handle.retry(INTERRUPTED, delay_s=0) for run in back), "give back"
        )
        for run, result in zip(back, results, strict=True):
            job = run.handle.job
            if result is True:
                outcome = "dead" if job.attempts >= job.max_attempts else "interrupted"
            else:
                outcome = "lost"
                if isinstance(result, BaseException):
                    log.warning(
                        "job %d could not be given back (%s); it is reclaimed when its "
                        "claim lapses",
                        job.id,
                        result,
                    )
            self.counts[outcome] += 1
            name = task_name(run)
            self._observe(run, name, outcome)
            self._log(logging.WARNING, run, name, outcome, INTERRUPTED)
            if self.history is not None:
                self.history.add(run, outcome, INTERRUPTED)
        if self.history is not None:
            await self.history.drain()

    # -- the INFO summary ------------------------------------------------------------------
    def _arm_summary(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a unit test): summarized when asked
            return
        delay = max(0.0, self._summary_at + SUMMARY_EVERY_S - time.monotonic())
        self._summary_timer = loop.call_later(delay, self.summarize)

    def summarize(self) -> None:
        """Log (INFO) how many outcomes of each kind were recorded since the last
        summary, if any: each count is an outcome the database confirmed (or
        ``lost``: refused). The worker calls it once more at its stop."""
        timer = self._summary_timer
        if timer is not None:
            timer.cancel()
            self._summary_timer = None
        now = time.monotonic()
        window = now - self._summary_at
        since = self.counts - self._summarized
        self._summarized = self.counts.copy()
        self._summary_at = now
        if not since or not log.isEnabledFor(logging.INFO):
            return
        total = since.total()
        parts = " ".join(f"{k}={n}" for k, n in sorted(since.items()))
        fields: dict[str, object] = {"window_s": round(window, 3), "jobs": total, **since}
        log.info(
            "jobs done in %.1fs: %d (%.0f/s) %s",
            window,
            total,
            total / window if window > 0 else 0.0,
            parts,
            extra={"alkstore": fields},
        )

    # -- counting and logging -------------------------------------------------------------
    def record(self, run: Run, name: str, outcome: str, error: str | None) -> None:
        """Count and log one outcome (``lost``: the claim lapsed, or the job was
        cancelled, so it is not ours any more)."""
        self.counts[outcome] += 1
        if self._summary_timer is None:
            self._arm_summary()
        if outcome == "unknown":  # given back unrun: not a finished run (warned in unknown.py)
            if log.isEnabledFor(logging.DEBUG):
                self._log(logging.DEBUG, run, name, outcome, None)
            return
        self._observe(run, name, outcome)
        # a success's own line is DEBUG: at INFO the periodic summary counts it
        level = logging.DEBUG if outcome == "success" else logging.WARNING
        if log.isEnabledFor(level):
            self._log(level, run, name, outcome, error)

    def _record_successes(self, runs: list[Run]) -> None:
        """:meth:`record` for the runs whose ack the database confirmed, counted once
        per batch and queue (their own lines are DEBUG: the INFO summary counts them)."""
        self.counts["success"] += len(runs)
        if self._summary_timer is None:
            self._arm_summary()
        if self.presence is not None:
            for queue, n in Counter(run.handle.job.queue for run in runs).items():
                self.presence.count(queue, "success", n)
        debug = log.isEnabledFor(logging.DEBUG)
        if self.metrics is not None or debug:
            for run in runs:
                self._measure(run, run.name, "success")
                if debug:
                    self._log(logging.DEBUG, run, run.name, "success", None)

    def record_revoked(self, run: Run, name: str) -> None:
        """Count and log a run that stopped being ours (nothing is written)."""
        outcome = run.revoked or "lost"
        reason = "cancelled" if outcome == "cancelled" else "the claim is no longer ours"
        self.record(run, name, outcome, f"{reason}: the handler was stopped")
        if self.history is not None:
            self.history.add(run, outcome, f"{reason}: the handler was stopped")

    def _observe(self, run: Run, name: str, outcome: str) -> None:
        """Count one finished run in the outcome history and the metrics."""
        if self.presence is not None:
            self.presence.count(run.handle.job.queue, outcome)
        self._measure(run, name, outcome)

    def _measure(self, run: Run, name: str, outcome: str) -> None:
        """The run's outcome and duration in the metrics, if the worker has them."""
        if self.metrics is not None:
            task = name if name in self.app.tasks else "unknown"  # bounded label values
            duration = (run.finished or time.monotonic()) - run.started
            self.metrics.finished(run.handle.job.queue, task, outcome, duration)

    def _log(self, level: int, run: Run, name: str, outcome: str, error: str | None) -> None:
        job = run.handle.job
        duration_ms = ((run.finished or time.monotonic()) - run.started) * 1000
        fields = {
            "queue": job.queue,
            "task": name,
            "id": job.id,
            "attempt": job.attempts,
            "max_attempts": job.max_attempts,
            "duration_ms": round(duration_ms, 3),
            "outcome": outcome,
        }
        line = (
            f"job outcome={outcome} queue={job.queue} task={name} id={job.id} "
            f"attempt={job.attempts}/{job.max_attempts} duration_ms={duration_ms:.1f}"
        )
        if error is not None:
            first = error.splitlines()[0] if error else ""
            fields["error"] = first
            line += f" error={first!r}"
        outcome_records.emit(level, line, fields)


def _refused(done: bool) -> str | None:
    return None if done else "the outcome was refused: the claim was no longer this worker's"
