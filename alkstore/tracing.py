"""OpenTelemetry traces (the optional ``alkstore[otel]`` extra); no-ops without it.

A task's ``defer`` runs in a ``create {queue}`` span (kind PRODUCER) and puts
that span's W3C trace context into the job's envelope, next to the task name
and arguments: ``{"task": ..., "args": {...}, "trace": {"traceparent": ...}}``.
The worker runs the handler in a ``process {queue}`` span (kind CONSUMER)
whose parent is that context, with a link to it too, so producer and
consumer share one trace. Attributes follow the messaging semantic
conventions (``messaging.system = "alkstore"``, ``messaging.destination.name``,
``messaging.operation.type``, ``messaging.message.id``, ...). Spans go to the
globally configured tracer provider; with none configured they are
non-recording and no context is written into jobs.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["create_span", "process_span", "recording", "use_tracer_provider"]

trace: Any = None  # the opentelemetry modules, imported on first use (startup stays fast)
propagate: Any = None
_loaded = False


def _load() -> bool:
    """Import the OpenTelemetry API once; ``False`` without the extra."""
    global trace, propagate, _loaded
    if not _loaded:
        _loaded = True
        try:
            from opentelemetry import propagate as _propagate
            from opentelemetry import trace as _trace
        except ImportError:  # the extra is not installed
            return False
        trace, propagate = _trace, _propagate
    return trace is not None


SYSTEM = "alkstore"
_SCOPE = "alkstore"
_provider: Any = None  # None: the global tracer provider


def use_tracer_provider(provider: Any) -> None:
    """Send alkstore's spans to ``provider`` instead of the global one (``None``: back
    to the global provider)."""
    global _provider
    _provider = provider


def _tracer() -> Any:
    _load()
    return trace.get_tracer(_SCOPE, tracer_provider=_provider)


def _off() -> bool:
    """No extra, or no tracer provider configured: spans would not record, skip them
    (a non-recording span still costs ~10 µs per job)."""
    if (
        not _loaded
        and _provider is None
        and "opentelemetry.trace" not in sys.modules
        and "OTEL_PYTHON_TRACER_PROVIDER" not in os.environ
    ):
        return True  # nothing imported the API, so no provider is set: leave it unimported
    if not _load():
        return True
    if _provider is not None:
        return False
    provider = trace.get_tracer_provider()
    return isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


def recording() -> bool:
    """Whether spans would record now (the extra is installed and a provider set).

    The worker asks once per claimed batch and skips :func:`process_span` for
    every job of a batch when not: the check reads the environment."""
    return not _off()


@contextlib.contextmanager
def create_span(queue: str, count: int = 1) -> Iterator[dict[str, str] | None]:
    """Around an enqueue of ``count`` task calls: yields the trace headers for the jobs
    (``None`` when tracing is off)."""
    if _off():
        yield None
        return
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.destination.name": queue,
        "messaging.operation.type": "create",
        "messaging.operation.name": "create",
    }
    if count != 1:
        attributes["messaging.batch.message_count"] = count
    with _tracer().start_as_current_span(
        f"create {queue}", kind=trace.SpanKind.PRODUCER, attributes=attributes
    ) as span:
        if not span.get_span_context().is_valid:
            yield None
            return
        headers: dict[str, str] = {}
        propagate.inject(headers)
        yield headers or None


@contextlib.contextmanager
def process_span(
    queue: str, job_id: int, attempt: int, task: str, headers: Mapping[str, str] | None
) -> Iterator[None]:
    """Around one handler run; an exception out of it marks the span as an error."""
    if _off():
        yield
        return
    parent = None
    links = []
    if headers:
        parent = propagate.extract(dict(headers))
        producer = trace.get_current_span(parent).get_span_context()
        if producer.is_valid:
            links.append(trace.Link(producer))
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.destination.name": queue,
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.message.id": str(job_id),
        "alkstore.job.attempt": attempt,
        "alkstore.task": task,
    }
    with _tracer().start_as_current_span(
        f"process {queue}",
        context=parent,
        kind=trace.SpanKind.CONSUMER,
        attributes=attributes,
        links=links,
        record_exception=True,
        set_status_on_exception=True,
    ) as span:
        try:
            yield
        except BaseException as e:
            if not isinstance(e, Exception):  # cancellation is not recorded by the SDK
                span.set_status(trace.Status(trace.StatusCode.ERROR, type(e).__name__))
            raise


def headers_of(meta: object) -> dict[str, str] | None:
    """The trace headers of a decoded envelope's ``trace`` field, if well-formed."""
    if not isinstance(meta, dict):
        return None
    found = {k: v for k, v in meta.items() if type(k) is str and type(v) is str}
    return found or None
