"""The executor: runs one claimed job's handler and returns one :class:`Outcome`.

It decodes the task call, finds the task (an unknown one is given back, see
``unknown.py``), binds the arguments, runs the handler (an async one as is, a
sync one in a pool of ``concurrency`` threads) under its ``timeout_s``, with
:func:`~alkstore.worker.current_job` set and in a ``process`` span when tracing
records, and turns what happened into an ``Outcome``. It writes nothing: the
completer writes outcomes. It also stops a handler whose job is no longer this
worker's (:meth:`Executor.revoke`: cancelled, or its claim lost).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from alkstore.core.options import describe
from alkstore.core.results import encode_result
from alkstore.errors import PayloadError
from alkstore.job_hooks import JobHooks
from alkstore.tasks import BadCall, Fail, Snooze, Task, decode_envelope
from alkstore.tracing import process_span
from alkstore.worker.batches import Batches
from alkstore.worker.context import RunningJob, reset_current, set_current
from alkstore.worker.outcome import Kind, Outcome, error_text
from alkstore.worker.runs import CANCELLED, DONE, LIVE, LOST, RUNNING, Run, StopFlag, task_name
from alkstore.worker.unknown import UNKNOWN_DELAY_S, UnknownTasks

if TYPE_CHECKING:
    from alkstore.worker.protocols import WorkerApp

__all__ = ["Executor"]

_NO_SPAN = contextlib.nullcontext()


class Executor:
    """Runs handlers of one worker's app; no I/O of its own beyond the handlers."""

    def __init__(
        self, app: WorkerApp, concurrency: int, stop: StopFlag, unknown: UnknownTasks
    ) -> None:
        self.app = app
        self.concurrency = concurrency
        self.stop = stop
        self.unknown = unknown
        self.traced = False  # whether handlers run in spans (the producer asks per batch)
        self._pool: ThreadPoolExecutor | None = None
        # sync handlers' calls still running in a thread (done ones drop out)
        self._threads: set[concurrent.futures.Future[Any]] = set()
        self._successes: dict[str, Outcome] = {}  # task name -> its (immutable) success
        self.hooks: JobHooks = getattr(app, "hooks", None) or JobHooks()
        self._loop: asyncio.AbstractEventLoop | None = None  # the worker's, once running
        # the gatherer of batch tasks' jobs, if the app has any (``batches.py``)
        self.batches: Batches | None = None
        if any(task.batch_size is not None for task in app.tasks.values()):
            self.batches = Batches(app, self.in_thread)

    async def in_thread(self, call: Callable[[], Any]) -> Any:
        """``call()`` in the pool of handler threads (made on first use), tracked as a
        running sync handler until it returns."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="alkstore-task")
        thread = self._pool.submit(call)
        self._threads.add(thread)
        thread.add_done_callback(self._threads.discard)
        return await asyncio.wrap_future(thread)

    def execute(self, run: Run) -> Coroutine[Any, Any, Outcome]:
        """Run the handler of ``run`` (state ``RUNNING``); its outcome. The run is
        ``DONE`` on return unless it was revoked meanwhile. A ``CancelledError`` that
        is the worker's stop (not a revoke) is raised: the stop gives the job back.
        Without failure hooks this is the handler's own coroutine (one less a job)."""
        if not self.hooks.failure:  # the plain path: nothing to hand a failure to
            return self._execute(run, None)
        return self._execute_hooked(run)

    async def _execute_hooked(self, run: Run) -> Outcome:
        failed: list[BaseException] = []
        outcome = await self._execute(run, failed)
        if failed and outcome.kind in _FAILED:
            await self.hooks.failed(run.job, failed[0])
        return outcome

    async def _execute(self, run: Run, failed: list[BaseException] | None) -> Outcome:
        """The handler's run; each exception that made a failed outcome is appended
        to ``failed`` if given (the failure hooks')."""
        run.began = True  # from now on a revoke may cancel the task running this
        job = run.job
        name = "?"
        trace = None
        try:
            name, arguments, trace = decode_envelope(job.payload)
            task = self.app.find_task(name)
            if task is None:  # e.g. a rolling deploy: a newer worker may know it
                return self._unknown_task(run, describe(name))
        except BadCall:  # not a task call (e.g. a newer envelope): the same policy
            return self._unknown_task(run, "? (the payload is not a task call)")
        try:
            args, kwargs = task.call_arguments(arguments)
        except BadCall as e:
            if run.state is RUNNING:
                run.state = DONE
            return Outcome(Kind.FAIL, name, "dead", str(e))
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        job._bind(run.handle, loop)  # progress, steps, waits (#24)
        token = set_current(job)
        stopping = False
        timeout: asyncio.Timeout | None = None
        value: Any = None
        try:
            if (
                task.is_async
                and task.timeout_s is None
                and not self.traced
                and not self.hooks.around
            ):
                value = await task.fn(*args, **kwargs)  # the plain path: nothing around it
            else:
                span = (
                    process_span(job.queue, job.id, job.attempts, name, trace)
                    if self.traced
                    else _NO_SPAN
                )
                with span:
                    if task.timeout_s is None:
                        value = await self._call(task, job, args, kwargs)
                    else:
                        async with asyncio.timeout(task.timeout_s) as timeout:
                            value = await self._call(task, job, args, kwargs)
        except Fail as e:
            if failed is not None:
                failed.append(e)
            return Outcome(Kind.FAIL, name, "dead", str(e) or "Fail")
        except Snooze as e:  # a Park (sleep, wait_for) names the signal that wakes it
            signal = getattr(e, "signal", None)
            return Outcome(Kind.SNOOZE, name, "snoozed", seconds=e.delay_s, value=signal)
        except TimeoutError as e:
            if failed is not None:
                failed.append(e)
            if timeout is not None and timeout.expired():
                return _retry(
                    run, name, f"timeout: the handler ran longer than {task.timeout_s:g}s"
                )
            return _retry(run, name, error_text(e))
        except asyncio.CancelledError as e:
            current = asyncio.current_task()
            if run.state is not RUNNING and not self.stop.requested:
                if current is not None:
                    current.uncancel()  # our own cancel: the job is no longer ours
                return Outcome(Kind.REVOKED, name, run.state.value)
            if current is not None and current.cancelling():
                stopping = True
                raise  # the worker is stopping: its drain gives the job back
            if failed is not None:
                failed.append(e)
            return _retry(run, name, error_text(e))  # a CancelledError of the handler's own
        except BaseException as e:  # an outcome for every job, always
            if failed is not None:
                failed.append(e)
            if task.fail_on and isinstance(e, task.fail_on):
                return Outcome(Kind.FAIL, name, "dead", error_text(e))
            return _retry(run, name, error_text(e))
        else:
            keep = task.keep_result_s
            if keep is None:  # one shared Outcome per task: no allocation per success
                success = self._successes.get(name)
                if success is None:
                    success = self._successes[name] = Outcome(Kind.ACK, name, "success")
                return success
            try:
                encode_result(value)
            except PayloadError as e:  # never silently dropped: a failed attempt
                return _retry(run, name, f"PayloadError: task {name!r}: {e}")
            return Outcome(Kind.ACK_RESULT, name, "success", value=value, seconds=keep)
        finally:
            reset_current(token)
            job._end()
            if run.state is RUNNING and not stopping:
                run.state = DONE

    def _unknown_task(self, run: Run, name: str) -> Outcome:
        """Give the job back unrun (attempt uncounted), or dead-letter it once this
        worker has given it back for ``unknown_task_max_age_s`` (``unknown.py``)."""
        if run.state is RUNNING:
            run.state = DONE
        job = run.job
        known = ", ".join(sorted(self.app.tasks)) or "none"
        if self.unknown.give_back(job.id, name, job.queue, known):
            return Outcome(Kind.GIVE_BACK, name, "unknown", seconds=UNKNOWN_DELAY_S)
        return Outcome(Kind.FAIL, name, "dead", self.unknown.error(name))

    async def _call(
        self, task: Task[Any, Any], job: RunningJob, args: list[Any], kwargs: dict[str, Any]
    ) -> Any:
        hooks = self.hooks
        if task.is_async:
            if hooks.around:
                return await hooks.call_async(job, functools.partial(task.fn, **kwargs), *args)
            return await task.fn(*args, **kwargs)
        if hooks.around:  # in the handler's thread, around it
            fn = functools.partial(task.fn, **kwargs)
            loop = asyncio.get_running_loop()
            call = functools.partial(
                contextvars.copy_context().run, hooks.call_sync, loop, job, fn, *args
            )
        else:
            call = functools.partial(contextvars.copy_context().run, task.fn, *args, **kwargs)
        result = await self.in_thread(call)
        if asyncio.iscoroutine(result):  # a sync wrapper that returned a coroutine
            return await result
        return result

    def revoke(self, run: Run, why: str) -> None:
        """Stop the handler of a job that is no longer ours (``why``: ``"cancelled"``,
        or ``"lost"``: the claim lapsed or was taken)."""
        if run.state not in LIVE:
            return
        run.state = CANCELLED if why == "cancelled" else LOST
        run.job._revoke()  # a sync handler sees current_job().cancelled
        if run.batched:  # the batch runs on; the item is handed over now
            if self.batches is not None:
                self.batches.revoked(run)
            return
        task = run.task  # None while buffered: the producer drops it
        # a task that has not begun is not cancelled (it would end without running
        # its own cleanup): once begun it sees the revoke and runs nothing
        if task is not None and run.began and self._is_async(run):
            task.cancel()  # an async handler gets CancelledError

    def _is_async(self, run: Run) -> bool:
        task = self.app.find_task(task_name(run))
        return task is not None and task.is_async

    @property
    def abandoned_threads(self) -> int:
        """Sync handlers still running in a thread."""
        return sum(1 for thread in list(self._threads) if not thread.done())

    def shutdown(self) -> None:
        """Drop the thread pool without waiting for its threads."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


_FAILED = (Kind.RETRY, Kind.FAIL)


def _retry(run: Run, name: str, error: str) -> Outcome:
    job = run.job
    return Outcome(Kind.RETRY, name, "dead" if job.attempts >= job.max_attempts else "retry", error)
