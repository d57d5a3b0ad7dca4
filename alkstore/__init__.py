"""alkstore: a durable job queue on SQLite or PostgreSQL.

>>> import alkstore
>>> async with await alkstore.connect("sqlite:///jobs.db") as store:
...     await store.queue("emails").enqueue({"to": "a@example.com"})
"""

from alkstore.app import App
from alkstore.connect import connect
from alkstore.core.dedupe import Enqueued
from alkstore.core.flow import Rate
from alkstore.core.job import Job, JobState, Notification, SweepResult
from alkstore.core.life import Attempt, Progress
from alkstore.core.options import EnqueueOpts, QueueOpts
from alkstore.core.results import JobOutcome
from alkstore.errors import (
    AlkstoreError,
    CopyRefusedError,
    DependencyError,
    EngineError,
    HandleConsumedError,
    InvalidArgumentError,
    InvalidNameError,
    JobDeadError,
    JobLostError,
    PayloadError,
    PayloadTooLargeError,
    ResultTimeoutError,
    ResultUnavailableError,
    SignalTimeoutError,
    StoreClosedError,
)
from alkstore.job_handle import JobHandle
from alkstore.queue import Queue
from alkstore.store import Store
from alkstore.subscription import Subscription
from alkstore.tasks import Deferred, Fail, Snooze, SyncDeferred, Task, TaskCall
from alkstore.transaction import Transaction, TxQueue
from alkstore.worker.context import current_job
from alkstore.worker.durable import step

__version__: str  # an annotation only: the first read goes through __getattr__

# Submodules a worker's start does without, imported on first access (as
# ``alkstore.admin`` after a bare ``import alkstore``, which imported them before).
_LAZY_MODULES = ("admin", "bulk")


def __getattr__(name: str) -> object:
    """``alkstore.__version__``, read from the installed metadata on first use:
    ``importlib.metadata`` costs ~25 ms of every start (the worker CLI's included);
    and the submodules of ``_LAZY_MODULES``."""
    if name in _LAZY_MODULES:
        import importlib

        return importlib.import_module(f"alkstore.{name}")
    if name != "__version__":
        raise AttributeError(f"module 'alkstore' has no attribute {name!r}")
    from importlib import metadata

    try:
        version = metadata.version("alkstore")
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        version = "0+unknown"
    globals()["__version__"] = version
    return version


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY_MODULES})


__all__ = [
    "__version__",
    # opening a store
    "connect",
    "Store",
    # queues and jobs
    "Queue",
    "QueueOpts",
    "EnqueueOpts",
    "Enqueued",
    "JobHandle",
    "Job",
    "JobState",
    "SweepResult",
    "JobOutcome",
    # notify / listen
    "Notification",
    "Subscription",
    # tasks and workers
    "App",
    "Task",
    "TaskCall",
    "Deferred",
    "SyncDeferred",
    "Fail",
    "Snooze",
    "current_job",
    "step",
    "Attempt",
    "Progress",
    # flow control
    "Rate",
    # transactions
    "Transaction",
    "TxQueue",
    # errors
    "AlkstoreError",
    "InvalidNameError",
    "InvalidArgumentError",
    "PayloadError",
    "PayloadTooLargeError",
    "StoreClosedError",
    "HandleConsumedError",
    "DependencyError",
    "JobDeadError",
    "ResultTimeoutError",
    "ResultUnavailableError",
    "JobLostError",
    "SignalTimeoutError",
    "CopyRefusedError",
    "EngineError",
]
