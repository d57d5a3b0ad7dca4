"""OpenTelemetry: ``create {queue}`` at defer and ``process {queue}`` around the handler,
linked through the trace context carried in the job; the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import alkstore
from alkstore import tracing
from tests.acceptance.conftest import wait_until


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use_tracer_provider(provider)
    yield exporter
    tracing.use_tracer_provider(None)
    provider.shutdown()


async def test_producer_and_consumer_spans_share_one_trace(
    target: Any, spans: InMemorySpanExporter
) -> None:
    app = alkstore.App(target.url, schema=target.schema)
    done = asyncio.Event()

    @app.task(queue="traced", name="ok")
    async def ok(n: int) -> None:
        done.set()

    @app.task(queue="traced", name="broken", max_attempts=1)
    async def broken() -> None:
        raise RuntimeError("nope")

    provider_tracer = tracing._tracer()
    try:
        with provider_tracer.start_as_current_span("request") as parent:
            job_id = await ok.defer(3)
            await broken.defer()
        store = await app.connect()
        job = await store.admin().find_job(job_id)
        assert job is not None
        carried = json.loads(job.payload)["trace"]["traceparent"]
        assert carried.split("-")[1] == format(parent.get_span_context().trace_id, "032x")

        worker = app.worker(handle_signals=False, poll_interval_s=0.05)
        run = asyncio.create_task(worker.run())

        def finished() -> list[Any]:
            return [s for s in spans.get_finished_spans() if s.name == "process traced"]

        async def both_processed() -> bool:
            return len(finished()) == 2

        await wait_until(both_processed, what="two process spans")
        worker.stop()
        assert await run == 0
    finally:
        await app.close()

    by_name = {}
    for span in spans.get_finished_spans():
        by_name.setdefault(span.name, []).append(span)
    creates = by_name["create traced"]
    assert len(creates) == 2 and all(s.kind is SpanKind.PRODUCER for s in creates)
    assert all(
        s.parent is not None and s.parent.span_id == parent.get_span_context().span_id
        for s in creates
    )
    assert creates[0].attributes["messaging.system"] == "alkstore"
    assert creates[0].attributes["messaging.destination.name"] == "traced"
    assert creates[0].attributes["messaging.operation.type"] == "create"

    processes = {s.attributes["alkstore.task"]: s for s in by_name["process traced"]}
    good, bad = processes["ok"], processes["broken"]
    create_of_good = next(
        c
        for c in creates
        if c.context.span_id == good.parent.span_id  # type: ignore[union-attr]
    )
    assert good.kind is SpanKind.CONSUMER
    assert good.context.trace_id == parent.get_span_context().trace_id
    assert [link.context.span_id for link in good.links] == [create_of_good.context.span_id]
    assert good.attributes["messaging.message.id"] == str(job_id)
    assert good.attributes["messaging.operation.type"] == "process"
    assert good.status.status_code is StatusCode.UNSET
    assert bad.status.status_code is StatusCode.ERROR
    assert any(e.name == "exception" for e in bad.events)


async def test_without_a_recording_provider_no_context_is_written(target: Any) -> None:
    app = alkstore.App(target.url, schema=target.schema)

    @app.task(queue="plain", name="t")
    async def t() -> None: ...

    try:
        job_id = await t.defer()
        store = await app.connect()
        job = await store.admin().find_job(job_id)
        assert job is not None and json.loads(job.payload) == {"task": "t", "args": {}}
    finally:
        await app.close()
