"""alkstore: a durable job queue on SQLite or PostgreSQL.

>>> import alkstore
>>> async with await alkstore.connect("sqlite:///jobs.db") as store:
...     await store.queue("emails").enqueue({"to": "a@example.com"})
"""

from alkstore.connect import connect
from alkstore.core.job import Job, JobState, Notification, SweepResult
from alkstore.core.options import EnqueueOpts, QueueOpts
from alkstore.errors import (
    AlkstoreError,
    EngineError,
    HandleConsumedError,
    InvalidArgumentError,
    InvalidNameError,
    PayloadError,
    StoreClosedError,
)
from alkstore.store import JobHandle, Queue, Store, Transaction, TxQueue
from alkstore.subscription import Subscription

__all__ = [
    # opening a store
    "connect",
    "Store",
    # queues and jobs
    "Queue",
    "QueueOpts",
    "EnqueueOpts",
    "JobHandle",
    "Job",
    "JobState",
    "SweepResult",
    # notify / listen
    "Notification",
    "Subscription",
    # transactions
    "Transaction",
    "TxQueue",
    # errors
    "AlkstoreError",
    "InvalidNameError",
    "InvalidArgumentError",
    "PayloadError",
    "StoreClosedError",
    "HandleConsumedError",
    "EngineError",
]
