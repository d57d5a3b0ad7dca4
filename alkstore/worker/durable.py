"""``@step``: a function whose every call inside a running job is a durable step
(``current_job().step``), named after the function (docs/durable.md)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, overload

from alkstore.core.life import check_step_name
from alkstore.worker.context import current_job, refuse_in_batch

__all__ = ["step"]

F = TypeVar("F", bound=Callable[..., Any])


@overload
def step(fn: F, /) -> F: ...


@overload
def step(*, name: str | None = None) -> Callable[[F], F]: ...


def step(fn: Any = None, /, *, name: str | None = None) -> Any:
    """Make each call of ``fn`` inside a job run by a worker a durable step: run once
    per job, its JSON result stored and returned to later attempts. Outside a job it
    is a plain call. Decorate async functions for async handlers and plain ones for
    sync handlers (those block on the write).

    >>> @step
    ... async def charge(order_id: int) -> str:
    ...     return await payments.charge(order_id)
    """

    def wrap(fn: F) -> F:
        key = check_step_name(name if name is not None else fn.__qualname__)
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                job = current_job()
                if job is None or job._bound is None:
                    refuse_in_batch("a durable step")
                    return await fn(*args, **kwargs)
                return await job.step(key, fn, *args, **kwargs)

            return run_async  # type: ignore[return-value]

        @functools.wraps(fn)
        def run_sync(*args: Any, **kwargs: Any) -> Any:
            job = current_job()
            if job is None or job._bound is None:
                refuse_in_batch("a durable step")
                return fn(*args, **kwargs)
            return job.step_sync(key, fn, *args, **kwargs)

        return run_sync  # type: ignore[return-value]

    return wrap if fn is None else wrap(fn)
