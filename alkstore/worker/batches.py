"""Batch handlers: a task registered with ``batch_size`` gets a list of calls.

The producer hands each claimed job of a batch task to :class:`Batches` instead
of a slot: the job waits (still held, heartbeats going, cancellable on its own)
until ``batch_size`` jobs of that task are gathered or ``batch_wait_s`` passed,
then the handler runs once for the list of :class:`BatchItem`. Each item gets
its own :class:`~alkstore.worker.outcome.Outcome`, written by the completer
through that job's own fenced operation: a success joins the ack batch, a
marked item is retried, dead-lettered or snoozed on its own (its attempts,
backoff and dead letters are its job's). By default the batch succeeds or fails
as a whole: items the handler did not mark take the handler's result.

No future or callback per item: each item's ``Run.task`` is its batch's one
``done`` future (what the worker's drain waits on), and the outcomes of a whole
batch are handed to the worker in one call (``on_done``) when its handler ends.
A revoked item (cancelled, lost) is handed over at once (``on_revoked``); a
cancel of ``done`` (the stop past its grace) stops the handler, and its items
are the drain's to give back.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from typing import TYPE_CHECKING, Any

from alkstore.core.options import check_non_negative
from alkstore.errors import InvalidArgumentError
from alkstore.tasks import BadCall, Fail, Snooze, Task, decode_envelope
from alkstore.worker.context import _in_batch
from alkstore.worker.outcome import Kind, Outcome, error_text
from alkstore.worker.runs import RUNNING, Run

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from alkstore.worker.protocols import WorkerApp

__all__ = ["BatchItem", "Batches"]


class BatchItem:
    """One call in a batch handler's list: its job's ``id``, ``attempts`` (this one
    included), ``args`` (the call's keyword arguments) and marks. An unmarked item
    takes the batch's result (success if the handler returns, else its error)."""

    __slots__ = ("_mark", "_run", "args")

    def __init__(self, run: Run, args: dict[str, Any]) -> None:
        self._run = run
        self.args = args
        self._mark: Outcome | None = None

    @property
    def id(self) -> int:
        """The job id."""
        return self._run.job.id

    @property
    def attempts(self) -> int:
        """Attempts of this job so far, this one included."""
        return self._run.job.attempts

    @property
    def cancelled(self) -> bool:
        """Whether this job stopped being this worker's (cancelled, or its claim lost):
        its outcome is not written whatever the handler does."""
        return self._run.state is not RUNNING

    def fail(self, error: str = "failed") -> None:
        """Dead-letter this job at once with ``error`` as its ``last_error``."""
        self._mark = Outcome(Kind.FAIL, self._run.name, "dead", _text("error", error))

    def retry(self, error: str = "retry") -> None:
        """Fail this attempt: the job is retried on its backoff, dead at its budget."""
        self._mark = _retry(self._run, _text("error", error))

    def snooze(self, delay_s: float = 0.0) -> None:
        """Put this job back to pending for ``delay_s`` seconds, the attempt not spent."""
        delay_s = check_non_negative("delay_s", delay_s)
        self._mark = Outcome(Kind.SNOOZE, self._run.name, "snoozed", seconds=delay_s)

    def succeed(self) -> None:
        """Mark this job done even if the handler then raises."""
        self._mark = Outcome(Kind.ACK, self._run.name, "success")

    def __repr__(self) -> str:
        return f"<BatchItem job={self.id} args={self.args!r}>"


def _text(name: str, value: object) -> str:
    if type(value) is not str:
        raise InvalidArgumentError(f"{name} must be a str, got {value!r}")
    return value


def _retry(run: Run, error: str) -> Outcome:
    job = run.job
    label = "dead" if job.attempts >= job.max_attempts else "retry"
    return Outcome(Kind.RETRY, run.name, label, error)


class _Batch:
    """Items gathered for one run of a batch handler."""

    __slots__ = ("done", "items", "runner", "timer")

    def __init__(self, done: asyncio.Future[None]) -> None:
        self.items: list[BatchItem] = []
        self.done = done  # every item's Run.task: resolved when the handler ended
        self.timer: asyncio.TimerHandle | None = None
        self.runner: asyncio.Task[None] | None = None

    def stopped(self, done: asyncio.Future[None]) -> None:
        """``done`` was cancelled (the worker's stop past its grace): stop the handler."""
        if done.cancelled() and self.runner is not None:
            self.runner.cancel()


class Batches:
    """Gathers the jobs of batch tasks and runs their handlers (one worker's)."""

    def __init__(
        self, app: WorkerApp, in_thread: Callable[[Callable[[], Any]], Awaitable[Any]]
    ) -> None:
        self.app = app
        self.in_thread = in_thread  # the executor's: a sync handler runs in its pool
        self._filling: dict[str, _Batch] = {}  # task name -> the batch being gathered
        self._running: set[_Batch] = set()
        # the worker's (the producer sets them): a batch's items and their outcomes
        # once its handler ended (``None``: cut off by the stop, the drain gives them
        # back), and an item that stopped being ours meanwhile
        self.on_done: Callable[[list[BatchItem], list[Outcome] | None], None] | None = None
        self.on_revoked: Callable[[Run], None] | None = None

    def call_of(self, run: Run) -> tuple[Task[Any, Any], dict[str, Any]] | None:
        """The batch task ``run``'s job calls and its arguments, or ``None`` (an
        ordinary job: the executor decodes it)."""
        try:
            name, arguments, _ = decode_envelope(run.job.payload)  # per claimed job
        except BadCall:
            return None
        task = self.app.find_task(name)
        if task is None or task.batch_size is None:
            return None
        return task, arguments

    def add(
        self, run: Run, task: Task[Any, Any], arguments: dict[str, Any]
    ) -> asyncio.Future[None]:
        """Gather ``run`` into its task's batch; the batch's ``done`` future."""
        run.name = task.name
        batch = self._filling.get(task.name)
        if batch is None:
            loop = asyncio.get_running_loop()
            batch = self._filling[task.name] = _Batch(loop.create_future())
            batch.done.add_done_callback(batch.stopped)
            batch.timer = loop.call_later(task.batch_wait_s, self._start, task)
        items = batch.items
        items.append(BatchItem(run, arguments))
        if len(items) >= task.batch_size:  # type: ignore[operator]  # a batch task's
            self._start(task)
        return batch.done

    def revoked(self, run: Run) -> None:
        """``run``'s job stopped being ours (cancelled, lost): hand it over now (its
        handler sees ``item.cancelled``; the batch is not interrupted)."""
        if self.on_revoked is not None:
            self.on_revoked(run)

    def flush(self) -> None:
        """Start every batch being gathered now (the worker stops)."""
        for name in list(self._filling):
            task = self.app.find_task(name)
            if task is not None:
                self._start(task)

    def _start(self, task: Task[Any, Any]) -> None:
        batch = self._filling.pop(task.name, None)
        if batch is None:
            return
        if batch.timer is not None:
            batch.timer.cancel()
        if batch.done.done():  # cancelled while gathering: the drain gives them back
            self._hand_over(batch.items, None)
            return
        self._running.add(batch)
        batch.runner = asyncio.get_running_loop().create_task(self._run(task, batch))
        batch.runner.add_done_callback(lambda _: self._running.discard(batch))

    async def _run(self, task: Task[Any, Any], batch: _Batch) -> None:
        items = [item for item in batch.items if item._run.state is RUNNING]
        failure: Outcome | None = None
        try:
            if items:
                if task.timeout_s is None:
                    await self._call(task, items)
                else:
                    async with asyncio.timeout(task.timeout_s):
                        await self._call(task, items)
        except Fail as e:
            failure = Outcome(Kind.FAIL, task.name, "dead", str(e) or "Fail")
        except Snooze as e:
            failure = Outcome(Kind.SNOOZE, task.name, "snoozed", seconds=e.delay_s)
        except asyncio.CancelledError as e:
            if batch.done.cancelled():  # the stop past its grace: the drain gives them back
                self._hand_over(batch.items, None)
                raise
            failure = Outcome(Kind.RETRY, task.name, "retry", error_text(e))  # its own
        except BaseException as e:  # an outcome for every item, always
            if task.fail_on and isinstance(e, task.fail_on):
                failure = Outcome(Kind.FAIL, task.name, "dead", error_text(e))
            else:
                failure = Outcome(Kind.RETRY, task.name, "retry", error_text(e))
        self._finish(task, batch, failure)

    def _finish(self, task: Task[Any, Any], batch: _Batch, failure: Outcome | None) -> None:
        """Every item's outcome (its mark, else the batch's), handed over at once."""
        unmarked = Outcome(Kind.ACK, task.name, "success") if failure is None else failure
        outcomes: list[Outcome] = []
        for item in batch.items:
            outcome = item._mark
            if outcome is None:
                outcome = unmarked
                if outcome.kind is Kind.RETRY:  # each item's own budget
                    outcome = _retry(item._run, outcome.error or "")
            outcomes.append(outcome)
        if not batch.done.done():
            batch.done.set_result(None)
        self._hand_over(batch.items, outcomes)

    def _hand_over(self, items: list[BatchItem], outcomes: list[Outcome] | None) -> None:
        if self.on_done is not None:
            self.on_done(items, outcomes)

    async def _call(self, task: Task[Any, Any], items: list[BatchItem]) -> None:
        token = _in_batch.set(task.name)
        try:
            if task.is_async:
                await task.fn(items)
                return
            await self.in_thread(functools.partial(contextvars.copy_context().run, task.fn, items))
        finally:
            _in_batch.reset(token)
