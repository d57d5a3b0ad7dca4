"""``stage()``: follow-up jobs a running task keeps for its own ack (``core.followups``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from alkstore.core import followups
from alkstore.errors import InvalidArgumentError
from alkstore.worker.context import current_job, refuse_in_batch

if TYPE_CHECKING:
    from alkstore.workflows import Graph, _Part

__all__ = ["stage"]


def stage(flow: _Part | Graph) -> None:
    """Keep ``flow`` (``task.s(...)``, a chain, group, chord, batch, or a
    :class:`~alkstore.workflows.Graph`) for the running job's ack: its jobs are
    written in the ack's own transaction (also the worker's batched ack) only if
    that ack succeeds; a lost claim, a retry or a failure writes none of them.

    >>> @app.task(queue="orders")
    ... async def place(order: int) -> None:
    ...     ...
    ...     stage(chain(charge.s(order), ship.s(order)))
    """
    from alkstore.workflows import Graph  # on first use: a worker's start need not build it

    job = current_job()
    if job is None:
        refuse_in_batch("stage()")
        raise InvalidArgumentError("stage() runs inside a task; pulling, use handle.stage()")
    graph = flow if isinstance(flow, Graph) else flow.graph()[0]
    if not isinstance(graph, Graph):
        raise InvalidArgumentError(f"stage() takes a task signature or a workflow, got {flow!r}")
    followups.stage(job.id, job.attempts, graph._nodes(None))
