"""The store after its server was down for a while: a PostgreSQL server of this test's
own (a scratch data directory on a port of its own, stopped and started here; the
shared server is never touched)."""

from __future__ import annotations

import asyncio
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import alkstore

PG_USER = "postgres"  # the server refuses to run as root


def _bindir() -> str | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return os.path.dirname(found[-1]) if found else None


def _as_pg(*cmd: str) -> None:
    prefix = ["runuser", "-u", PG_USER, "--"] if os.geteuid() == 0 else []
    subprocess.run([*prefix, *cmd], check=True, capture_output=True, timeout=60)


class Scratch:
    def __init__(self, bindir: str, home: Path) -> None:
        self.bindir, self.data = bindir, home / "data"
        with socket.socket() as s:  # a free port
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"postgresql://alk@127.0.0.1:{self.port}/postgres"

    def pg_ctl(self, *args: str) -> None:
        _as_pg(f"{self.bindir}/pg_ctl", "-D", str(self.data), "-w", *args)


@pytest.fixture
def scratch() -> Iterator[Scratch]:
    bindir = _bindir()
    if bindir is None:
        if os.environ.get("CI") == "true":
            pytest.fail("needs PostgreSQL's server binaries in /usr/lib/postgresql/*/bin")
        pytest.skip("needs PostgreSQL's server binaries in /usr/lib/postgresql/*/bin")
    # not under pytest's tmp_path: the server's user must reach it
    tmp_path = Path(tempfile.mkdtemp(prefix="alk-outage-"))
    server = Scratch(bindir, tmp_path)
    server.data.mkdir()
    if os.geteuid() == 0:
        shutil.chown(tmp_path, PG_USER)
        shutil.chown(server.data, PG_USER)
    _as_pg(f"{bindir}/initdb", "-D", str(server.data), "-U", "alk", "--auth=trust", "--no-sync")
    with open(server.data / "postgresql.conf", "a") as conf:
        conf.write(
            f"listen_addresses = '127.0.0.1'\nport = {server.port}\n"
            f"unix_socket_directories = '{server.data}'\nfsync = off\n"
        )
    server.pg_ctl("-l", str(tmp_path / "log"), "start")
    try:
        yield server
    finally:
        subprocess.run(
            ["runuser", "-u", PG_USER, "--"] * (os.geteuid() == 0)
            + [f"{bindir}/pg_ctl", "-D", str(server.data), "-m", "immediate", "-w", "stop"],
            capture_output=True, check=False, timeout=60,
        )  # fmt: skip
        shutil.rmtree(tmp_path, ignore_errors=True)


async def test_the_pool_is_back_soon_after_a_long_outage(scratch: Scratch) -> None:
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
        scratch.pg_ctl("-m", "fast", "stop")
        down_until = time.monotonic() + 20
        while time.monotonic() < down_until:  # calls keep coming, as a worker's do
            with pytest.raises(alkstore.EngineError):
                await queue.get_job(job_id)
            await asyncio.sleep(0.5)
        scratch.pg_ctl("-l", str(scratch.data.parent / "log"), "start")
        assert await queue.get_job(job_id) is not None
    finally:
        await store.close()
