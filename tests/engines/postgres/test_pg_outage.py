"""The store after its server was down for a while: a PostgreSQL server of this test's
own (a scratch data directory on a port of its own, stopped and started here; the
shared server is never touched)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator

import pytest
from scratch_pg import ScratchServer, server_bindir  # tests/ is on the path (its conftest)

import alkstore


@pytest.fixture
def scratch() -> Iterator[ScratchServer]:
    bindir = server_bindir()
    if bindir is None:
        if os.environ.get("CI") == "true":
            pytest.fail("needs PostgreSQL's server binaries in /usr/lib/postgresql/*/bin")
        pytest.skip("needs PostgreSQL's server binaries in /usr/lib/postgresql/*/bin")
    server = ScratchServer(bindir)
    try:
        server.start()
        yield server
    finally:
        server.remove()


async def test_the_pool_is_back_soon_after_a_long_outage(scratch: ScratchServer) -> None:
    """psycopg_pool retries a lost connection on a doubling backoff for five minutes
    by default, and no request starts another try meanwhile: 20 s into an outage its
    next try was ~11 s after the server came back, so the first pool call after it
    waited that long (heartbeats and sweeps go through the pool). The store gives up
    a try after a few seconds, so the next call starts a fresh one: the first call
    after the outage gets a connection within the pool's timeout (4 s here)."""
    store = await alkstore.connect(f"{scratch.url}?pool_timeout_s=4")
    try:
        queue = store.queue("q")
        job_id = await queue.enqueue(b"x")
        assert await queue.get_job(job_id) is not None  # a pool call
        scratch.stop()
        down_until = time.monotonic() + 20
        while time.monotonic() < down_until:  # calls keep coming, as a worker's do
            with pytest.raises(alkstore.EngineError):
                await queue.get_job(job_id)
            await asyncio.sleep(0.5)
        scratch.start()
        assert await queue.get_job(job_id) is not None
    finally:
        await store.close()
