"""The Worker: claims jobs of an App's queues and runs their tasks, up to N at once.

One claim loop per worker, pipelined: it claims ahead into a small buffer of
``prefetch`` jobs (a cap; it adapts to the handlers' run time) while handlers run, so a freed
slot starts the next job at once instead of waiting for a claim round trip.
A slot frees when the handler returns; its outcome is written in the
background (acks of many jobs share one fenced ``ack_many``), so claims and
outcome writes overlap. When every queue came back short it waits on the
queues' wake channels, until the earliest delayed job is due, or
``poll_interval_s`` (the re-poll that covers a lost wake), whichever is first.

Each claimed job runs as its own asyncio task (sync functions in a thread
pool of ``concurrency`` threads). One heartbeat task resets the claim of every
job held longer than a third of its visibility timeout (buffered ones too), so
a handler may run far longer than the timeout. Outcomes use the handle's own
fenced operations: ``ack`` on success, ``retry`` on an exception (the store
picks the backoff or dead-letters when the budget is spent), ``fail`` on
:class:`~alkstore.Fail`, an unknown task or unusable arguments. Each outcome
stays fenced per job: a batched ack of a claim that lapsed and was taken by
another worker is refused, never applied to the later claim.

Stopping (SIGTERM/SIGINT, or :meth:`Worker.stop`): no more claims; buffered
jobs that never started are released (pending again, the attempt uncounted);
running handlers get ``grace_s`` to finish, then are cancelled and their jobs given
back with ``retry(delay_s=0)``, claimable again at once. The interrupted run
counts as an attempt (it may have had effects, and a job that never fits in
the grace period must not loop forever), so at its last attempt the job is
dead-lettered with an ``interrupted`` error (``alkstore jobs requeue`` revives
it). A second signal skips the grace period. A job is never dropped: if even
the give-back fails, its claim lapses and another worker reclaims it.

Observability (docs/observability.md): the worker registers itself and writes
its outcome counts every ``presence_interval_s`` (``presence.py``); with
``metrics``/``metrics_port`` it keeps Prometheus metrics (``alkstore.metrics``);
each handler runs in a ``process {queue}`` span when tracing is configured
(``alkstore.tracing``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import logging
import os
import signal
import socket
import time
import uuid
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from alkstore.consume import ClaimLoop
from alkstore.core.flow import CANCEL_NOTE, RECLAIMED_NOTE
from alkstore.core.names import check_name, check_worker_id
from alkstore.core.options import QueueOpts, check_non_negative, check_positive, describe
from alkstore.core.results import encode_result
from alkstore.errors import (
    AlkstoreError,
    EngineError,
    InvalidArgumentError,
    PayloadError,
    StoreClosedError,
)
from alkstore.store import JobHandle, Queue, Store
from alkstore.tasks import BadCall, Fail, Snooze, Task, decode_call, decode_envelope
from alkstore.tracing import process_span, recording
from alkstore.worker.context import reset_current, set_current
from alkstore.worker.netwait import STOPPING_WAIT_S, DbWaits
from alkstore.worker.presence import Presence
from alkstore.worker.runs import Run as _Run
from alkstore.worker.runs import beat_period, lapse_margin
from alkstore.worker.runs import error_text as _error_text
from alkstore.worker.runs import outcome_records as _outcome_records
from alkstore.worker.unknown import UNKNOWN_DELAY_S, UNKNOWN_MAX_AGE_S, UnknownTasks

if TYPE_CHECKING:
    from alkstore.app import App
    from alkstore.metrics import Metrics
    from alkstore.subscription import Subscription

__all__ = ["Worker", "catch_early_signals"]

log = logging.getLogger("alkstore.worker")

PREFETCH_WAIT_S = 0.05  # a buffered job should wait about this long for a slot, at most
OPEN_WAIT_S = 600.0  # opening the store may migrate it; a stop cuts the wait short
RECEIPT_MAX_AGE_S = 3600.0  # ack receipts of workers gone this long are deleted
INTERRUPTED = "interrupted: the worker stopped before the handler finished"


_early_signals: list[int] = []  # caught before a Worker took the signals over


def catch_early_signals() -> None:
    """Record SIGTERM/SIGINT until a Worker's run takes the signals over, which then
    acts on them: a signal while the app imports or the store opens stops the worker
    cleanly instead of killing it. For the main thread of a worker process (the CLI)."""

    def record(signum: int, _frame: object) -> None:
        _early_signals.append(signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, record)


def redact_url(url: str) -> str:
    """The URL without its password, for logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


_NO_SPAN = contextlib.nullcontext()


def _tick(tick: Any) -> tuple[str, str]:
    return tick.schedule, tick.at.isoformat()


# (task name, outcome, the fenced handle operation that records it, error)
_Outcome = tuple[str, str, Callable[[], Awaitable[bool]], str | None]


class Worker:
    """Runs an App's tasks from its queues; ``await worker.run()`` until stopped.

    >>> worker = app.worker(["emails"], concurrency=16)
    >>> await worker.run()          # returns 0 after a graceful stop, 1 after a forced one
    """

    def __init__(
        self,
        app: App,
        queues: Iterable[str] | None = None,
        *,
        concurrency: int = 8,
        prefetch: int | None = None,
        worker_id: str | None = None,
        poll_interval_s: float = 1.0,
        grace_s: float = 30.0,
        sweep_interval_s: float = 60.0,
        dead_letter_retention_s: float | None = None,
        handle_signals: bool = True,
        schedule: bool = True,
        presence_interval_s: float = 5.0,
        metrics: Metrics | None = None,
        metrics_port: int | None = None,
        metrics_host: str = "127.0.0.1",
        unknown_task_max_age_s: float | None = UNKNOWN_MAX_AGE_S,
    ) -> None:
        self.app = app
        self.schedule = schedule
        names = list(app.queues if queues is None else queues)
        if isinstance(queues, str):
            names = [queues]
        if not names:
            raise InvalidArgumentError("no queues to work: register a task or pass queues")
        self.queues = [check_name(q) for q in dict.fromkeys(names)]
        if type(concurrency) is not int or concurrency < 1:
            raise InvalidArgumentError(
                f"concurrency must be an int >= 1, got {describe(concurrency)}"
            )
        self.concurrency = concurrency
        if prefetch is None:
            prefetch = max(4 * concurrency, 128)
        if type(prefetch) is not int or prefetch < 0:
            raise InvalidArgumentError(f"prefetch must be an int >= 0, got {prefetch!r}")
        self.prefetch = prefetch
        self.worker_id = check_worker_id(
            worker_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        )
        self.poll_interval_s = check_positive("poll_interval_s", poll_interval_s)
        self.grace_s = check_non_negative("grace_s", grace_s)
        self.sweep_interval_s = check_positive("sweep_interval_s", sweep_interval_s)
        self.queue_opts = QueueOpts(dead_letter_retention_s=dead_letter_retention_s)
        self.handle_signals = handle_signals
        self.presence_interval_s = check_positive("presence_interval_s", presence_interval_s)
        if unknown_task_max_age_s is not None:
            check_non_negative("unknown_task_max_age_s", unknown_task_max_age_s)
        self._unknown = UnknownTasks(self.worker_id, unknown_task_max_age_s)
        self._db = DbWaits(self.worker_id)
        if metrics_port is not None and (
            type(metrics_port) is not int or not 0 <= metrics_port <= 65535
        ):
            raise InvalidArgumentError(f"metrics_port must be in [0, 65535], got {metrics_port!r}")
        if metrics is None and metrics_port is not None:
            from alkstore.metrics import Metrics

            metrics = Metrics()
        self.metrics = metrics
        self.metrics_port = metrics_port
        self.metrics_host = metrics_host
        self.metrics_server: Any = None  # the /metrics HTTP server while running
        self._presence: Presence | None = None
        self.counts: Counter[str] = Counter()
        self._runs: set[_Run] = set()  # every claim held: buffered, running, being recorded
        self._ready: deque[_Run] = deque()  # claimed ahead, not started
        self._active = 0  # handlers running (slots taken)
        self._duration_s: float | None = None  # moving average of handler run times
        self._acking: list[_Run] = []  # successes for the next ack batch
        self._ack_flush: asyncio.Task[None] | None = None
        self._store: Store | None = None
        self._stopping = False
        self._forced = False
        self._stop_event: asyncio.Event | None = None
        self._slot_freed: asyncio.Event | None = None
        self._beat_changed: asyncio.Event | None = None
        self._beat_at = 0.0  # when the heartbeat task wakes next (monotonic)
        self._sub: Subscription | None = None
        self._pool: ThreadPoolExecutor | None = None
        # sync handlers' calls still running in a thread (done ones drop out)
        self._threads: set[concurrent.futures.Future[Any]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        # on a poll-only store, the heartbeat doubles as the cancel/reclaim check
        self._poll_beat_s: float | None = None
        self._traced = False  # whether handlers run in spans (asked per claimed batch)

    # -- control ------------------------------------------------------------------
    def stop(self, *, force: bool = False) -> None:
        """Stop claiming and finish within the grace period (``force``: skip it).

        Safe to call from any thread."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is not loop:
                loop.call_soon_threadsafe(functools.partial(self._stop, force))
                return
        self._stop(force)

    def _stop(self, force: bool) -> None:
        first = not self._stopping
        self._stopping = True
        self._forced = self._forced or force
        self._db.stopping(self._forced)
        for event in (self._stop_event, self._slot_freed):
            if event is not None:
                event.set()
        sub = self._sub
        if first and sub is not None and self._loop is not None:
            self._loop.create_task(sub.aclose())

    def _on_signal(self, signum: int) -> None:
        name = signal.Signals(signum).name
        running, ahead, writing = self._held()
        if self._stopping:
            log.warning(
                "%s again: stopping now (%d running handler(s) cancelled, their jobs given "
                "back; %d outcome(s) not yet written are left to their claims' lapse)",
                name,
                running,
                writing,
            )
            self._stop(True)
        else:
            log.info(
                "%s: no more claims; %d running job(s) get %.0fs to finish, %d claimed "
                "ahead are released unrun, %d await their outcome's write",
                name,
                running,
                self.grace_s,
                ahead,
                writing,
            )
            self._stop(False)

    def _held(self) -> tuple[int, int, int]:
        """Held claims: (handlers running, claimed ahead unstarted, outcome being written)."""
        ahead = len(self._ready)
        writing = sum(1 for run in self._runs if run.done)
        return len(self._runs) - ahead - writing, ahead, writing

    @property
    def running(self) -> int:
        """How many jobs this worker holds right now."""
        return len(self._runs)

    # -- the run ------------------------------------------------------------------
    async def run(self) -> int:
        """Work until stopped; 0 after a graceful stop, 1 after a forced one."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._stop_event = asyncio.Event()
        self._slot_freed = asyncio.Event()
        self._beat_changed = asyncio.Event()
        self._db.start()
        if self._forced:
            self._db.stopping(True)
        # first: a signal while the store opens stops the worker cleanly
        signals = self._install_signals(loop)
        try:
            return await self._run(loop)
        finally:
            self._sub = None
            if self.metrics_server is not None:
                self.metrics_server.shutdown()
                self.metrics_server.server_close()
                self.metrics_server = None
            for signum in signals:
                loop.remove_signal_handler(signum)
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)

    async def _run(self, loop: asyncio.AbstractEventLoop) -> int:
        if self._stopping:
            log.info("worker %s stopped before it opened the store", self.worker_id)
            return 1 if self._forced else 0
        try:
            store = await self._db.call(self.app.connect(), "connect", timeout_s=OPEN_WAIT_S)
        except AlkstoreError:
            if not self._stopping:
                raise
            log.info("worker %s stopped while opening the store", self.worker_id)
            return 1 if self._forced else 0
        self._store = store
        self._poll_beat_s = None if store.listens else self.poll_interval_s
        queues = [store.queue(name, self.queue_opts) for name in self.queues]
        presence = self._presence = Presence(
            store,
            self.worker_id,
            self.queues,
            self.concurrency,
            running=lambda: self._active,
            interval_s=self.presence_interval_s,
            metrics=self.metrics,
        )
        if self.metrics is not None and self.metrics_port is not None:
            self.metrics_server = self.metrics.serve(self.metrics_port, self.metrics_host)
            log.info(
                "worker %s: metrics on http://%s:%d/metrics",
                self.worker_id,
                self.metrics_host,
                self.metrics_server.server_port,
            )
        await self._quietly(  # our own (none yet) and those of long-gone workers
            store._drop_ack_receipts(self.worker_id, RECEIPT_MAX_AGE_S), "drop ack receipts"
        )
        log.info(
            "worker %s: queues %s, concurrency %d, on %s",
            self.worker_id,
            ", ".join(self.queues),
            self.concurrency,
            redact_url(store.url),
        )
        sub = store._wake_subscription(*self.queues)
        try:
            await self._db.call(sub.__aenter__(), "listen", OPEN_WAIT_S, judge=False)
            self._sub = sub
            if self._stopping:
                await sub.aclose()
            helpers = [
                loop.create_task(self._heartbeat_loop()),
                loop.create_task(self._sweep_loop(queues)),
                loop.create_task(presence.run()),
                loop.create_task(self._cancel_watch(store)),
            ]
            if self.schedule and self.app.schedules:
                helpers.append(loop.create_task(self._schedule_loop(store)))
            try:
                await self._claim_loop(store, queues, sub)
            finally:
                self._stopping = True
                await self._drain()
                for helper in helpers:
                    helper.cancel()
                # a helper stuck in a database call is left to end in the background
                await asyncio.wait(helpers, timeout=0.0 if self._forced else STOPPING_WAIT_S)
                if not self._forced:
                    await self._quietly(presence.leave(), "unregister", judge=False)
                    await self._quietly(
                        store._drop_ack_receipts(self.worker_id, RECEIPT_MAX_AGE_S),
                        "drop ack receipts",
                    )
        except StoreClosedError:
            if not self._stopping:
                raise
        finally:
            await self._quietly(sub.aclose(), "unlisten", judge=False)
        log.info("worker %s stopped: %s", self.worker_id, dict(self.counts) or "no jobs")
        return 1 if self._forced else 0

    async def _quietly(self, op: Awaitable[Any], what: str, *, judge: bool = True) -> None:
        """A bounded best-effort database call: a failure is logged, not raised."""
        try:
            await self._db.call(op, what, judge=judge)
        except StoreClosedError:
            pass
        except AlkstoreError as e:
            log.warning("worker %s: %s failed: %s", self.worker_id, what, e)

    def _install_signals(self, loop: asyncio.AbstractEventLoop) -> list[int]:
        if not self.handle_signals:
            return []
        installed: list[int] = []
        for signum in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(signum, self._on_signal, signum)
            except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
                continue
            installed.append(signum)
        pending = [early for early in _early_signals if early in installed]
        _early_signals.clear()
        for early in pending:
            self._on_signal(early)
        return installed

    async def _pause(self, seconds: float) -> None:
        assert self._stop_event is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop_event.wait(), seconds)

    async def _claim_loop(self, store: Store, queues: list[Queue], sub: Subscription) -> None:
        assert self._slot_freed is not None
        loop = ClaimLoop(queues, sub, self.poll_interval_s, pause=self._pause)
        store._loops.add(loop)
        turn = 0
        try:
            while not self._stopping:
                ahead = self._claim_ahead()
                depth = self.concurrency + ahead  # jobs started or buffered, at most
                refill_at = max(1, ahead // 2)  # a fuller buffer waits for a bigger claim
                hold_max = 2 * depth  # held claims, outcomes still being written included
                want = min(depth - self._active - len(self._ready), hold_max - len(self._runs))
                idle_slots = self.concurrency - self._active > len(self._ready)
                if want <= 0 or (want < refill_at and not idle_slots):
                    self._slot_freed.clear()
                    await self._slot_freed.wait()
                    continue
                left = await loop.attempt(self._claim_round, loop, queues, turn, want)
                turn += 1
                if left is None or left == 0:
                    continue  # backed off after a failure, or the claim filled what we want
                # every queue came back short: wait for a wake, a due job, the rate
                # limit's next slot or the re-poll
                with contextlib.suppress(EngineError):  # no answer: logged; claim again
                    await self._db.call(
                        loop.wait_for_work(),
                        "next due",
                        self.poll_interval_s + self._db.timeout_s,
                        judge=False,
                    )
        except StoreClosedError:
            if not self._stopping:
                log.error("worker %s: the store was closed; stopping", self.worker_id)
        finally:
            store._loops.discard(loop)

    async def _claim_round(self, loop: ClaimLoop, queues: list[Queue], turn: int, want: int) -> int:
        """Claim from each queue in turn until ``want`` jobs are held; how many are missing."""
        for i in range(len(queues)):
            queue = queues[(turn + i) % len(queues)]
            sent = time.monotonic()
            handles, hold = await self._db.call(queue.claim_held(self.worker_id, want), "claim")
            loop.held(hold)  # a rate limit held this queue back until then
            if handles and self.metrics is not None:
                self._observe_claim(queue.name, handles)
            self._take(handles, sent)
            want -= len(handles)
            if want == 0:
                break
        return want

    def _claim_ahead(self) -> int:
        """How many jobs to hold in the buffer now: ``prefetch`` at most, and no more
        than the slots finish in about ``PREFETCH_WAIT_S`` at the handlers' average
        run time (so long jobs are not hoarded while other workers idle); until a
        handler has finished, at most ``concurrency``."""
        average = self._duration_s
        if average is None:
            return min(self.prefetch, self.concurrency)
        fits = int(self.concurrency * PREFETCH_WAIT_S / max(average, 1e-6))
        return min(self.prefetch, fits)

    # -- one job ------------------------------------------------------------------
    def _take(self, handles: list[JobHandle], sent: float) -> None:
        """Hold freshly claimed jobs (claimed by a request ``sent`` then): buffer them,
        then start as many as slots allow."""
        assert self._beat_changed is not None
        if not handles:
            return
        now = time.monotonic()
        self._traced = recording()  # asked once per batch, not per job
        for handle in handles:
            run = _Run(handle, now, sent, self._poll_beat_s)
            self._runs.add(run)
            self._ready.append(run)
            if run.next_beat < self._beat_at:
                self._beat_changed.set()
        self._fill()

    def _fill(self) -> None:
        """Start buffered jobs while slots are free (never once stopping)."""
        loop = self._loop
        assert loop is not None
        ready = self._ready
        while ready and self._active < self.concurrency and not self._stopping:
            run = ready.popleft()
            if run.revoked is not None:  # cancelled or lost while buffered: never run it
                self._runs.discard(run)
                self._record_revoked(run, self._task_name(run))
                continue
            self._active += 1
            run.started = time.monotonic()
            run.task = loop.create_task(self._execute(run))
            run.task.add_done_callback(functools.partial(self._finished, run))

    def _free_slot(self, run: _Run) -> None:
        if run.freed:
            return
        run.freed = True
        run.finished = now = time.monotonic()
        took = now - run.started
        average = self._duration_s
        self._duration_s = took if average is None else average + (took - average) * 0.1
        self._active -= 1
        self._fill()
        if self._slot_freed is not None:
            self._slot_freed.set()

    def _finished(self, run: _Run, _task: asyncio.Task[None]) -> None:
        self._free_slot(run)
        if not run.acking:  # else held until the batcher recorded it
            self._runs.discard(run)
        if self._slot_freed is not None:
            self._slot_freed.set()

    async def _execute(self, run: _Run) -> None:
        try:
            name, outcome, op, error = await self._handle(run)
        finally:
            self._free_slot(run)  # the next job starts while this outcome is written
        if run.revoked is not None:  # no longer ours: write nothing
            self._record_revoked(run, name)
            return
        if outcome == "success":
            self._ack_later(run, name)  # this task ends; the ack batcher records it
            return
        if outcome == "kept":  # a success whose result is kept: its own fenced ack
            outcome = "success"
        await self._outcome(run, name, outcome, op(), error)

    async def _handle(self, run: _Run) -> _Outcome:
        """Run the handler; the outcome to write, as (task name, outcome, operation, error)."""
        handle = run.handle
        job = handle.job
        name = "?"
        trace = None
        try:
            name, arguments, trace = decode_envelope(job.payload)
            task = self.app.find_task(name)
            if task is None:  # e.g. a rolling deploy: a newer worker may know it
                run.done = True
                return self._unknown_task(run, describe(name))
        except BadCall:  # not a task call (e.g. a newer envelope): the same policy
            run.done = True
            return self._unknown_task(run, "? (the payload is not a task call)")
        try:
            args, kwargs = task.call_arguments(arguments)
        except BadCall as e:
            run.done = True
            return name, "dead", functools.partial(handle.fail, str(e)), str(e)
        token = set_current(run.job)
        timeout: asyncio.Timeout | None = None
        value: Any = None
        try:
            span = (
                process_span(job.queue, job.id, job.attempts, name, trace)
                if self._traced
                else _NO_SPAN
            )
            with span:
                if task.timeout_s is None:
                    value = await self._call(task, args, kwargs)
                else:
                    async with asyncio.timeout(task.timeout_s) as timeout:
                        value = await self._call(task, args, kwargs)
        except Fail as e:
            run.done = True
            error = str(e) or "Fail"
            return name, "dead", functools.partial(handle.fail, error), error
        except Snooze as e:
            run.done = True
            return name, "snoozed", functools.partial(handle.snooze, e.delay_s), None
        except TimeoutError as e:
            run.done = True
            if timeout is not None and timeout.expired():
                error = f"timeout: the handler ran longer than {task.timeout_s:g}s"
            else:
                error = _error_text(e)
            return self._retry(run, name, error)
        except asyncio.CancelledError as e:
            current = asyncio.current_task()
            if run.revoked is not None and not self._stopping:
                if current is not None:
                    current.uncancel()  # our own cancel: the job is no longer ours
                run.done = True
                return name, "revoked", handle.heartbeat, None  # never called
            if current is not None and current.cancelling():
                raise  # the worker is stopping: _drain gives the job back
            run.done = True  # a CancelledError out of the handler's own code
            return self._retry(run, name, _error_text(e))
        except BaseException as e:  # an outcome for every job, always
            run.done = True
            if task.fail_on and isinstance(e, task.fail_on):
                error = _error_text(e)
                return name, "dead", functools.partial(handle.fail, error), error
            return self._retry(run, name, _error_text(e))
        else:
            run.done = True
            keep = task.keep_result_s
            if keep is None:
                return name, "success", handle.ack, None
            try:
                encode_result(value)
            except PayloadError as e:  # never silently dropped: a failed attempt
                return self._retry(run, name, f"PayloadError: task {name!r}: {e}")
            return name, "kept", functools.partial(handle.ack_result, value, keep), None
        finally:
            reset_current(token)

    def _unknown_task(self, run: _Run, name: str) -> _Outcome:
        """Give the job back unrun (attempt uncounted), or dead-letter it once this
        worker has given it back for ``unknown_task_max_age_s`` (``unknown.py``)."""
        handle = run.handle
        job = handle.job
        known = ", ".join(sorted(self.app.tasks)) or "none"
        if self._unknown.give_back(job.id, name, job.queue, known):
            op = functools.partial(handle.snooze, UNKNOWN_DELAY_S)
            return name, "unknown", op, None
        error = self._unknown.error(name)
        return name, "dead", functools.partial(handle.fail, error), error

    async def _call(self, task: Task[Any, Any], args: list[Any], kwargs: dict[str, Any]) -> Any:
        if task.is_async:
            return await task.fn(*args, **kwargs)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="alkstore-task")
        assert self._loop is not None
        call = functools.partial(contextvars.copy_context().run, task.fn, *args, **kwargs)
        thread = self._pool.submit(call)
        self._threads.add(thread)
        thread.add_done_callback(self._threads.discard)
        result = await asyncio.wrap_future(thread, loop=self._loop)
        if asyncio.iscoroutine(result):  # a sync wrapper that returned a coroutine
            return await result
        return result

    def _ack_later(self, run: _Run, name: str) -> None:
        """Hand a success to the ack batcher: one fenced ``store.ack_many`` for every
        success that arrived while the previous one was in flight."""
        assert self._loop is not None
        run.name = name
        run.acking = True
        self._acking.append(run)
        if self._ack_flush is None:
            self._ack_flush = self._loop.create_task(self._flush_acks())

    async def _flush_acks(self) -> None:
        try:
            while self._acking:
                runs, self._acking = self._acking, []
                answers = await self._ack_runs(runs)
                for run, acked in zip(runs, answers, strict=True):
                    self._runs.discard(run)
                    self._record(run, run.name, "success" if acked else "lost", None)
                if self._slot_freed is not None:
                    self._slot_freed.set()  # room under the hold limit again
        finally:
            self._ack_flush = None
            for run in self._acking:  # cancelled: their claims lapse, they run again
                self._runs.discard(run)

    async def _ack_runs(self, runs: list[_Run]) -> list[bool]:
        """The fenced acks, with this worker's receipt (docs/contract.md, "Ack
        receipts"). A database error is retried with the same batch token until the
        batch's claims lapse (or a forced stop), so a retry answers for an attempt
        whose reply was lost: a claim counts as acked only when the receipt proves
        it, never because its row is gone (another claim may have acked it). If no
        try gets through, the claims lapse and the jobs run again (at-least-once):
        counted ``lost``."""
        assert self._store is not None
        handles = [run.handle for run in runs]
        token = uuid.uuid4().hex
        # past the claims' lapse a retry acks nothing new, but the receipt still proves
        # an earlier attempt; later batches wait behind this one meanwhile
        until = max(run.expires + run.handle.job.visibility_timeout_s for run in runs)
        failures = 0
        while True:
            try:
                return await self._db.call(
                    self._store._ack_receipted(handles, self.worker_id, token), "ack"
                )
            except StoreClosedError:
                break
            except AlkstoreError as e:
                failures += 1
                pause = min(0.1 * 2**failures, 2.0)
                if self._forced or time.monotonic() + pause > until:
                    log.warning("ack of %d job(s) failed: %s", len(handles), e)
                    break
                if failures == 1:
                    log.warning("ack of %d job(s) failed (%s); retrying", len(handles), e)
                await asyncio.sleep(pause)
        return [False] * len(handles)

    @staticmethod
    def _retry(run: _Run, name: str, error: str) -> _Outcome:
        job = run.handle.job
        outcome = "dead" if job.attempts >= job.max_attempts else "retry"
        return name, outcome, functools.partial(run.handle.retry, error), error

    async def _outcome(
        self, run: _Run, name: str, outcome: str, op: Awaitable[bool], error: str | None
    ) -> None:
        """Await the handle operation ``op``, then count and log the outcome."""
        try:
            done = await self._db.call(op, f"outcome {outcome}")
        except StoreClosedError:
            done = False
        except AlkstoreError as e:
            log.warning("job %d: writing outcome %s failed: %s", run.handle.job.id, outcome, e)
            done = False
        self._record(run, name, outcome if done else "lost", error)

    def _record(self, run: _Run, name: str, outcome: str, error: str | None) -> None:
        """Count and log one outcome (``lost``: the claim lapsed, or the job was
        cancelled, so it is not ours any more)."""
        self.counts[outcome] += 1
        if outcome == "unknown":  # given back unrun: not a finished run (warned in unknown.py)
            if log.isEnabledFor(logging.DEBUG):
                self._log(logging.DEBUG, run, name, outcome, None)
            return
        self._observe(run, name, outcome)
        level = logging.INFO if outcome == "success" else logging.WARNING
        if log.isEnabledFor(level):
            self._log(level, run, name, outcome, error)

    def _observe(self, run: _Run, name: str, outcome: str) -> None:
        """Count one finished run in the outcome history and the metrics."""
        queue = run.handle.job.queue
        if self._presence is not None:
            self._presence.count(queue, outcome)
        if self.metrics is not None:
            task = name if name in self.app.tasks else "unknown"  # bounded label values
            duration = (run.finished or time.monotonic()) - run.started
            self.metrics.finished(queue, task, outcome, duration)

    def _observe_claim(self, queue: str, handles: list[JobHandle]) -> None:
        assert self.metrics is not None
        now = time.time()
        self.metrics.claimed(queue, len(handles), (now - h.job.run_at.timestamp() for h in handles))

    def _record_revoked(self, run: _Run, name: str) -> None:
        outcome = run.revoked or "lost"
        reason = "cancelled" if outcome == "cancelled" else "the claim is no longer ours"
        self._record(run, name, outcome, f"{reason}: the handler was stopped")

    def _revoke(self, run: _Run, why: str) -> None:
        """Stop the handler of a job that is no longer ours (cancelled, or claim lost)."""
        if run.revoked is not None or run.done:
            return
        run.revoked = why
        run.lost = True
        run.job._revoke()  # a sync handler sees current_job().cancelled
        task = run.task  # None while buffered: _fill drops it
        if task is not None and self._is_async(run):
            task.cancel()  # an async handler gets CancelledError

    def _is_async(self, run: _Run) -> bool:
        task = self.app.find_task(self._task_name(run))
        return task is not None and task.is_async

    async def _cancel_watch(self, store: Store) -> None:
        """Announcements on the queues' channels that a job this worker holds is no
        longer its: ``cancel:<id>`` and ``reclaimed:<id>:<attempts>``. A poll-only
        store hears none: its heartbeats beat every ``poll_interval_s`` instead."""
        if not store.listens:
            return
        async with store.listen(*self.queues) as sub:
            async for note in sub:
                payload = note.payload
                if payload.startswith(CANCEL_NOTE):
                    why, fields = "cancelled", payload[len(CANCEL_NOTE) :].split(":")
                elif payload.startswith(RECLAIMED_NOTE):
                    why, fields = "lost", payload[len(RECLAIMED_NOTE) :].split(":")
                else:
                    continue
                if not all(f.isdigit() for f in fields) or not 1 <= len(fields) <= 2:
                    continue
                job_id = int(fields[0])
                newer = int(fields[1]) if len(fields) == 2 else None
                for run in list(self._runs):
                    job = run.handle.job
                    if job.id != job_id or job.queue != note.channel:
                        continue
                    if newer is not None and job.attempts >= newer:
                        continue  # that claim is ours (or later than the one announced)
                    if run.done:  # its handler returned: nothing to stop
                        log.warning(
                            "job %d (queue %s): %s after its handler returned; its outcome "
                            "is refused unless it was written first",
                            job_id,
                            note.channel,
                            "cancelled" if why == "cancelled" else "reclaimed by another claim",
                        )
                        continue
                    log.warning(
                        "job %d (queue %s): %s; stopping it",
                        job_id,
                        note.channel,
                        "cancelled" if why == "cancelled" else "reclaimed by another claim",
                    )
                    self._revoke(run, why)

    def _log(self, level: int, run: _Run, name: str, outcome: str, error: str | None) -> None:
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
        _outcome_records.emit(level, line, fields)

    # -- heartbeats and sweeps --------------------------------------------------------
    async def _heartbeat_loop(self) -> None:
        """Beat every held claim when due (in the background: a beat waiting on a dead
        connection holds up nothing), and stop the handler of a claim that lapsed by
        this worker's own clock (``_lapse``): a cut-off worker's claims are taken
        over by others at their deadline, whether or not it hears about it."""
        assert self._beat_changed is not None
        beats: set[asyncio.Task[None]] = set()
        try:
            while True:
                now = time.monotonic()
                self._lapse(now)
                due = [
                    r
                    for r in self._runs
                    if not r.done and not r.lost and not r.beating and r.next_beat <= now
                ]
                if due:
                    for run in due:
                        run.beating = True
                    beat = asyncio.ensure_future(self._beat(due, now))
                    beats.add(beat)
                    beat.add_done_callback(beats.discard)
                wake = 60.0
                for r in self._runs:
                    if r.done or r.lost:
                        continue
                    wake = min(wake, r.expires - lapse_margin(r.handle.job.visibility_timeout_s))
                    if not r.beating:
                        wake = min(wake, r.next_beat)
                wait = min(max(wake - time.monotonic(), 0.0), 60.0) if self._runs else 60.0
                self._beat_at = time.monotonic() + wait
                self._beat_changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._beat_changed.wait(), wait)
        finally:
            for beat in beats:
                beat.cancel()

    async def _beat(self, due: list[_Run], sent: float) -> None:
        """One round of heartbeats, sent at ``sent`` (monotonic)."""
        assert self._beat_changed is not None
        try:
            results = await self._db.call(self._heartbeats(due), "heartbeat")
        except AlkstoreError as e:
            results = [e] * len(due)
        for run, result in zip(due, results, strict=True):
            run.beating = False
            vt = run.handle.job.visibility_timeout_s
            if result is True:
                run.next_beat = sent + beat_period(vt, self._poll_beat_s)
                run.expires = sent + vt
            elif result is False:
                if not run.done and run.revoked is None:
                    job = run.handle.job
                    log.warning(
                        "job %d (queue %s): heartbeat refused; the claim lapsed or "
                        "the job was cancelled: stopping it, no outcome is recorded",
                        job.id,
                        job.queue,
                    )
                    self._revoke(run, "lost")
            else:  # the database hiccuped: beat again soon
                log.debug("heartbeat of job %d failed: %s", run.handle.job.id, result)
                run.next_beat = time.monotonic() + min(0.25, vt / 10)
        self._beat_changed.set()

    @staticmethod
    async def _heartbeats(due: list[_Run]) -> list[Any]:
        """Each run's heartbeat answer (or error); the error itself when all failed."""
        results = await asyncio.gather(*(r.handle.heartbeat() for r in due), return_exceptions=True)
        first = results[0]
        if isinstance(first, AlkstoreError) and all(isinstance(r, AlkstoreError) for r in results):
            raise first
        return results

    def _lapse(self, now: float) -> None:
        """Stop the handlers whose claims lapsed by this worker's clock (less the margin):
        no heartbeat got through in time, so another worker may claim the job now."""
        for run in self._runs:
            if run.done or run.revoked is not None:
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
            self._revoke(run, "lost")

    async def _sweep_loop(self, queues: list[Queue]) -> None:
        while True:
            for queue in queues:
                try:
                    result = await self._db.call(queue.sweep_expired(), "sweep")
                except StoreClosedError:
                    return
                except AlkstoreError as e:
                    log.warning("sweep of queue %s failed: %s", queue.name, e)
                    continue
                if result.expired or result.purged:
                    log.info(
                        "sweep queue=%s expired=%d purged=%d",
                        queue.name,
                        result.expired,
                        result.purged,
                    )
            await asyncio.sleep(self.sweep_interval_s)

    async def _schedule_loop(self, store: Store) -> None:
        """Enqueue the app's due ticks (every worker does; the database keeps each once),
        then sleep until the next tick of any schedule."""
        from alkstore.schedules import enqueue_due

        schedules = self.app.schedules
        while not self._stopping:
            try:
                for tick in await self._db.call(enqueue_due(store, schedules), "schedule"):
                    if tick.enqueued is None:
                        log.info("schedule %r: tick %s skipped (still running)", *_tick(tick))
                    elif not tick.enqueued.duplicate:
                        log.info("schedule %r: tick %s enqueued", *_tick(tick))
            except StoreClosedError:
                return
            except AlkstoreError as e:
                log.warning("scheduling failed: %s", e)
            now = time.time()
            upcoming = min(s.next_after(now).timestamp() for s in schedules)
            await self._pause(min(max(upcoming - time.time(), 0.001), self.poll_interval_s))

    # -- stopping -----------------------------------------------------------------
    async def _drain(self) -> None:
        """Release what never started; let running handlers finish within the grace
        period, then give the rest back; wait for every outcome being written."""
        assert self._stop_event is not None
        await self._release_buffered()
        deadline = time.monotonic() + self.grace_s
        while not self._forced:
            running = {r.task for r in self._runs if r.task is not None and not r.done}
            remaining = deadline - time.monotonic()
            if not running or remaining <= 0:
                break
            self._stop_event.clear()
            stop_wait = asyncio.ensure_future(self._stop_event.wait())
            await asyncio.wait(
                {*running, stop_wait}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
            )
            stop_wait.cancel()
        leftovers = [r for r in self._runs if r.task is not None and not r.done]
        for run in leftovers:
            assert run.task is not None
            run.job._revoke()  # a sync handler sees current_job().cancelled: stop now
            run.task.cancel()
        # the cancelled handlers, and the outcomes still being written
        await asyncio.gather(
            *(r.task for r in list(self._runs) if r.task is not None), return_exceptions=True
        )
        if self._ack_flush is not None:
            await asyncio.gather(self._ack_flush, return_exceptions=True)
        back = [r for r in leftovers if not r.handle.consumed and r.revoked is None]
        results = await self._each(r.handle.retry(INTERRUPTED, delay_s=0) for r in back)
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
            name = self._task_name(run)
            self._observe(run, name, outcome)
            self._log(logging.WARNING, run, name, outcome, INTERRUPTED)
        if self.abandoned_threads:
            log.warning(
                "%d sync handler(s) still running past the grace period: their jobs were "
                "given back; their threads cannot be stopped and must not finish them "
                "(the CLI worker exits without waiting for them)",
                self.abandoned_threads,
            )

    async def _each(self, ops: Iterable[Awaitable[bool]]) -> list[bool | BaseException]:
        """Give-backs at the stop, concurrently, within the stop's bound on waits."""
        ops = list(ops)
        if not ops:
            return []
        try:
            return await self._db.call(
                asyncio.gather(*ops, return_exceptions=True), "give back", judge=False
            )
        except AlkstoreError as e:
            return [e] * len(ops)

    @property
    def abandoned_threads(self) -> int:
        """Sync handlers still running in a thread whose jobs are no longer this
        worker's (given back at the end of the grace period, or revoked)."""
        return sum(1 for thread in list(self._threads) if not thread.done())

    async def _release_buffered(self) -> None:
        """Jobs claimed ahead and never started go back unrun (their attempt uncounted)."""
        buffered = list(self._ready)
        self._ready.clear()
        if not buffered:
            return
        results = await self._each(r.handle.release() for r in buffered)
        for run in buffered:
            self._runs.discard(run)
        released = sum(1 for result in results if result is True)
        if released < len(buffered):
            log.warning(
                "%d buffered job(s) could not be released; they are reclaimed when their "
                "claims lapse",
                len(buffered) - released,
            )
        log.info("released %d buffered job(s) that never started", released)

    @staticmethod
    def _task_name(run: _Run) -> str:
        try:
            return decode_call(run.handle.job.payload)[0]
        except BadCall:
            return "?"

    def __repr__(self) -> str:
        return f"<alkstore.Worker {self.worker_id} queues={self.queues}>"
