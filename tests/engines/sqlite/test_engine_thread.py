"""The SQLite store's own thread (``engines/sqlite/thread.py``): calls in order, the
pool's behaviour without the pool."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from alkstore.engines.sqlite.thread import EngineThread


def test_calls_run_in_the_order_given_on_one_thread() -> None:
    thread = EngineThread("t")
    seen: list[tuple[int, str]] = []
    try:
        futures = []
        for i in range(50):
            if i % 2:
                thread.post(lambda i=i: seen.append((i, threading.current_thread().name)))
            else:
                futures.append(thread.submit(lambda i: seen.append((i, "x")) or i, i))
        assert [f.result(5) for f in futures] == list(range(0, 50, 2))
    finally:
        thread.shutdown(wait=True)
    assert [i for i, _ in seen] == list(range(50))
    assert {name for i, name in seen if i % 2} == {"t"}


def test_a_submitted_call_reports_its_error_and_a_cancelled_one_does_not_run() -> None:
    thread = EngineThread("t")
    gate = threading.Event()
    ran: list[int] = []
    try:
        thread.submit(gate.wait)
        skipped = thread.submit(ran.append, 1)
        assert skipped.cancel()
        failing = thread.submit(lambda: 1 / 0)
        gate.set()
        with pytest.raises(ZeroDivisionError):
            failing.result(5)
        assert thread.submit(ran.append, 2).result(5) is None
    finally:
        thread.shutdown(wait=True)
    assert ran == [2]


def test_a_posted_call_that_raises_is_logged_and_the_thread_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    thread = EngineThread("t")
    try:
        with caplog.at_level(logging.ERROR, logger="alkstore.sqlite"):
            thread.post(lambda: 1 / 0)
            assert thread.submit(int, 7).result(5) == 7
    finally:
        thread.shutdown(wait=True)
    assert "ZeroDivisionError" in caplog.text


def test_shutdown_runs_the_calls_given_before_it_and_refuses_new_ones() -> None:
    thread = EngineThread("t")
    gate = threading.Event()
    ran: list[int] = []
    thread.submit(gate.wait)
    thread.post(lambda: ran.append(1))
    threading.Timer(0.05, gate.set).start()
    thread.shutdown(wait=True)
    assert ran == [1]
    with pytest.raises(RuntimeError):
        thread.post(lambda: None)


def test_run_in_executor_takes_it() -> None:
    async def main() -> int:
        thread = EngineThread("t")
        try:
            return await asyncio.get_running_loop().run_in_executor(thread, int, "5")
        finally:
            thread.shutdown(wait=True)

    assert asyncio.run(main()) == 5


def test_an_unclosed_store_neither_holds_the_exit_nor_drops_a_call_given_before_it(
    tmp_path: Path,
) -> None:
    script = f"""
import asyncio, sqlite3, time, alkstore

async def main():
    store = await alkstore.connect("sqlite:///{tmp_path}/x.db")
    engine = store._engine
    engine._executor.post(lambda: time.sleep(0.3))
    engine._executor.post(lambda: engine._conn.execute(
        "INSERT INTO alk_notes (channel, payload) VALUES ('exit', '')"))
    return store  # never closed

asyncio.run(main())
"""
    done = subprocess.run([sys.executable, "-c", script], timeout=60, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()
    import sqlite3

    conn = sqlite3.connect(tmp_path / "x.db")
    try:
        assert conn.execute("SELECT count(*) FROM alk_notes WHERE channel = 'exit'").fetchone() == (
            1,
        )
    finally:
        conn.close()
