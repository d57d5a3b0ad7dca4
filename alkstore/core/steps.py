"""Step flows: engine-neutral logic as a generator of the statements it needs.

A flow is written once, free of I/O, as a generator (the shape of psycopg's
``generators.py``): it yields ``(step, params)`` and is sent the step's rows,
until it returns its answer. Each engine runs the steps in its own SQL, on
its own connection and inside the transaction the flow needs: the SQLite
engine blocking on its thread (:func:`run_steps_sync`), the PostgreSQL engine
awaiting its driver (:func:`run_steps`). The flow never sees which.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

__all__ = ["Flow", "Rows", "Step", "run_steps", "run_steps_sync"]

R = TypeVar("R")

Step = tuple[str, dict[str, Any]]
Rows = list[tuple[Any, ...]]
Flow = Generator[Step, Rows, R]


def run_steps_sync(flow: Flow[R], step: Callable[[str, dict[str, Any]], Rows]) -> R:
    """Drive ``flow`` to its answer with a blocking step runner."""
    try:
        name, params = next(flow)
        while True:
            name, params = flow.send(step(name, params))
    except StopIteration as done:
        answer: R = done.value
        return answer


async def run_steps(flow: Flow[R], step: Callable[[str, dict[str, Any]], Awaitable[Rows]]) -> R:
    """Drive ``flow`` to its answer with an async step runner."""
    try:
        name, params = next(flow)
        while True:
            name, params = flow.send(await step(name, params))
    except StopIteration as done:
        answer: R = done.value
        return answer
