"""``AlkstoreBackend``: Django's tasks framework on an alkstore store.

>>> TASKS = {
...     "default": {
...         "BACKEND": "alkstore.contrib.django.AlkstoreBackend",
...         "QUEUES": ["default", "emails"],
...         "OPTIONS": {"URL": "postgresql://app@db/app", "SCHEMA": "jobs"},
...     }
... }

On PostgreSQL, when the store lives in Django's own database, a job is written
on Django's connection inside the current ``atomic()`` block (the outbox): it
commits or rolls back with the view's rows, and the queue's consumers are
woken (and ``task_enqueued`` sent) after the commit. Anywhere else the store is
a separate database, so an enqueue inside ``atomic()`` is refused unless
``OPTIONS["IN_ATOMIC"]`` is ``"independent"`` (docs/django.md).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from functools import partial
from typing import Any

from django.db import connections, transaction
from django.utils import timezone

from alkstore.core.names import check_name, check_schema
from alkstore.core.options import EnqueueOpts, QueueOpts, check_positive, describe
from alkstore.core.urls import redact_url
from alkstore.errors import AlkstoreError, InvalidArgumentError, InvalidNameError
from alkstore.sync import Store as SyncStore

from . import results
from .calls import call_payload
from .compat import (
    TASK_MAX_PRIORITY,
    TASK_MIN_PRIORITY,
    BaseTaskBackend,
    InvalidTaskError,
    Task,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_enqueued,
)
from .runner import DjangoApp, RunsOnAlkstore, app_for

__all__ = ["AlkstoreBackend", "InvalidTask"]

_OPTIONS = {
    "URL",
    "SCHEMA",
    "DATABASE",
    "IN_ATOMIC",
    "MAX_ATTEMPTS",
    "RETRY_BASE_S",
    "VISIBILITY_TIMEOUT_S",
    "TIMEOUT_S",
    "KEEP_RESULT_S",
}
KEEP_RESULT_S = 7 * 86400.0

log = logging.getLogger("alkstore.contrib.django")

# (url, schema, Django database alias, its NAME) whose databases were compared
_same_database: dict[tuple[str, str, str, str], bool] = {}
_same_lock = threading.Lock()


class InvalidTask(InvalidTaskError, InvalidArgumentError):
    """A task this backend cannot enqueue (bad priority, queue, run_after or store
    setup): both Django's ``InvalidTask`` and alkstore's ``InvalidArgumentError``."""


class AlkstoreBackend(BaseTaskBackend, RunsOnAlkstore):
    """A ``django.tasks`` backend whose jobs live in an alkstore store; run them with
    ``manage.py alkstore_worker``."""

    supports_defer = True  # run_after is the job's run_at
    supports_async_task = True  # coroutines run on the worker's event loop
    supports_get_result = True  # from any process: results are kept in the store
    supports_priority = True  # Django's -100..100 is alkstore's priority, unchanged

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        options: Mapping[str, Any] = self.options
        where = f"TASKS[{alias!r}]"
        unknown = sorted(set(options) - _OPTIONS)
        if unknown:
            raise InvalidArgumentError(
                f"{where}['OPTIONS'] has unknown key(s) {unknown}; known: {sorted(_OPTIONS)}"
            )
        url = options.get("URL")
        if type(url) is not str or not url:
            raise InvalidArgumentError(
                f"{where}['OPTIONS']['URL'] must name the alkstore store "
                f"(sqlite:///… or postgresql://…), got {describe(url)}"
            )
        self.url = url
        self.schema = check_schema(options.get("SCHEMA", "alkstore"))
        self.database = options.get("DATABASE", "default")
        if self.database not in connections.settings:
            raise InvalidArgumentError(
                f"{where}['OPTIONS']['DATABASE'] {self.database!r} is not in DATABASES"
            )
        self.in_atomic = options.get("IN_ATOMIC", "refuse")
        if self.in_atomic not in ("refuse", "independent"):
            raise InvalidArgumentError(
                f"{where}['OPTIONS']['IN_ATOMIC'] must be 'refuse' or 'independent', "
                f"got {describe(self.in_atomic)}"
            )
        self.queue_opts = QueueOpts(
            visibility_timeout_s=options.get("VISIBILITY_TIMEOUT_S", 30.0),
            max_attempts=options.get("MAX_ATTEMPTS", 5),
            retry_base_s=options.get("RETRY_BASE_S", 1.0),
        )
        timeout = options.get("TIMEOUT_S")
        self.timeout_s = None if timeout is None else check_positive("TIMEOUT_S", timeout)
        self.keep_result_s = check_positive(
            "KEEP_RESULT_S", options.get("KEEP_RESULT_S", KEEP_RESULT_S)
        )
        for queue in self.queues:
            try:
                check_name(queue)
            except InvalidNameError as e:
                raise InvalidNameError(f"{where}['QUEUES']: {e}") from e

    @property
    def app(self) -> DjangoApp:
        """The alkstore app of this backend's store (one per store and process)."""
        return app_for(self.url, self.schema)

    def _store(self) -> SyncStore:
        return self.app.sync_store()

    # -- validation ----------------------------------------------------------------
    def validate_task(self, task: Task[Any, Any]) -> None:
        """Django's checks, with messages that name the task and the allowed values."""
        name = getattr(task, "module_path", task)
        priority = task.priority
        if type(priority) is not int or not TASK_MIN_PRIORITY <= priority <= TASK_MAX_PRIORITY:
            raise InvalidTask(
                f"task {name}: priority must be an int in "
                f"[{TASK_MIN_PRIORITY}, {TASK_MAX_PRIORITY}], got {describe(priority)}"
            )
        queue = task.queue_name
        if self.queues and queue not in self.queues:
            raise InvalidTask(
                f"task {name}: queue {describe(queue)} is not one of backend "
                f"{self.alias!r}'s QUEUES {sorted(self.queues)}"
            )
        try:
            check_name(queue)
        except InvalidNameError as e:
            raise InvalidTask(f"task {name}: {e}") from e
        run_after = task.run_after
        if run_after is not None and not timezone.is_aware(run_after):
            raise InvalidTask(f"task {name}: run_after must be an aware datetime, got {run_after}")
        super().validate_task(task)

    # -- enqueue ---------------------------------------------------------------------
    def enqueue(self, task: Task[Any, Any], args: Any, kwargs: Any) -> TaskResult[Any]:
        """Write the job: in Django's transaction on the outbox path, else in the store."""
        self.validate_task(task)
        payload = call_payload(task, args, kwargs)
        opts = EnqueueOpts(priority=task.priority, run_at=task.run_after)
        store = self._store()
        queue = store.queue(task.queue_name, self.queue_opts)
        connection = connections[self.database]
        outbox = self._outbox(store, connection)
        if outbox:
            connection.ensure_connection()
            job_id = queue.enqueue_on(connection.connection, payload, opts)
        else:
            if connection.in_atomic_block and self.in_atomic == "refuse":
                raise InvalidTask(
                    f"task {task.module_path}: the alkstore store {redact_url(self.url)} is "
                    f"not Django's database {self.database!r}, so a job enqueued inside "
                    "atomic() would not roll back with it; enqueue from "
                    "transaction.on_commit(...), or set OPTIONS['IN_ATOMIC'] = 'independent'"
                )
            job_id = queue.enqueue(payload, opts)
        result = results.snapshot(
            task,
            str(job_id),
            TaskResultStatus.READY,
            args=list(args),
            kwargs=dict(kwargs),
            errors=[],
            worker_id=None,
            attempts=0,
            enqueued_at=timezone.now(),
        )
        done = partial(task_enqueued.send, type(self), task_result=result)
        if outbox:  # at once outside atomic(); after the commit inside it; never on rollback
            self._wake_after_commit(connection, queue.name)
            transaction.on_commit(done, using=self.database)
        else:
            done()
        return result

    def _wake_after_commit(self, connection: Any, queue: str) -> None:
        """Wake ``queue`` after the commit: once per queue per transaction, however many
        jobs it enqueues there (a block of 1,000 enqueues is one wake, not 1,000)."""
        if connection.in_atomic_block:
            # Django's after-commit list, entries (savepoint ids, callback, robust): a
            # savepoint or transaction rolled back drops its entries, so a wake found
            # there still runs at this transaction's commit
            for entry in connection.run_on_commit:
                wake = entry[1]
                if isinstance(wake, _Wake) and wake.queue == queue and wake.backend is self:
                    return
        transaction.on_commit(_Wake(self, queue), using=self.database)

    def _wake(self, queue: str) -> None:
        try:
            self._store().wake(queue)
        except AlkstoreError as e:  # committed anyway: the workers' re-poll finds it
            log.warning("wake of queue %s after commit failed: %s", queue, e)

    def _outbox(self, store: SyncStore, connection: Any) -> bool:
        """Whether jobs go on Django's connection: both PostgreSQL, one database."""
        if store.engine_name != "postgres" or connection.vendor != "postgresql":
            return False
        key = (self.url, self.schema, self.database, str(connection.settings_dict.get("NAME")))
        with _same_lock:
            same = _same_database.get(key)
        if same is None:
            same = self._compare_databases(store, connection)
            with _same_lock:
                _same_database[key] = same
        if not same:
            raise InvalidTask(
                f"the alkstore store {redact_url(self.url)} is not in Django's database "
                f"{self.database!r}: the outbox needs both in one database "
                f"(point TASKS[{self.alias!r}]['OPTIONS']['URL'] at it)"
            )
        return True

    @staticmethod
    def _compare_databases(store: SyncStore, connection: Any) -> bool:
        """Whether the store and Django's connection reach one database (its name, and
        the server port when both connect over TCP)."""
        connection.ensure_connection()
        if type(connection.connection).__module__.startswith("psycopg2"):
            raise InvalidTask(
                "the outbox writes on Django's connection, which needs psycopg 3 "
                "(pip install 'psycopg[binary]'); this one is psycopg2"
            )
        sql = "SELECT current_database(), inet_server_port()"
        with store.transaction() as tx:
            ours = tuple(tx.execute(sql)[0])
        with connection.cursor() as cursor:
            cursor.execute(sql)
            theirs = tuple(cursor.fetchone())
        same_port = None in (ours[1], theirs[1]) or ours[1] == theirs[1]
        return bool(ours[0] == theirs[0] and same_port)

    # -- results -----------------------------------------------------------------------
    def get_result(self, result_id: str) -> TaskResult[Any]:
        """The job's status, return value, errors and attempts, from any process."""
        job_id = result_id if isinstance(result_id, str) else None
        if job_id is None or not job_id.isdigit() or len(job_id) > 19:
            raise TaskResultDoesNotExist(f"{describe(result_id)} is not an alkstore job id")
        store = self._store()
        admin = store.admin()
        job = admin.find_job(int(job_id))
        found = None
        queue = None
        if job is not None:
            found, queue = results.from_job(job), job.queue
        else:
            outcome = admin.outcome(int(job_id))
            if outcome is not None and outcome.outcome == "success":
                found, queue = results.from_outcome(outcome), outcome.queue
        if found is None or queue is None:
            raise TaskResultDoesNotExist(
                f"no result of a Django task with id {job_id} in {redact_url(self.url)}"
            )
        return results.with_history(found, store.queue(queue).attempts(int(job_id)))


class _Wake:
    """The after-commit wake of one queue of one backend (see ``_wake_after_commit``)."""

    __slots__ = ("backend", "queue")

    def __init__(self, backend: AlkstoreBackend, queue: str) -> None:
        self.backend = backend
        self.queue = queue

    def __call__(self) -> None:
        self.backend._wake(self.queue)
