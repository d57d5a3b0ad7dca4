"""The Worker: claims jobs of an App's queues and runs their tasks, up to N at once.

``Worker`` keeps the lifecycle only (start, stop, signals, drain); the work is
done by its parts, each its own module (docs/architecture.md, "The worker"):

- ``producer.py``: the claim loop, the claim-ahead buffer of ``prefetch`` jobs
  and the ``concurrency`` slots (a freed slot starts the next buffered job at
  once; the wake/poll waits when the queues come back short);
- ``executor.py``: runs one job's handler and returns one ``Outcome``
  (``outcome.py``); it stops a handler whose job is no longer ours;
- ``completer.py``: the only writer of outcomes, each through the handle's own
  fenced operation, successes in receipted ack batches (``group_ack.Batcher``);
- maintenance services: ``heartbeats.py`` (keep held claims, stop the lapsed),
  ``cancels.py`` (cancel and reclaim announcements), ``sweeps.py``,
  ``scheduler.py`` (cron ticks) and ``presence.py`` (the registry row).

Stopping (SIGTERM/SIGINT, or :meth:`Worker.stop`): no more claims; buffered
jobs that never started are released (pending again, the attempt uncounted);
running handlers get ``grace_s`` to finish, then are cancelled and their jobs given
back with ``retry(delay_s=0)``, claimable again at once. The interrupted run
counts as an attempt (it may have had effects, and a job that never fits in
the grace period must not loop forever), so at its last attempt the job is
dead-lettered with an ``interrupted`` error (``alkstore jobs requeue`` revives
it). A second signal skips the grace period. A job is never dropped: if even
the give-back fails, its claim lapses and another worker reclaims it.

Observability (docs/observability.md): the worker registers itself and writes its
outcome counts every ``presence_interval_s`` (``presence.py``); with ``metrics``/
``metrics_port`` it keeps Prometheus metrics (``alkstore.metrics``); each handler
runs in a ``process {queue}`` span when tracing is configured (``alkstore.tracing``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import socket
import time
from collections import Counter
from collections.abc import Awaitable, Iterable
from typing import TYPE_CHECKING, Any

from alkstore.bookkeeping import OUTCOMES_KEPT_S
from alkstore.core.life import DEFAULT_ATTEMPT_HISTORY
from alkstore.core.names import check_name, check_worker_id
from alkstore.core.options import QueueOpts, check_non_negative, check_positive, describe
from alkstore.core.urls import redact_url
from alkstore.errors import AlkstoreError, InvalidArgumentError, StoreClosedError
from alkstore.worker.attempt_log import AttemptLog
from alkstore.worker.cancels import watch_cancels
from alkstore.worker.completer import Completer
from alkstore.worker.executor import Executor
from alkstore.worker.gcpace import paced
from alkstore.worker.handoffs import Handoffs
from alkstore.worker.heartbeats import Heartbeats
from alkstore.worker.netwait import STOPPING_WAIT_S, DbWaits
from alkstore.worker.presence import Presence
from alkstore.worker.producer import PREFETCH_MIN, Producer
from alkstore.worker.recycle import RECYCLE_EXIT, Recycler
from alkstore.worker.runs import StopFlag
from alkstore.worker.scheduler import schedule_loop
from alkstore.worker.sweeps import sweep_loop
from alkstore.worker.unknown import UNKNOWN_MAX_AGE_S, UnknownTasks

if TYPE_CHECKING:
    from alkstore.metrics import Metrics
    from alkstore.store import Store
    from alkstore.subscription import Subscription
    from alkstore.worker.protocols import WorkerApp

__all__ = ["Worker", "catch_early_signals"]

log = logging.getLogger("alkstore.worker")

OPEN_WAIT_S = 600.0  # opening the store may migrate it; a stop cuts the wait short
RECEIPT_MAX_AGE_S = 3600.0  # ack receipts of workers gone this long are deleted


_early_signals: list[int] = []  # caught before a Worker took the signals over


def catch_early_signals() -> None:
    """Record SIGTERM/SIGINT until a Worker's run takes the signals over, which then
    acts on them: a signal while the app imports or the store opens stops the worker
    cleanly instead of killing it. For the main thread of a worker process (the CLI)."""

    def record(signum: int, _frame: object) -> None:
        _early_signals.append(signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, record)


class Worker:
    """Runs an App's tasks from its queues; ``await worker.run()`` until stopped.

    >>> worker = app.worker(["emails"], concurrency=16)
    >>> await worker.run()          # returns 0 after a graceful stop, 1 after a forced one

    ``max_jobs`` / ``max_memory`` (bytes, or a size such as ``"512MB"``) stop it
    gracefully after that many jobs started or above that resident size; ``run()``
    then returns :data:`~alkstore.worker.recycle.RECYCLE_EXIT` (75).
    """

    def __init__(
        self,
        app: WorkerApp,
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
        attempt_history: int = DEFAULT_ATTEMPT_HISTORY,
        max_jobs: int | None = None,
        max_memory: int | str | None = None,
        history_retention_s: float = OUTCOMES_KEPT_S,
    ) -> None:
        self.app = app
        self.schedule = schedule
        if type(attempt_history) is not int or attempt_history < 0:
            raise InvalidArgumentError(
                f"attempt_history must be an int >= 0 (0: none kept), got {attempt_history!r}"
            )
        self.attempt_history = attempt_history  # attempts kept per job (#24)
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
            prefetch = max(4 * concurrency, PREFETCH_MIN)
        if type(prefetch) is not int or prefetch < 0:
            raise InvalidArgumentError(f"prefetch must be an int >= 0, got {prefetch!r}")
        self.prefetch = prefetch
        self.worker_id = check_worker_id(
            worker_id or f"{socket.gethostname()}:{os.getpid()}:{os.urandom(3).hex()}"
        )
        self.poll_interval_s = check_positive("poll_interval_s", poll_interval_s)
        self.grace_s = check_non_negative("grace_s", grace_s)
        self.sweep_interval_s = check_positive("sweep_interval_s", sweep_interval_s)
        self.queue_opts = QueueOpts(dead_letter_retention_s=dead_letter_retention_s)
        self.handle_signals = handle_signals
        self.presence_interval_s = check_positive("presence_interval_s", presence_interval_s)
        self.history_retention_s = check_positive("history_retention_s", history_retention_s)
        if unknown_task_max_age_s is not None:
            check_non_negative("unknown_task_max_age_s", unknown_task_max_age_s)
        self._db = DbWaits(self.worker_id)
        if metrics_port is not None and not (
            type(metrics_port) is int and 0 <= metrics_port < 65536
        ):
            raise InvalidArgumentError(f"metrics_port must be in [0, 65535], got {metrics_port!r}")
        if metrics is None and metrics_port is not None:
            from alkstore.metrics import Metrics

            metrics = Metrics()
        self.metrics = metrics
        self.metrics_port = metrics_port
        self.metrics_host = metrics_host
        self.metrics_server: Any = None  # the /metrics HTTP server while running
        self.counts: Counter[str] = Counter()
        self._stop_flag = StopFlag()
        self._signalled = False  # a SIGTERM/SIGINT came: the next one forces the stop
        unknown = UnknownTasks(self.worker_id, unknown_task_max_age_s)
        self._executor = Executor(app, concurrency, self._stop_flag, unknown)
        self._producer = Producer(
            self.worker_id,
            concurrency,
            prefetch,
            self.poll_interval_s,
            self._db,
            self._stop_flag,
            self._executor,
            metrics,
        )
        # --max-jobs / --max-memory: a graceful stop, then run() returns RECYCLE_EXIT
        self.recycler = Recycler(max_jobs, max_memory, functools.partial(self._stop, False))
        if self.recycler.max_jobs is not None:
            self._producer.after_start = self.recycler.started
            self._producer.start_limit = self.recycler.max_jobs
        self._completer: Completer | None = None  # built once the store is open
        self._stop_event: asyncio.Event | None = None
        self._sub: Subscription | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

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
        flag = self._stop_flag
        first = not flag.requested
        flag.requested = True
        flag.forced = flag.forced or force
        self._db.stopping(flag.forced)
        if self._stop_event is not None:
            self._stop_event.set()
        self._producer.wake()
        sub = self._sub
        if first and sub is not None and self._loop is not None:
            self._loop.create_task(sub.aclose())

    def _on_signal(self, signum: int) -> None:
        name = signal.Signals(signum).name
        running, ahead, writing = self._producer.held_counts()
        # a second *signal* forces; a stop of the worker's own (recycling) does not count
        again, self._signalled = self._signalled, True
        if again:
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

    @property
    def running(self) -> int:
        """How many jobs this worker holds right now."""
        return len(self._producer.held)

    @property
    def abandoned_threads(self) -> int:
        """Sync handlers still running in a thread whose jobs are no longer this
        worker's (given back at the end of the grace period, or revoked)."""
        return self._executor.abandoned_threads

    # -- the run ------------------------------------------------------------------
    async def run(self) -> int:
        """Work until stopped; 0 after a graceful stop, 1 after a forced one, 75 after
        a graceful stop to be recycled (``max_jobs``, ``max_memory``)."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._stop_event = asyncio.Event()
        self._producer.open()
        self._db.start()
        if self._stop_flag.forced:
            self._db.stopping(True)
        # first: a signal while the store opens stops the worker cleanly
        signals = self._install_signals(loop)
        try:
            with paced():  # the collector's pace while workers run (gcpace.py)
                return await self._run(loop)
        finally:
            self._sub = None
            if self.metrics_server is not None:
                self.metrics_server.shutdown()
                self.metrics_server.server_close()
                self.metrics_server = None
            for signum in signals:
                loop.remove_signal_handler(signum)
            self._executor.shutdown()

    async def _run(self, loop: asyncio.AbstractEventLoop) -> int:
        stop = self._stop_flag
        if stop.requested:
            log.info("worker %s stopped before it opened the store", self.worker_id)
            return 1 if stop.forced else 0
        try:
            store = await self._db.call(self.app.connect(), "connect", timeout_s=OPEN_WAIT_S)
        except AlkstoreError:
            if not stop.requested:
                raise
            log.info("worker %s stopped while opening the store", self.worker_id)
            return 1 if stop.forced else 0
        queues = [store.queue(name, self.queue_opts) for name in self.queues]
        producer = self._producer
        presence = Presence(
            store,
            self.worker_id,
            self.queues,
            self.concurrency,
            running=lambda: producer.active,
            interval_s=self.presence_interval_s,
            metrics=self.metrics,
            history_retention_s=self.history_retention_s,
        )
        self._build(store, presence)
        if self.metrics is not None and self.metrics_port is not None:
            self.metrics_server = self.metrics.serve(self.metrics_port, self.metrics_host)
            log.info(
                "worker %s: metrics on http://%s:%d/metrics",
                self.worker_id,
                self.metrics_host,
                self.metrics_server.server_port,
            )
        log.info(
            "worker %s: queues %s, concurrency %d, on %s",
            self.worker_id,
            ", ".join(self.queues),
            self.concurrency,
            redact_url(store.url),
        )
        sub = store._wake_subscription(*self.queues)
        handoffs = Handoffs(self.worker_id, producer, self._db)
        listen = self._db.call(sub.__aenter__(), "listen", OPEN_WAIT_S, judge=False)
        try:  # LISTEN (its connection opening meanwhile) beside the chores, then claims
            await asyncio.gather(listen, self._chores(store, handoffs.open(store, queues)))
            self._sub = sub
            if stop.requested:
                await sub.aclose()
            assert producer.heartbeats is not None
            revoke, after = self._executor.revoke, producer.after_first_round
            services = [
                loop.create_task(producer.heartbeats.run()),
                loop.create_task(after(sweep_loop, queues, self._db, self.sweep_interval_s)),
                loop.create_task(after(presence.run)),
                loop.create_task(watch_cancels(store, self.queues, producer.held, revoke)),
                loop.create_task(self.recycler.watch_memory(stop, self._pause)),
            ]
            if self.schedule and self.app.schedules:
                schedules = self.app.schedules
                ticks = schedule_loop(
                    store, schedules, self._db, stop, self._pause, self.poll_interval_s
                )
                services.append(loop.create_task(ticks))
            try:
                await producer.run(store, queues, sub, self._pause)
            finally:
                stop.requested = True
                await self._quietly(handoffs.leave(), "leave hand-offs", judge=False)
                await self._drain()
                for service in services:
                    service.cancel()
                # a service stuck in a database call is left to end in the background
                await asyncio.wait(services, timeout=0.0 if stop.forced else STOPPING_WAIT_S)
                if not stop.forced:  # in turn: one pool connection, none opened for them
                    await self._quietly(presence.leave(), "unregister", judge=False)
                    await self._drop_receipts(store)
        except StoreClosedError:
            if not stop.requested:
                raise
        finally:
            await self._quietly(sub.aclose(), "unlisten", judge=False)
            await self._quietly(handoffs.close(), "close hand-offs", judge=False)
        if self._completer is not None:
            self._completer.summarize()  # the last window's outcomes
        log.info("worker %s stopped: %s", self.worker_id, dict(self.counts) or "no jobs")
        if stop.forced:
            return 1
        recycled = self.recycler.reason is not None and not self._signalled  # else: asked to stop
        return RECYCLE_EXIT if recycled else 0

    def _build(self, store: Store, presence: Presence) -> None:
        """The parts that need the open store: the completer and the heartbeats."""
        producer = self._producer
        assert producer.room is not None
        # on a poll-only store, the heartbeat doubles as the cancel/reclaim check
        beat = producer.poll_beat_s = None if store.listens else self.poll_interval_s
        producer.heartbeats = Heartbeats(producer.held, self._db, beat, self._executor.revoke)
        producer.completer = self._completer = Completer(
            store,
            self.app,
            self.worker_id,
            self._db,
            self._stop_flag,
            counts=self.counts,
            held=producer.held,
            room=producer.room,
            presence=presence,
            metrics=self.metrics,
        )
        if self.attempt_history:
            self._completer.history = AttemptLog(
                store, self.worker_id, self.attempt_history, self._db
            )

    async def _chores(self, store: Store, open_handoffs: Awaitable[None]) -> None:
        """This worker id's past ack receipts dropped (before it writes one), then its
        hand-off slot: in turn, so they take one pool connection, not two."""
        await self._drop_receipts(store)
        await self._quietly(open_handoffs, "open hand-offs")

    async def _drop_receipts(self, store: Store) -> None:
        """Gone workers' ack receipts and this worker's (docs/contract.md, "Ack receipts")."""
        drop = store._drop_ack_receipts(self.worker_id, RECEIPT_MAX_AGE_S)
        await self._quietly(drop, "drop ack receipts")

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
        """A sleep that a stop cuts short."""
        assert self._stop_event is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop_event.wait(), seconds)

    # -- stopping -----------------------------------------------------------------
    async def _drain(self) -> None:
        """Release what never started; let running handlers finish within the grace
        period, then give the rest back; wait for every outcome being written."""
        assert self._stop_event is not None and self._completer is not None
        producer = self._producer
        stop = self._stop_flag
        await producer.release_buffered()
        if producer.executor.batches is not None:
            producer.executor.batches.flush()  # gathered items run now, not at their wait
        deadline = time.monotonic() + self.grace_s
        while not stop.forced:
            running = {r.task for r in producer.unfinished() if r.task is not None}
            remaining = deadline - time.monotonic()
            if not running or remaining <= 0:
                break
            self._stop_event.clear()
            stop_wait = asyncio.ensure_future(self._stop_event.wait())
            await asyncio.wait(
                {*running, stop_wait}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
            )
            stop_wait.cancel()
        await asyncio.sleep(0)  # every started task has begun: cancelled, it cleans up
        leftovers = producer.unfinished()
        for run in leftovers:
            assert run.task is not None
            run.job._revoke()  # a sync handler sees current_job().cancelled: stop now
            run.task.cancel()
        # the cancelled handlers, and the outcomes still being written
        await asyncio.gather(
            *(r.task for r in list(producer.held) if r.task is not None), return_exceptions=True
        )
        flushing = self._completer.flushing
        if flushing is not None:
            await asyncio.gather(flushing, return_exceptions=True)
        await self._completer.give_back(leftovers)
        if self.abandoned_threads:
            log.warning(
                "%d sync handler(s) still running past the grace period: their jobs were "
                "given back; their threads cannot be stopped and must not finish them "
                "(the CLI worker exits without waiting for them)",
                self.abandoned_threads,
            )

    def __repr__(self) -> str:
        return f"<alkstore.Worker {self.worker_id} queues={self.queues}>"
