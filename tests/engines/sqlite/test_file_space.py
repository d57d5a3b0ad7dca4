"""The file gives freed pages back (auto_vacuum=INCREMENTAL, migration 0013, sweep reclaim)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import alkstore
from alkstore import QueueOpts
from alkstore.engines.sqlite.space import RESERVE_PAGES


def _pages(path: Path) -> tuple[int, int, int]:
    """(auto_vacuum, page_count, freelist_count) read by a connection of its own."""
    conn = sqlite3.connect(path)
    try:
        return tuple(
            conn.execute(f"PRAGMA {name}").fetchone()[0]
            for name in ("auto_vacuum", "page_count", "freelist_count")
        )
    finally:
        conn.close()


async def _churn(q: alkstore.Queue, jobs: int) -> None:
    payload = "x" * 300
    for _ in range(jobs // 1000):
        await q.enqueue_many([payload] * 1000)
    while handles := await q.claim_batch("w", 1000):
        await q.ack_batch([h.job.id for h in handles])


async def test_after_churn_the_sweep_gives_the_pages_back(tmp_path: Path) -> None:
    path = tmp_path / "churn.db"
    async with await alkstore.connect(f"sqlite:///{path}") as store:
        q = store.queue("q", QueueOpts(visibility_timeout_s=300))
        assert _pages(path)[0] == 2  # INCREMENTAL from the start
        kept = await store.queue("kept").enqueue(b"one")  # a row the churn leaves alone
        baseline = _pages(path)[1]
        await _churn(q, 20_000)
        _, grown, free = _pages(path)
        assert grown > baseline + 4 * RESERVE_PAGES
        assert free > 4 * RESERVE_PAGES  # the drained rows' pages, still in the file
        await q.sweep_expired()
        _, after, free_after = _pages(path)
        assert free_after <= RESERVE_PAGES
        assert after <= baseline + RESERVE_PAGES + 16  # + the odd page moved by the churn
        assert path.stat().st_size <= after * 4096  # the checkpoint truncated the main file
        job = await store.queue("kept").get_job(kept)
        assert job is not None and job.payload == b"one"


async def test_an_existing_file_is_switched_by_the_migration_keeping_its_jobs(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    async with await alkstore.connect(f"sqlite:///{path}") as store:
        ids = await store.queue("q").enqueue_many([b"a", b"b", b"c"])
    conn = sqlite3.connect(path, isolation_level=None)  # as a store before 0013 left it
    conn.execute("PRAGMA auto_vacuum = NONE")
    conn.execute("VACUUM")
    conn.execute("PRAGMA user_version = 12")
    conn.close()
    assert _pages(path)[0] == 0
    async with await alkstore.connect(f"sqlite:///{path}") as store:
        assert _pages(path)[0] == 2
        got = [await store.queue("q").get_job(i) for i in ids]
        assert [j.payload for j in got if j is not None] == [b"a", b"b", b"c"]
