"""The next-due index holds delayed jobs only (migration 0014): an immediate job's
enqueue, claim and ack write no entry there, and the next wake still sees every
job due later (delayed, retried with back-off)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import alkstore
from alkstore import EnqueueOpts, QueueOpts

_OLD_INDEX = "CREATE INDEX alk_jobs_pending_due ON alk_jobs (queue, run_at) WHERE state = 'pending'"


def _due_entries(path: Path, queue: str) -> int:
    """Entries of alk_jobs_pending_due for ``queue``, read through that index alone."""
    conn = sqlite3.connect(path)
    try:
        row = conn.execute(
            "SELECT count(*) FROM alk_jobs INDEXED BY alk_jobs_pending_due "
            "WHERE queue = ? AND state = 'pending' AND run_at > created_at",
            (queue,),
        ).fetchone()
        return int(row[0])
    finally:
        conn.close()


async def test_only_jobs_due_after_their_creation_are_in_the_due_index(tmp_path: Path) -> None:
    path = tmp_path / "due.db"
    async with await alkstore.connect(f"sqlite:///{path}") as store:
        q = store.queue("q", QueueOpts(retry_base_s=600))
        await q.enqueue_many([b"a", b"b", b"c"])
        assert _due_entries(path, "q") == 0
        assert await q._next_wake_in() is None  # all due now: nothing to wake for later
        await q.enqueue(b"later", EnqueueOpts(delay_s=3600))
        assert _due_entries(path, "q") == 1
        due = await q._next_wake_in()
        assert due is not None and 3500 < due <= 3600
        (handle,) = await q.claim_batch("w", 1)
        assert handle.job.payload == b"a"
        assert await handle.retry("again", delay_s=60)  # back-off: pending, due after creation
        assert _due_entries(path, "q") == 2
        due = await q._next_wake_in()
        assert due is not None and 0 < due <= 60
        handles = await q.claim_batch("w", 10)
        assert sorted(h.job.payload for h in handles) == [b"b", b"c"]  # the due ones only
        await q.ack_batch([h.job.id for h in handles])
        assert _due_entries(path, "q") == 2


async def test_a_store_before_0014_gets_the_delayed_only_index(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    async with await alkstore.connect(f"sqlite:///{path}") as store:
        q = store.queue("q")
        await q.enqueue(b"now")
        await q.enqueue(b"later", EnqueueOpts(delay_s=3600))
    conn = sqlite3.connect(path, isolation_level=None)  # as a store before 0014 left it
    conn.execute("DROP INDEX alk_jobs_pending_due")
    conn.execute(_OLD_INDEX)
    conn.execute("PRAGMA user_version = 13")
    conn.close()
    async with await alkstore.connect(f"sqlite:///{path}") as store:
        conn = sqlite3.connect(path)
        (sql,) = conn.execute(
            "SELECT sql FROM sqlite_schema WHERE name = 'alk_jobs_pending_due'"
        ).fetchone()
        assert conn.execute("PRAGMA user_version").fetchone()[0] >= 14
        conn.close()
        assert "run_at > created_at" in sql
        assert _due_entries(path, "q") == 1
        due = await store.queue("q")._next_wake_in()
        assert due is not None and 3500 < due <= 3600
