"""Worker and CLI subprocesses against the test's store, on every engine."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import alkstore

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the worker imports tests.acceptance.apps; so do we
    sys.path.insert(0, str(ROOT))

from tests.acceptance import apps  # noqa: E402

Target = Any  # tests/conftest.py's Target (url, schema, engine)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("ALKSTORE_URL", None)
    env.pop("ALKSTORE_SCHEMA", None)
    return env


def store_args(target: Target) -> list[str]:
    return ["--url", target.url, "--schema", target.schema]


class Workers:
    """Starts ``alkstore worker SPEC`` processes (the test app by default), each with
    its log; kills leftovers. ``options`` come before each start's own arguments."""

    def __init__(
        self,
        target: Target,
        tmp_path: Path,
        spec: str = "tests.acceptance.apps:app",
        options: tuple[str, ...] = ("--poll-interval", "0.2"),
    ) -> None:
        self.target = target
        self.tmp_path = tmp_path
        self.spec = spec
        self.options = options
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(
        self, *args: str, grace: float | None = 10.0, spec: str | None = None, **env: str
    ) -> subprocess.Popen[bytes]:
        """A worker process; ``env`` adds environment variables (``cwd`` sets its folder)."""
        log = open(self.tmp_path / f"worker-{len(self.procs)}.log", "wb")  # noqa: SIM115
        grace_args = () if grace is None else ("--grace", str(grace))
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "alkstore", "worker", spec or self.spec),
                *store_args(self.target),
                *self.options,
                *grace_args,
                *args,
            ],
            cwd=env.pop("cwd", str(ROOT)),
            env={**_env(), **env},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        self.procs.append(proc)
        return proc

    def log(self, proc: subprocess.Popen[bytes]) -> str:
        return (self.tmp_path / f"worker-{self.procs.index(proc)}.log").read_text()

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.fixture
def workers(target: Target, tmp_path: Path) -> Iterator[Workers]:
    w = Workers(target, tmp_path)
    yield w
    w.close()


@pytest.fixture
async def app_store(target: Target) -> AsyncIterator[alkstore.Store]:
    """The test app bound to the target, connected in this test's loop."""
    apps.app.url = target.url
    apps.app.schema = target.schema
    store = await apps.app.connect()
    yield store
    await apps.app.close()
    apps.app.url = None
    apps.app.schema = "alkstore"


def run_cli(target: Target | None, *args: str, stdin: str | None = None) -> Any:
    """``python -m alkstore --url … --schema … ARGS`` (the group's store options)."""
    extra = store_args(target) if target is not None else []
    return subprocess.run(
        [sys.executable, "-m", "alkstore", *extra, *args],
        cwd=ROOT,
        env=_env(),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


async def results(store: alkstore.Store) -> list[dict[str, Any]]:
    """What the tasks recorded, in order."""
    jobs = await store.admin().list_jobs(apps.RESULTS, limit=10_000)
    return [json.loads(job.payload) for job in jobs]


async def wait_until(
    check: Callable[[], Awaitable[bool]], timeout: float = 30.0, what: str = "condition"
) -> None:
    """Poll ``check`` until true (the pytest timeout is the real bound; this one names it)."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)
