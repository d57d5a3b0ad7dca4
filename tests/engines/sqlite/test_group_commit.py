"""Group commit on SQLite: waiting write units share one transaction, a SAVEPOINT each.

The engine thread is held busy while the units queue up, so each group's
size is known; commits are counted by tracing the statements the engine's
own connection runs.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

import alkstore
from alkstore import EngineError
from alkstore.engines.sqlite.connections import _GROUP_MAX
from alkstore.engines.sqlite.engine import SqliteEngine


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[alkstore.Store]:
    async with await alkstore.connect(f"sqlite:///{tmp_path}/g.db") as store:
        yield store


def _engine(store: alkstore.Store) -> SqliteEngine:
    engine = store._engine
    assert isinstance(engine, SqliteEngine)
    return engine


async def _trace(engine: SqliteEngine) -> list[str]:
    """The statements the engine's connection runs from now on."""
    statements: list[str] = []

    def install() -> None:
        assert engine._conn is not None
        engine._conn.set_trace_callback(statements.append)

    await engine._call(install)
    return statements


async def _queued_together(engine: SqliteEngine, calls: list[Callable[[], Any]]) -> list[Any]:
    """Run ``calls`` as concurrent tasks while the engine thread is held, so every
    write unit is waiting before the first group starts; their outcomes."""
    release = threading.Event()
    assert engine._executor is not None
    held = engine._executor.submit(release.wait)
    tasks = [asyncio.ensure_future(call()) for call in calls]
    while len(engine._units) < len(calls):
        await asyncio.sleep(0)
    release.set()
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    held.result()
    return outcomes


def _count(path: str, sql: str) -> int:
    """``sql``'s count, read by a connection of its own (what other processes see)."""
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute(sql).fetchone()[0])
    finally:
        conn.close()


async def test_concurrent_enqueues_share_commits_in_groups_of_at_most_the_bound(
    store: alkstore.Store,
) -> None:
    engine = _engine(store)
    q = store.queue("q")
    statements = await _trace(engine)
    n = _GROUP_MAX + 36
    ids = await _queued_together(engine, [lambda i=i: q.enqueue(b"%d" % i) for i in range(n)])
    assert all(isinstance(job_id, int) for job_id in ids)
    assert len(set(ids)) == n
    assert statements.count("COMMIT") == 2  # 64 + 36 units: two groups, two fsyncs
    assert statements.count("BEGIN IMMEDIATE") == 2
    assert _count(engine.path, "SELECT count(*) FROM alk_jobs") == n


async def test_each_caller_sees_its_write_committed_when_its_call_returns(
    store: alkstore.Store,
) -> None:
    engine = _engine(store)
    q = store.queue("q")
    seen: list[int] = []

    async def enqueue_then_look(i: int) -> None:
        job_id = await q.enqueue(b"%d" % i)
        # another connection, as another process would: the row is durable already
        seen.append(_count(engine.path, f"SELECT count(*) FROM alk_jobs WHERE id = {job_id}"))

    await _queued_together(engine, [lambda i=i: enqueue_then_look(i) for i in range(20)])
    assert seen == [1] * 20


async def test_a_failing_unit_rolls_back_alone_and_the_rest_of_its_group_commits(
    store: alkstore.Store,
) -> None:
    engine = _engine(store)
    q = store.queue("q")
    statements = await _trace(engine)

    def half_then_fail(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO alk_notes (channel, payload) VALUES ('half', 'x')")
        conn.execute("INSERT INTO no_such_table VALUES (1)")  # a real SQLite error

    def python_error(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO alk_notes (channel, payload) VALUES ('half', 'y')")
        raise ValueError("the unit's own error")

    calls: list[Callable[[], Any]] = [lambda i=i: q.enqueue(b"%d" % i) for i in range(10)]
    calls.insert(3, lambda: engine._write_call(half_then_fail))
    calls.insert(7, lambda: engine._write_call(python_error))
    outcomes = await _queued_together(engine, calls)

    assert isinstance(outcomes[3], EngineError) and "no_such_table" in str(outcomes[3])
    assert isinstance(outcomes[3].__cause__, sqlite3.OperationalError)
    assert isinstance(outcomes[7], ValueError)
    ids = [o for i, o in enumerate(outcomes) if i not in (3, 7)]
    assert all(isinstance(job_id, int) for job_id in ids)
    assert statements.count("COMMIT") == 1  # all twelve units were one group
    assert statements.count("ROLLBACK TO alkstore_unit") == 2
    assert _count(engine.path, "SELECT count(*) FROM alk_jobs") == 10
    assert _count(engine.path, "SELECT count(*) FROM alk_notes WHERE channel = 'half'") == 0


async def test_a_failed_commit_fails_its_whole_group_and_keeps_none_of_it(
    store: alkstore.Store,
) -> None:
    engine = _engine(store)
    q = store.queue("q")

    # A deferred foreign key is checked at COMMIT only: a unit that breaks it
    # succeeds itself and makes its group's COMMIT fail for real.
    def schema(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE t_parent (id INTEGER PRIMARY KEY)")
        conn.execute(
            "CREATE TABLE t_child (parent INTEGER "
            "REFERENCES t_parent (id) DEFERRABLE INITIALLY DEFERRED)"
        )

    def foreign_keys_on() -> None:
        assert engine._conn is not None
        engine._conn.execute("PRAGMA foreign_keys=ON")

    await engine._write_call(schema)
    await engine._call(foreign_keys_on)
    statements = await _trace(engine)

    def orphan(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO t_child (parent) VALUES (42)")

    calls: list[Callable[[], Any]] = [lambda i=i: q.enqueue(b"%d" % i) for i in range(10)]
    calls.insert(5, lambda: engine._write_call(orphan))
    outcomes = await _queued_together(engine, calls)

    assert statements.count("COMMIT") == 1 and statements.count("ROLLBACK") == 1
    for outcome in outcomes:
        assert isinstance(outcome, EngineError) and "FOREIGN KEY" in str(outcome)
    assert _count(engine.path, "SELECT count(*) FROM alk_jobs") == 0
    assert _count(engine.path, "SELECT count(*) FROM t_child") == 0

    # the connection is out of the failed transaction: the same writes now apply once
    ids = await _queued_together(engine, [lambda i=i: q.enqueue(b"%d" % i) for i in range(10)])
    assert all(isinstance(job_id, int) for job_id in ids)
    assert _count(engine.path, "SELECT count(*) FROM alk_jobs") == 10


async def test_a_listener_is_woken_only_by_the_commit_of_a_group(
    store: alkstore.Store,
) -> None:
    engine = _engine(store)
    pokes: list[int] = []
    jobs_seen: list[int] = []

    def poke() -> None:  # as a listener's poke: runs on the engine thread
        pokes.append(1)
        jobs_seen.append(_count(engine.path, "SELECT count(*) FROM alk_jobs"))

    def schema(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE t_parent (id INTEGER PRIMARY KEY)")
        conn.execute(
            "CREATE TABLE t_child (parent INTEGER "
            "REFERENCES t_parent (id) DEFERRABLE INITIALLY DEFERRED)"
        )

    def foreign_keys_on() -> None:
        assert engine._conn is not None
        engine._conn.execute("PRAGMA foreign_keys=ON")

    await engine._write_call(schema)
    await engine._call(foreign_keys_on)
    engine._poke_local = poke  # type: ignore[method-assign]
    q = store.queue("q")

    def orphan(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO t_child (parent) VALUES (42)")

    failed: list[Callable[[], Any]] = [lambda: q.enqueue(b"a"), lambda: engine._write_call(orphan)]
    await _queued_together(engine, failed)
    assert pokes == []  # the group's COMMIT failed: its notes wake nobody

    await _queued_together(engine, [lambda i=i: q.enqueue(b"%d" % i) for i in range(5)])
    assert pokes == [1]  # once per commit, however many notes it holds
    assert jobs_seen == [5]  # and the rows are there when it runs


async def test_a_group_comes_back_to_its_callers_loop_in_one_wake(
    store: alkstore.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # each caller's own concurrent future and asyncio.wrap_future cost a wake (and
    # ~35 µs of an idle defer()); the group settles its callers' futures at once
    engine = _engine(store)
    q = store.queue("q")
    loop = asyncio.get_running_loop()
    wakes: list[object] = []
    real = loop.call_soon_threadsafe

    def counted(callback: Any, *args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is not threading.main_thread():
            wakes.append(callback)
        return real(callback, *args, **kwargs)

    monkeypatch.setattr(loop, "call_soon_threadsafe", counted)
    ids = await _queued_together(engine, [lambda i=i: q.enqueue(b"%d" % i) for i in range(20)])
    assert len(set(ids)) == 20
    assert [getattr(w, "__name__", w) for w in wakes] == ["settle"]


async def test_a_caller_cancelled_while_its_unit_waits_writes_nothing(
    store: alkstore.Store,
) -> None:
    engine = _engine(store)
    q = store.queue("q")
    release = threading.Event()
    assert engine._executor is not None
    held = engine._executor.submit(release.wait)
    kept = asyncio.ensure_future(q.enqueue(b"kept"))
    dropped = asyncio.ensure_future(q.enqueue(b"dropped"))
    while len(engine._units) < 2:
        await asyncio.sleep(0)
    dropped.cancel()
    await asyncio.sleep(0)
    release.set()
    await kept
    with pytest.raises(asyncio.CancelledError):
        await dropped
    held.result()
    assert _count(engine.path, "SELECT count(*) FROM alk_jobs") == 1


async def test_a_unit_alone_in_its_group_runs_without_a_savepoint_and_fails_alone(
    store: alkstore.Store,
) -> None:
    engine = _engine(store)
    q = store.queue("q")
    statements = await _trace(engine)
    await q.enqueue(b"one")
    assert "SAVEPOINT alkstore_unit" not in statements
    assert statements.count("COMMIT") == 1

    def half_then_fail(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO alk_notes (channel, payload) VALUES ('half', 'x')")
        raise ValueError("the unit's own error")

    statements.clear()
    with pytest.raises(ValueError, match="own error"):
        await engine._write_call(half_then_fail)
    assert statements[-1] == "ROLLBACK" and "COMMIT" not in statements
    assert _count(engine.path, "SELECT count(*) FROM alk_notes WHERE channel = 'half'") == 0
    assert not engine._effects  # its note's poke went with it
    await q.enqueue(b"two")  # the connection is out of the transaction
    assert _count(engine.path, "SELECT count(*) FROM alk_jobs") == 2
