"""The dashboard's Cancel with a real worker process: the running handler is stopped
and the run logged ``cancelled``, the same as ``alkstore jobs cancel``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

import alkstore
from tests.acceptance import apps
from tests.acceptance.conftest import Workers
from tests.dashboard.conftest import TOKEN, Serve, eventually, http_post


@pytest.fixture
def workers(target: Any, tmp_path: Path) -> Iterator[Workers]:
    w = Workers(target, tmp_path)
    yield w
    w.close()


@pytest.fixture
async def app_store(target: Any) -> AsyncIterator[alkstore.Store]:
    apps.app.url, apps.app.schema = target.url, target.schema
    store = await apps.app.connect()
    yield store
    await apps.app.close()
    apps.app.url, apps.app.schema = None, "alkstore"


def _events(path: Path) -> list[tuple[str, int]]:
    if not path.exists():
        return []
    return [(f[0], int(f[1])) for f in (line.split() for line in path.read_text().splitlines())]


async def test_cancel_in_the_dashboard_stops_the_running_handler_logged_cancelled(
    app_store: alkstore.Store, workers: Workers, serve: Serve, tmp_path: Path
) -> None:
    """An async handler (cancelled) and a sync one (sees ``current_job().cancelled``);
    their heartbeats are 10 s apart, so only the announced cancel stops them as
    ``cancelled`` (a refused heartbeat would log them ``lost``)."""
    path = tmp_path / "long.log"
    first = await apps.long_async.defer(str(path))
    second = await apps.long_sync.defer(str(path))
    proc = workers.start("--queue", "long", "--concurrency", "4")

    async def both_started() -> bool:
        return sum(e == "start" for e, _ in _events(path)) == 2

    await eventually(both_started, "both long jobs to start", timeout=60)
    served = serve(token=TOKEN)
    for job_id in (first, second):
        status, _ = http_post(
            f"{served.url}/jobs/{job_id}/cancel", {}, {"Authorization": f"Bearer {TOKEN}"}
        )
        assert status == 303

    def outcomes() -> list[str]:
        return [w for w in workers.log(proc).split() if w.startswith("outcome=")]

    async def both_ended() -> bool:
        return len(outcomes()) == 2

    await eventually(both_ended, "the worker to log both runs' outcomes", timeout=60)
    assert outcomes() == ["outcome=cancelled", "outcome=cancelled"], workers.log(proc)
    assert {("cancelled", first), ("cancelled", second)} <= set(_events(path))
    assert app_store is not None and await app_store.admin().find_job(first) is None
    assert proc.poll() is None  # the worker keeps running
