"""The producer: claims jobs ahead into a buffer and starts them as slots free.

One claim loop per worker, pipelined: it claims ahead into a small buffer of
``prefetch`` jobs (a cap; it adapts to the handlers' run time) while handlers
run, so a freed slot starts the next job at once instead of waiting for a
claim round trip. A slot frees when the handler returns; its outcome is
written behind it by the completer, so claims and outcome writes overlap.
When every queue came back short it waits on the queues' wake channels, until
the earliest delayed job is due, or ``poll_interval_s`` (the re-poll that
covers a lost wake), whichever is first.

It owns the set of held claims (``held``: buffered, running, outcome being
written), the buffer and the slots; each started job is one asyncio task that
runs the executor, then hands the outcome to the completer. It never writes an
outcome itself; at the stop it releases the buffered jobs that never started.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from alkstore.consume import ClaimLoop
from alkstore.engine_door import engine_of
from alkstore.errors import EngineError, StoreClosedError
from alkstore.job_handle import release_many
from alkstore.tracing import recording
from alkstore.worker.outcome import Kind, Outcome
from alkstore.worker.runs import ACKING, BUFFERED, RUNNING, Run, StopFlag, task_name

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from alkstore.job_handle import JobHandle
    from alkstore.metrics import Metrics
    from alkstore.queue import Queue
    from alkstore.store import Store
    from alkstore.subscription import Subscription
    from alkstore.worker.batches import BatchItem
    from alkstore.worker.completer import Completer
    from alkstore.worker.executor import Executor
    from alkstore.worker.heartbeats import Heartbeats
    from alkstore.worker.netwait import DbWaits

__all__ = ["PREFETCH_MIN", "PREFETCH_WAIT_S", "Producer"]

log = logging.getLogger("alkstore.worker")

PREFETCH_WAIT_S = 0.05  # a buffered job should wait about this long for a slot, at most
# the default prefetch cap's floor. It only caps: claim_ahead() holds no more than
# the slots finish in PREFETCH_WAIT_S at the handlers' average run time, so only
# jobs of under ~1.5 ms (at concurrency 32) ever fill it. A claim round trip (with
# its ack's) costs the client ~150-350 µs whatever its size: bigger claims, less
# CPU per job (a cap of 128 took ~20% more client CPU per no-op job at concurrency
# 32 than 512; 1024 ~9% less than 512, with claims of ~520 instead of ~260)
PREFETCH_MIN = 1024
# batch items held beyond the slots' claims, in batches of the largest size: one
# running, one being acked, one filling, one claimed ahead
BATCH_ROOM = 4


class Producer:
    """The claim loop, the claim-ahead buffer and the slots of one worker."""

    def __init__(
        self,
        worker_id: str,
        concurrency: int,
        prefetch: int,
        poll_interval_s: float,
        db: DbWaits,
        stop: StopFlag,
        executor: Executor,
        metrics: Metrics | None,
    ) -> None:
        self.worker_id = worker_id
        self.concurrency = concurrency
        self.prefetch = prefetch
        self.poll_interval_s = poll_interval_s
        self.db = db
        self.stop = stop
        self.executor = executor
        self.metrics = metrics
        self.held: set[Run] = set()  # every claim held: buffered, running, being recorded
        self.ready: deque[Run] = deque()  # claimed ahead, not started
        self.active = 0  # handlers running (slots taken)
        self.duration_s: float | None = None  # moving average of handler run times
        self.room: asyncio.Event | None = None  # set: a slot freed, or room to hold more
        self.first_round: asyncio.Event | None = None  # set: the first claim round is over
        self.loop: asyncio.AbstractEventLoop | None = None
        self.poll_beat_s: float | None = None  # the heartbeat cap of a poll-only store
        self.completer: Completer | None = None
        self.heartbeats: Heartbeats | None = None
        self.started = 0  # jobs started (handlers run) by this worker
        self.after_start: Callable[[int], None] | None = None  # told each new count
        self.start_limit: int | None = None  # --max-jobs: never claim past it
        # batch tasks' jobs wait for their batch without a slot: room to hold a few
        # batches of the largest size beside the slots' own claims
        sizes = [t.batch_size or 0 for t in executor.app.tasks.values()]
        if executor.batches is not None:
            executor.batches.on_done = self._batch_done
            executor.batches.on_revoked = self._item_revoked
        self.batch_room = BATCH_ROOM * max(sizes, default=0)
        # claims no bigger than the largest batch: one batch is claimed while the one
        # before runs and the one before that is acked (a claim of all the room at
        # once would wait for the acks, then leave the database idle while it runs)
        self.claim_cap = max(sizes, default=0) or None
        # a batch task's full claim is taken in after the next claim was sent, so the
        # database claims while this process decodes and gathers (``_take_later``)
        self.deferred: deque[tuple[list[JobHandle], float]] = deque()
        self.taking = 0  # jobs in ``deferred``
        # tells the hand-off slot whether the worker takes hand-offs now (handoffs.py)
        self.say_idle: Callable[[bool], None] | None = None
        self.drained = False  # the last claim round found every queue short
        self.handed = 0  # jobs handed to this worker and started
        self.given_back = 0  # jobs handed to it without a free slot: given back
        self.giving: set[asyncio.Task[Any]] = set()  # hand-offs being given back

    def open(self) -> None:
        """Bind to the running loop (``Worker.run``)."""
        self.room = asyncio.Event()
        self.loop = asyncio.get_running_loop()
        self.first_round = asyncio.Event()

    async def after_first_round(self, start: Callable[..., Awaitable[None]], *args: Any) -> None:
        """``start(*args)`` once the first claim round is over: the worker's first claim
        then takes the store's first pool connection, not a service's first write
        (presence, sweep; ~4 ms of a start on PostgreSQL spent waiting behind them)."""
        assert self.first_round is not None
        await self.first_round.wait()
        await start(*args)

    def wake(self) -> None:
        """Wake the claim loop (a stop, or a slot freed)."""
        if self.room is not None:
            self.room.set()

    def held_counts(self) -> tuple[int, int, int]:
        """Held claims: (handlers running, claimed ahead unstarted, outcome being written)."""
        ahead = len(self.ready)
        writing = sum(1 for run in self.held if run.state is not RUNNING and run.finished)
        return len(self.held) - ahead - writing, ahead, writing

    def unfinished(self) -> list[Run]:
        """The started runs whose handlers have not returned (revoked ones included)."""
        return [
            r for r in self.held if r.task is not None and (r.state is RUNNING or not r.finished)
        ]

    def claim_ahead(self) -> int:
        """How many jobs to hold in the buffer now: ``prefetch`` at most, and no more
        than the slots finish in about ``PREFETCH_WAIT_S`` at the handlers' average
        run time (so long jobs are not hoarded while other workers idle); until a
        handler has finished, at most ``concurrency``."""
        average = self.duration_s
        if average is None:
            return min(self.prefetch, self.concurrency)
        fits = int(self.concurrency * PREFETCH_WAIT_S / max(average, 1e-6))
        return min(self.prefetch, fits)

    # -- claiming -------------------------------------------------------------------
    async def run(
        self,
        store: Store,
        queues: list[Queue],
        sub: Subscription,
        pause: Callable[[float], Awaitable[None]],
    ) -> None:
        """Claim until the worker stops (or the store closes)."""
        room = self.room
        assert room is not None and self.completer is not None and self.heartbeats is not None
        db = self.db
        loop = ClaimLoop(
            queues,
            sub,
            self.poll_interval_s,
            pause=lambda seconds: db.until_back(pause, seconds),
            own_fault=db.own_fault,
        )
        store._loops.add(loop)
        turn = 0
        stop = self.stop
        try:
            while not stop.requested:
                ahead = self.claim_ahead()
                depth = self.concurrency + ahead  # jobs started or buffered, at most
                refill_at = max(1, ahead // 2)  # a fuller buffer waits for a bigger claim
                # held claims, outcomes still being written included
                hold_max = 2 * depth + self.batch_room
                depth += self.batch_room
                taking = self.taking
                want = min(
                    depth - self.active - len(self.ready) - taking,
                    hold_max - len(self.held) - taking,
                )
                idle_slots = self.concurrency - self.active > len(self.ready)
                if self.start_limit is not None:  # jobs claimed past it would go back unrun
                    want = min(want, self.start_limit - self.started - len(self.ready) - taking)
                cap = self.claim_cap
                if cap is not None and want > cap:
                    want = cap
                if want <= 0 or (want < refill_at and not idle_slots):
                    room.clear()
                    await room.wait()
                    continue
                left = await loop.attempt(self._claim_round, loop, queues, turn, want)
                if turn == 0:
                    assert self.first_round is not None
                    self.first_round.set()
                turn += 1
                self.drained = bool(left)  # a failed round (None) takes no hand-offs
                self._mark_idle()
                if left is None or left == 0:
                    continue  # backed off after a failure, or the claim filled what we want
                # every queue came back short: wait for a wake, a due job, the rate
                # limit's next slot or the re-poll. Only the next-due read is a
                # bounded database call; the wait is this task's own, so a wake
                # resumes it directly (no task of the wait's to finish first)
                timeout = None
                with contextlib.suppress(EngineError):  # no answer: logged; claim again
                    timeout = await self.db.call(
                        loop.wait_timeout(),
                        "next due",
                        self.poll_interval_s + self.db.timeout_s,
                        judge=False,
                    )
                if timeout is not None:
                    await loop.wait_idle(timeout)
        except StoreClosedError:
            if not stop.requested:
                log.error("worker %s: the store was closed; stopping", self.worker_id)
        finally:
            store._loops.discard(loop)

    async def _claim_round(self, loop: ClaimLoop, queues: list[Queue], turn: int, want: int) -> int:
        """Claim from each queue in turn until ``want`` jobs are held; how many are missing."""
        for i in range(len(queues)):
            queue = queues[(turn + i) % len(queues)]
            # the claim's own task takes its jobs in: a woken idle worker's handler task
            # is created as the rows arrive, not two loop turns later when this task
            # resumes (a claim given up on is cancelled at its await: it takes nothing)
            got = await self.db.call(self._claim_and_take(loop, queue, want), "claim")
            if got < 0:  # a full claim of a batch task, put aside in ``deferred``
                got = want
                # taken in two loop turns from now, after the next claim's task sent
                # it (its first step is queued behind this)
                running = asyncio.get_running_loop()
                running.call_soon(running.call_soon, self._take_later)
            want -= got
            if want == 0:
                break
        return want

    async def _claim_and_take(self, loop: ClaimLoop, queue: Queue, want: int) -> int:
        """One claim of up to ``want`` jobs of ``queue``, taken in: how many it got, or
        -1 when it got ``want`` and there are batch tasks (more to claim: the jobs wait
        in ``deferred`` for the producer to send the next claim first)."""
        sent = time.monotonic()
        handles, hold = await queue.claim_held(self.worker_id, want)
        loop.held(hold)  # a rate limit held this queue back until then
        if handles and self.metrics is not None:
            now = time.time()
            self.metrics.claimed(
                queue.name, len(handles), (now - h.job.run_at.timestamp() for h in handles)
            )
        if self.claim_cap is not None and len(handles) == want:
            self.deferred.append((handles, sent))
            self.taking += want
            return -1
        self._take(handles, sent)
        return len(handles)

    # -- hand-offs ------------------------------------------------------------------------
    def _free(self) -> bool:
        """Whether a job handed over now would start at once (a slot free, none ahead)."""
        if self.active + len(self.ready) >= self.concurrency:
            return False
        limit = self.start_limit
        return limit is None or self.started + len(self.ready) < limit

    def _mark_idle(self) -> None:
        say_idle = self.say_idle
        if say_idle is not None:
            say_idle(self.drained and not self.stop.requested and self._free())

    def take_handed(self, handle: JobHandle) -> None:
        """A job an enqueue claimed for this worker: start it in a free slot, else
        give it back (pending again at its place: it never waits here behind others,
        nor starts while this worker has a backlog to claim)."""
        if self.stop.requested or not self.drained or not self._free():
            self.given_back += 1
            task = asyncio.get_running_loop().create_task(
                self.db.call(self._give_back(handle), "give back")
            )
            self.giving.add(task)
            task.add_done_callback(self._given)
            self._mark_idle()
            return
        self.handed += 1
        if self.metrics is not None:
            run_at = handle.job.run_at.timestamp()
            self.metrics.claimed(handle.job.queue, 1, (time.time() - run_at,))
        self._take([handle], time.monotonic())
        self._mark_idle()

    @staticmethod
    async def _give_back(handle: JobHandle) -> None:
        """Pending again at its place, its attempt uncounted; its queue's consumers
        woken (this worker's own claim loop among them: it claims when it has room)."""
        if (await release_many([handle]))[0]:
            await engine_of(handle._queue._store).wake(handle.job.queue)

    def _given(self, task: asyncio.Task[Any]) -> None:
        self.giving.discard(task)
        if not task.cancelled() and task.exception() is not None:  # lapses, then reclaimed
            log.warning(
                "worker %s: a hand-off not given back: %s", self.worker_id, task.exception()
            )

    # -- the slots --------------------------------------------------------------------
    def _take_later(self) -> None:
        if self.deferred:  # else released by the stop meanwhile
            handles, sent = self.deferred.popleft()
            self.taking -= len(handles)
            self._take(handles, sent)

    def _take(self, handles: list[JobHandle], sent: float) -> None:
        """Hold freshly claimed jobs (claimed by a request ``sent`` then): buffer them,
        then start as many as slots allow."""
        if not handles:
            return
        heartbeats = self.heartbeats
        assert heartbeats is not None
        now = time.monotonic()
        self.executor.traced = recording()  # asked once per batch, not per job
        poll_beat_s = self.poll_beat_s
        runs = [Run(handle, now, sent, poll_beat_s) for handle in handles]
        self.held.update(runs)
        self.ready.extend(runs)
        # the handlers' tasks first, then the heartbeat service told (it may wake
        # up): their first steps run before its scan, a wake's job starts sooner
        self._fill()
        for run in runs:
            heartbeats.notice(run, now)

    def _fill(self) -> None:
        """Start buffered jobs while slots are free (never once stopping)."""
        ready = self.ready
        stop = self.stop
        completer = self.completer
        loop = self.loop
        batches = self.executor.batches
        assert completer is not None and loop is not None
        now = time.monotonic()  # one reading for the jobs this call starts (a batch's many)
        while ready and self.active < self.concurrency and not stop.requested:
            run = ready.popleft()
            if run.state is not BUFFERED:  # cancelled or lost while buffered: never run it
                self.held.discard(run)
                completer.record_revoked(run, task_name(run))
                continue
            if batches is not None and (call := batches.call_of(run)) is not None:
                # a batch task's job takes no slot: it waits in its batch
                run.state = RUNNING
                run.batched = True
                run.started = now
                # no task, future or callback per item: its batch's ``done`` is what
                # the drain waits on, and the batch hands its outcomes over at once
                run.task = batches.add(run, *call)
                self.started += 1
                if self.after_start is not None:
                    self.after_start(self.started)
                continue
            self.active += 1
            run.state = RUNNING
            run.started = now
            # no done callback: the task's own last step lets go of the claim
            run.task = loop.create_task(self._execute(run))
            self.started += 1
            if self.after_start is not None:
                self.after_start(self.started)  # may stop the worker: the loop ends

    def _free_slot(self, run: Run) -> None:
        if run.finished:
            return
        run.finished = now = time.monotonic()
        if run.batched:  # took no slot
            return
        took = now - run.started
        average = self.duration_s
        self.duration_s = took if average is None else average + (took - average) * 0.1
        self.active -= 1
        self._fill()
        if self.drained:  # a freed slot makes an idle worker of a drained one
            self._mark_idle()
        if self.room is not None:
            self.room.set()

    def _finished(self, run: Run, _task: asyncio.Future[Any] | None) -> None:
        self._free_slot(run)
        if run.state is not ACKING:  # else held until the ack batch recorded it
            self.held.discard(run)
        if self.room is not None:
            self.room.set()

    async def _execute(self, run: Run) -> None:
        """One job's task: run the handler, free the slot, hand over the outcome, let go
        of the claim (held until its ack batch recorded a success)."""
        try:
            try:
                if run.state is RUNNING:
                    outcome = await self.executor.execute(run)
                else:  # revoked before its task began: nothing runs, nothing is written
                    outcome = Outcome(Kind.REVOKED, task_name(run), run.state.value)
            finally:
                self._free_slot(run)  # the next job starts while this outcome is written
            completer = self.completer
            assert completer is not None
            if not completer.settle(run, outcome):
                await completer.write(run, outcome)
        finally:
            if run.state is not ACKING:  # else held until the ack batch recorded it
                self.held.discard(run)
            if self.room is not None:
                self.room.set()

    def _batch_done(self, items: list[BatchItem], outcomes: list[Outcome] | None) -> None:
        """A batch handler ended: hand each item's outcome to the completer (a success
        joins the ack batch; a retry, dead letter or snooze is written by a task the
        drain waits for). ``outcomes`` is ``None`` when the stop cut the batch off past
        its grace: the drain gives those items back."""
        completer = self.completer
        loop = self.loop
        held = self.held
        assert completer is not None and loop is not None
        now = time.monotonic()
        for i, item in enumerate(items):
            run = item._run
            if run.finished:  # revoked meanwhile: handed over then
                continue
            run.finished = now
            if outcomes is None:
                held.discard(run)
                continue
            outcome = outcomes[i]
            if completer.settle(run, outcome):
                if run.state is not ACKING:
                    held.discard(run)
                continue
            run.task = task = loop.create_task(completer.write(run, outcome))
            task.add_done_callback(functools.partial(self._finished, run))
        if self.room is not None:
            self.room.set()

    def _item_revoked(self, run: Run) -> None:
        """A batch item stopped being ours (cancelled, lost): nothing is written."""
        if run.finished:
            return
        assert self.completer is not None
        self.completer.settle(run, Outcome(Kind.REVOKED, run.name, run.state.value))
        self._finished(run, None)

    # -- the stop -----------------------------------------------------------------------
    async def release_buffered(self) -> None:
        """Jobs claimed ahead and never started go back unrun (their attempt uncounted)."""
        if self.giving:  # hand-offs that came while stopping
            await asyncio.gather(*self.giving, return_exceptions=True)
        buffered = [run.handle for run in self.ready]
        for run in self.ready:
            self.held.discard(run)
        self.ready.clear()
        buffered += [handle for handles, _ in self.deferred for handle in handles]
        self.deferred.clear()
        self.taking = 0
        if not buffered:
            return
        # one fenced statement (one transaction) per queue, not one per job
        by_queue: dict[str, list[JobHandle]] = {}
        for handle in buffered:
            if not handle.consumed:  # else it cannot be released: counted as not
                by_queue.setdefault(handle.job.queue, []).append(handle)
        results = await self.db.each(map(release_many, by_queue.values()), "give back")
        # a queue whose statement failed released none of its jobs
        released = sum(r.count(True) for r in results if isinstance(r, list))
        if released < len(buffered):
            log.warning(
                "%d buffered job(s) could not be released; they are reclaimed when their "
                "claims lapse",
                len(buffered) - released,
            )
        log.info("released %d buffered job(s) that never started", released)
