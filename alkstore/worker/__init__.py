"""The worker runtime: tasks, the job a task runs for, and the Worker that runs them."""

from alkstore.tasks import Fail, Snooze, Task, TaskCall
from alkstore.worker.batches import BatchItem
from alkstore.worker.context import current_job, current_tick
from alkstore.worker.durable import step
from alkstore.worker.followups import stage
from alkstore.worker.runtime import Worker

__all__ = [
    "BatchItem",
    "Fail",
    "Snooze",
    "Task",
    "TaskCall",
    "Worker",
    "current_job",
    "current_tick",
    "stage",
    "step",
]
