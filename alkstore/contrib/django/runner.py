"""The worker's side: an alkstore App that runs Django tasks, sending Django's signals.

The worker finds a job's task by the module path in its payload
(:meth:`DjangoApp.find_task`), so no task needs registering: any Django task
whose backend is an :class:`~alkstore.contrib.django.AlkstoreBackend` runs.
Each attempt sends ``task_started`` before the function and ``task_finished``
after it, with the status ``get_result`` will then report: SUCCESSFUL, FAILED
(no attempt left, or ``alkstore.Fail``), or READY (it will be retried).
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from inspect import iscoroutinefunction
from typing import Any

from django.db import close_old_connections

from alkstore.app import App
from alkstore.core.options import QueueOpts
from alkstore.core.results import encode_result
from alkstore.tasks import Fail
from alkstore.tasks import Task as AlkTask
from alkstore.worker.context import current_job

from .calls import find_django_task, kept_value
from .compat import (
    Task,
    TaskContext,
    TaskError,
    TaskResult,
    TaskResultStatus,
    task_finished,
    task_started,
)
from .results import snapshot

__all__ = ["DjangoApp", "RunsOnAlkstore", "app_for"]

log = logging.getLogger("alkstore.contrib.django")


class _Attempt:
    """One run of a Django task inside the worker: its live TaskResult and signals."""

    def __init__(self, task: Task[Any, Any], args: list[Any], kwargs: dict[str, Any]) -> None:
        job = current_job()
        assert job is not None, "a Django task run outside the alkstore worker"
        self.job = job
        self.task, self.args, self.kwargs = task, args, kwargs
        self.started = time.time()
        self.sender = type(task.get_backend())
        self.result = snapshot(
            task,
            str(job.id),
            TaskResultStatus.RUNNING,
            args=args,
            kwargs=kwargs,
            errors=[job.last_error] if job.last_error else [],
            worker_id=job.worker_id,
            attempts=job.attempts,
            enqueued_at=job.created_at,
            started_at=datetime.fromtimestamp(self.started, UTC),
        )

    def call_args(self) -> list[Any]:
        if self.task.takes_context:
            return [TaskContext(task_result=self.result), *self.args]
        return self.args

    def _set(self, **fields: Any) -> TaskResult[Any]:
        for name, value in fields.items():
            object.__setattr__(self.result, name, value)
        return self.result

    def begin(self) -> None:
        task_started.send(sender=self.sender, task_result=self.result)

    def failed(self, exc: Exception) -> None:
        job = self.job
        final = isinstance(exc, Fail) or job.attempts >= job.max_attempts
        error = TaskError(
            exception_class_path=f"{type(exc).__module__}.{type(exc).__qualname__}",
            traceback="".join(traceback.format_exception(exc)),
        )
        self.result.errors.append(error)
        self._set(
            status=TaskResultStatus.FAILED if final else TaskResultStatus.READY,
            finished_at=datetime.now(UTC) if final else None,
        )
        task_finished.send(sender=self.sender, task_result=self.result)

    def succeeded(self, value: Any) -> dict[str, Any]:
        stamps = {
            "priority": self.job.priority,
            "enqueued_at": self.job.created_at.timestamp(),
            "started_at": self.started,
            "worker_id": self.job.worker_id,
            "errors": [self.job.last_error] if self.job.last_error else [],
        }
        kept = kept_value(self.task, self.args, self.kwargs, stamps, value)
        encode_result(kept)  # not JSON: a failed attempt (PayloadError), signalled as such
        self._set(
            status=TaskResultStatus.SUCCESSFUL,
            finished_at=datetime.now(UTC),
            _return_value=value,
        )
        task_finished.send(sender=self.sender, task_result=self.result)
        return kept


def _runner(task: Task[Any, Any]) -> Callable[..., Any]:
    """The function the alkstore worker calls for ``task``: async for an async task
    (run on the worker's loop), else sync (run in the worker's threads, with Django's
    per-request connection hygiene around it)."""
    func = task.func

    if iscoroutinefunction(func):

        async def run_async(args: list[Any], kwargs: dict[str, Any]) -> Any:
            attempt = _Attempt(task, args, kwargs)
            attempt.begin()
            try:
                value = await func(*attempt.call_args(), **kwargs)
                return attempt.succeeded(value)
            except Exception as e:
                attempt.failed(e)
                raise

        return run_async

    def run(args: list[Any], kwargs: dict[str, Any]) -> Any:
        close_old_connections()
        try:
            attempt = _Attempt(task, args, kwargs)
            attempt.begin()
            try:
                value = func(*attempt.call_args(), **kwargs)
                return attempt.succeeded(value)
            except Exception as e:
                attempt.failed(e)
                raise
        finally:
            close_old_connections()

    return run


class RunsOnAlkstore:
    """What the runner reads of an alkstore task backend (``backend.AlkstoreBackend``
    is one): the base it names, so this module does not import the backend."""

    queue_opts: QueueOpts
    timeout_s: float | None
    keep_result_s: float


class DjangoApp(App):
    """An App whose tasks are the Django tasks of the alkstore backends, found by name."""

    def find_task(self, name: str) -> AlkTask[Any, Any] | None:
        found = self.tasks.get(name)
        if found is not None:
            return found
        try:
            task = find_django_task(name)
        except Exception:  # its module failed to import: retried, like an unknown task
            log.exception("job names %r, whose module failed to import", name)
            return None
        if task is None:
            log.warning("job names %r, which is not an importable Django task", name)
            return None
        backend = task.get_backend()
        if not isinstance(backend, RunsOnAlkstore):
            log.warning("Django task %r runs on backend %r, not alkstore's", name, task.backend)
            return None
        found = _wrap(self, task, backend)
        self.tasks[name] = found
        return found


def _wrap(app: App, task: Task[Any, Any], backend: RunsOnAlkstore) -> AlkTask[Any, Any]:
    return AlkTask(
        app,
        _runner(task),
        name=task.module_path,
        queue=task.queue_name,
        opts=backend.queue_opts,
        timeout_s=backend.timeout_s,
        fail_on=(),
        keep_result_s=backend.keep_result_s,
    )


_apps: dict[tuple[str, str], DjangoApp] = {}
_apps_lock = threading.Lock()


def app_for(url: str, schema: str) -> DjangoApp:
    """The one app (and so one store per process) of a store location."""
    with _apps_lock:
        app = _apps.get((url, schema))
        if app is None:
            app = _apps[(url, schema)] = DjangoApp(url, schema=schema)
        return app
