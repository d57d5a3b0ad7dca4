"""What the worker needs of its app (``WorkerApp``), so the worker never imports
``alkstore.app``: ``App.worker()`` builds a Worker, and the worker sees the app
only through this protocol (no import circle between the two)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from alkstore.schedules import Schedule
    from alkstore.store import Store
    from alkstore.tasks import Task

__all__ = ["WorkerApp"]


class WorkerApp(Protocol):
    """An :class:`~alkstore.App` as its worker uses it."""

    tasks: dict[str, Task[Any, Any]]
    schedules: list[Schedule]

    @property
    def queues(self) -> list[str]:
        """The queues of the app's tasks (a worker's default)."""
        ...

    def find_task(self, name: str) -> Task[Any, Any] | None:
        """The task a job names, or ``None``."""
        ...

    async def connect(self) -> Store:
        """The app's store, opened in this event loop."""
        ...
