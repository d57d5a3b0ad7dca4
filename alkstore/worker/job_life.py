"""The handler side of a job's life (#24): coalesced fenced progress, durable
steps, durable sleep and signal waits, one :class:`JobLife` per run, reached
through ``current_job()`` (``context.RunningJob``); and the park that gives a
waiting job back (``park``), used by the completer.

Sleeps and waits are built on snooze: the handler raises :class:`Park` (a
``Snooze``), the worker gives the job back with its attempt uncounted, and the
next attempt replays the stored steps to where it left off (docs/durable.md).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from alkstore.core.life import StepKeys, check_progress, check_step_name, wait_key
from alkstore.core.options import check_non_negative, check_positive
from alkstore.core.payload import check_size
from alkstore.core.results import encode_result
from alkstore.engine_door import engine_of
from alkstore.errors import AlkstoreError, InvalidArgumentError, JobLostError, SignalTimeoutError
from alkstore.tasks import Snooze

if TYPE_CHECKING:
    from alkstore.engine import Engine
    from alkstore.job_handle import JobHandle

__all__ = ["PROGRESS_INTERVAL_S", "JobLife", "Park", "park"]

log = logging.getLogger("alkstore.worker")

T = TypeVar("T")

PROGRESS_INTERVAL_S = 0.25  # at most one progress write per job this often
FOREVER_S = 10 * 365 * 86400.0  # a wait without a timeout: parked for ten years


class Park(Snooze):
    """Raised by ``sleep`` and ``wait_for``: give the job back for ``delay_s`` (its
    attempt uncounted); for a wait, ``signal`` names what wakes it sooner."""

    def __init__(self, delay_s: float, signal: str | None = None) -> None:
        super().__init__(delay_s)
        self.signal = signal


async def park(handle: JobHandle, delay_s: float, signal: str) -> bool:
    """Give a job waiting for ``signal`` back; then, if the signal came meanwhile,
    make it due now (see ``life_poke``: the signal's own poke covers the rest)."""
    done = await handle.snooze(delay_s)
    if done:
        queue = handle._queue
        await engine_of(queue._store).poke_parked(queue.name, handle.job.id, signal)
    return done


class JobLife:
    """One run's progress, steps, sleeps and waits (created on first use)."""

    def __init__(self, handle: JobHandle, loop: asyncio.AbstractEventLoop) -> None:
        queue = handle._queue
        self._engine: Engine = engine_of(queue._store)
        self._limit: int | None = queue._store.max_payload_bytes
        self._queue = queue.name
        self._id = handle.job.id
        self._attempts = handle.job.attempts
        self._loop = loop
        self._keys = StepKeys()
        self._done: dict[str, str] | None = None  # the stored steps, read once per run
        self._loading: asyncio.Future[dict[str, str]] | None = None
        # progress: the latest value, whether a write is scheduled, the last write
        self._latest: tuple[float, str | None] = (0.0, None)
        self._scheduled = False
        self._last = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._writing: asyncio.Task[None] | None = None
        self._closed = False

    # -- progress -----------------------------------------------------------------------
    def progress(self, value: float, message: str | None = None) -> None:
        self._latest = check_progress(value, message)
        if self._scheduled or self._closed:
            return  # the scheduled write takes the latest value
        self._scheduled = True
        if self._in_loop():
            self._schedule()
            return
        try:
            self._loop.call_soon_threadsafe(self._schedule)
        except RuntimeError:  # the worker is gone (a sync handler left running): drop it
            self._closed = True

    def _schedule(self) -> None:
        delay = max(self._last + PROGRESS_INTERVAL_S - time.monotonic(), 0.0)
        self._timer = self._loop.call_later(delay, self._write_now)

    def _write_now(self) -> None:
        self._timer = None
        if self._writing is not None:  # the last write is slow: try again a bit later
            self._timer = self._loop.call_later(PROGRESS_INTERVAL_S, self._write_now)
            return
        self._scheduled = False
        self._last = time.monotonic()
        self._writing = self._loop.create_task(self._write(*self._latest))

    async def _write(self, value: float, message: str | None) -> None:
        try:
            await self._engine.put_progress(self._queue, self._id, self._attempts, value, message)
        except AlkstoreError as e:  # progress is best-effort: the job goes on
            log.debug("job %d: progress not written: %s", self._id, e)
        finally:
            self._writing = None

    def close(self) -> None:
        """The run ended: a progress write still waiting for its turn goes out now,
        after the one in flight (best-effort: it races the outcome, and once the
        outcome is written the fence refuses it)."""
        self._closed = True
        if self._timer is None:
            return
        self._timer.cancel()
        self._timer = None
        before, latest = self._writing, self._latest

        async def flush() -> None:
            if before is not None:
                await asyncio.gather(before, return_exceptions=True)
            await self._write(*latest)

        self._writing = self._loop.create_task(flush())

    # -- steps --------------------------------------------------------------------------
    async def _stored(self) -> dict[str, str]:
        if self._done is None:
            if self._loading is None:
                self._loading = asyncio.ensure_future(self._engine.steps(self._queue, self._id))
            self._done = await asyncio.shield(self._loading)
        return self._done

    def _encode(self, key: str, value: object) -> str:
        text = encode_result(value)
        check_size(f"step {key!r} result", len(text.encode()), self._limit)
        return text

    async def _put(self, key: str, text: str) -> Any:
        if not await self._engine.put_step(self._queue, self._id, self._attempts, key, text):
            raise JobLostError(
                f"job {self._id}: step {key!r} was not stored: the claim is no longer "
                "this worker's (lapsed, reclaimed or cancelled)"
            )
        done = await self._stored()
        done[key] = text
        return json.loads(text)

    async def step(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        key = self._keys.next(check_step_name(name))
        if not callable(fn):
            raise InvalidArgumentError(f"step {name!r}: fn must be callable, got {fn!r}")
        done = await self._stored()
        if key in done:
            return json.loads(done[key])
        value = fn(*args, **kwargs)
        if inspect.isawaitable(value):
            value = await value
        return await self._put(key, self._encode(key, value))

    def step_sync(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        key = self._keys.next(check_step_name(name))
        if not callable(fn):
            raise InvalidArgumentError(f"step {name!r}: fn must be callable, got {fn!r}")
        done = self._run(self._stored())
        if key in done:
            return json.loads(done[key])
        value = fn(*args, **kwargs)
        if inspect.isawaitable(value):
            raise InvalidArgumentError(f"step {name!r}: use 'await step(...)' for async functions")
        return self._run(self._put(key, self._encode(key, value)))

    # -- sleep and signals --------------------------------------------------------------
    async def sleep(self, seconds: float) -> None:
        seconds = check_non_negative("seconds", seconds)
        key = self._keys.next("@sleep")
        done = await self._stored()
        if key in done:
            left = json.loads(done[key])["until"] - time.time()
            if left <= 0:
                return
            raise Park(left)
        if seconds == 0:
            return
        await self._put(key, self._encode(key, {"until": time.time() + seconds}))
        raise Park(seconds)

    def sleep_sync(self, seconds: float) -> None:
        self._run(self.sleep(seconds))

    async def wait_for(self, name: str, timeout_s: float | None = None) -> Any:
        name = check_step_name(name, "signal name")
        if timeout_s is not None:
            timeout_s = check_positive("timeout_s", timeout_s)
        payload = await self._engine.get_signal(self._queue, self._id, name)
        if payload is not None:
            return json.loads(payload)
        key = wait_key(name)
        done = await self._stored()
        now = time.time()
        if key in done:
            until = json.loads(done[key])["until"]
        else:
            until = None if timeout_s is None else now + timeout_s
            await self._put(key, self._encode(key, {"until": until}))
        if until is not None and now >= until:
            raise SignalTimeoutError(f"job {self._id}: signal {name!r} did not come in time")
        raise Park(FOREVER_S if until is None else until - now, name)

    def wait_for_sync(self, name: str, timeout_s: float | None = None) -> Any:
        return self._run(self.wait_for(name, timeout_s))

    # -- plumbing -----------------------------------------------------------------------
    def _in_loop(self) -> bool:
        try:
            return asyncio.get_running_loop() is self._loop
        except RuntimeError:
            return False

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the worker's loop from a sync handler's thread."""
        if self._in_loop():
            coro.close()
            raise InvalidArgumentError(
                "a blocking step, sleep or wait was called on the worker's event loop: "
                "in an async handler, await step(), sleep() or wait_for()"
            )
        try:
            future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        except RuntimeError:  # the worker's loop is closed: this run was given up
            coro.close()
            raise JobLostError(f"job {self._id}: the worker stopped; nothing was stored") from None
        return future.result()
