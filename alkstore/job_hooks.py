"""Job hooks: code an App runs around every job (per-job database sessions,
Sentry, timing), registered with ``@app.before_job``, ``@app.after_job`` and
``@app.on_failure``; each may be a plain or an ``async`` function.

Where they run: ``before_job(job)`` and ``after_job(job, error)`` run where the
handler runs, so a thread-local session opened before the job is the one the
handler sees: for a sync task in the handler's thread, for an async task on
the worker's event loop (an ``async`` hook of a sync task is run on the loop
and waited for). Before hooks run in registration order, after hooks in
reverse (like nested ``with`` blocks); every after hook runs, whatever the
handler did (``error``: what it raised, else ``None``).
``on_failure(job, error)`` runs on the event loop once an attempt failed (it
will be retried, or it is dead: ``job.attempts >= job.max_attempts`` or a
``Fail``), after the after hooks, before the outcome is written.

Errors in hooks are reported as what they are: a before hook that raises fails
the attempt (the handler does not run; the job's error names the hook); an
after or failure hook that raises is logged with its traceback and the job's
outcome stands, as the handler decided it.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from alkstore.errors import InvalidArgumentError

if TYPE_CHECKING:
    from alkstore.worker.context import RunningJob

__all__ = ["HookError", "JobHooks"]

log = logging.getLogger("alkstore.worker")

H = TypeVar("H", bound=Callable[..., Any])


class HookError(Exception):
    """A ``before_job`` hook raised: the attempt fails, the handler never ran."""


def _name(hook: Callable[..., Any]) -> str:
    module = getattr(hook, "__module__", None)
    qualname = getattr(hook, "__qualname__", None) or repr(hook)
    return f"{module}.{qualname}" if module else qualname


def _error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


class JobHooks:
    """The hooks of one App (empty: the worker's job path does not look at them)."""

    def __init__(self) -> None:
        self.before: list[Callable[..., Any]] = []
        self.after: list[Callable[..., Any]] = []
        self.failure: list[Callable[..., Any]] = []

    @property
    def around(self) -> bool:
        """Whether any hook runs around the handler."""
        return bool(self.before or self.after)

    @staticmethod
    def _add(kind: str, into: list[Callable[..., Any]], hook: H) -> H:
        if not callable(hook):
            raise InvalidArgumentError(f"a {kind} hook must be callable, got {hook!r}")
        into.append(hook)
        return hook

    def add_before(self, hook: H) -> H:
        return self._add("before_job", self.before, hook)

    def add_after(self, hook: H) -> H:
        return self._add("after_job", self.after, hook)

    def add_failure(self, hook: H) -> H:
        return self._add("on_failure", self.failure, hook)

    # -- an async handler: everything on the loop ------------------------------------
    async def call_async(self, job: RunningJob, fn: Callable[..., Any], *args: Any) -> Any:
        """Run the before hooks, ``fn(*args)`` (awaited) and the after hooks."""
        error: BaseException | None = None
        try:
            for hook in self.before:
                try:
                    result = hook(job)
                    if inspect.isawaitable(result):
                        await result
                except Exception as e:
                    raise HookError(f"before_job hook {_name(hook)} raised {_error_text(e)}") from e
            return await fn(*args)
        except BaseException as e:
            error = e
            raise
        finally:
            for hook in reversed(self.after):
                try:
                    result = hook(job, error)
                    if inspect.isawaitable(result):
                        await result
                except Exception:
                    _report("after_job", hook, job)

    # -- a sync handler: in its thread -------------------------------------------------
    def call_sync(
        self, loop: asyncio.AbstractEventLoop, job: RunningJob, fn: Callable[..., Any], *args: Any
    ) -> Any:
        """In the handler's thread: the before hooks, ``fn(*args)``, the after hooks."""
        error: BaseException | None = None
        try:
            for hook in self.before:
                try:
                    _in_thread(loop, hook(job))
                except Exception as e:
                    raise HookError(f"before_job hook {_name(hook)} raised {_error_text(e)}") from e
            return fn(*args)
        except BaseException as e:
            error = e
            raise
        finally:
            for hook in reversed(self.after):
                try:
                    _in_thread(loop, hook(job, error))
                except Exception:
                    _report("after_job", hook, job)

    async def failed(self, job: RunningJob, error: BaseException) -> None:
        """Run the ``on_failure`` hooks for a failed attempt (errors logged)."""
        for hook in self.failure:
            try:
                result = hook(job, error)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                _report("on_failure", hook, job)


def _in_thread(loop: asyncio.AbstractEventLoop, result: Any) -> None:
    """Wait, from a handler's thread, for an async hook's coroutine run on the loop."""
    if inspect.iscoroutine(result):
        asyncio.run_coroutine_threadsafe(result, loop).result()


def _report(kind: str, hook: Callable[..., Any], job: RunningJob) -> None:
    log.error(
        "%s hook %s raised for job %s (%s); the job's outcome stands",
        kind,
        _name(hook),
        job.id,
        job.queue,
        exc_info=True,
    )
