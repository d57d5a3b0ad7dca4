"""What only the SQLite engine has: pragmas, crash-atomic moves, fork safety, busy contention."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import alkstore
from alkstore import InvalidArgumentError, QueueOpts, StoreClosedError, sync

PROCS = Path(__file__).with_name("sqlite_procs.py")
WAIT = 120.0


def _run(*args: str, timeout: float = WAIT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(PROCS), *args], capture_output=True, text=True, timeout=timeout
    )


async def _pragma(store: alkstore.Store, name: str) -> object:
    engine = store._engine
    return await engine._call(  # type: ignore[attr-defined]
        lambda: engine._conn.execute(f"PRAGMA {name}").fetchone()[0]  # type: ignore[attr-defined]
    )


# -- durability settings -------------------------------------------------------------


async def test_wal_and_synchronous_full_by_default(tmp_path: Path) -> None:
    async with await alkstore.connect(f"sqlite:///{tmp_path}/d.db") as store:
        assert await _pragma(store, "journal_mode") == "wal"
        assert await _pragma(store, "synchronous") == 2  # FULL


async def test_synchronous_normal_from_the_url(tmp_path: Path) -> None:
    async with await alkstore.connect(f"sqlite:///{tmp_path}/n.db?synchronous=normal") as store:
        assert await _pragma(store, "journal_mode") == "wal"
        assert await _pragma(store, "synchronous") == 1  # NORMAL
        q = store.queue("q")
        job_id = await q.enqueue(b"kept")
    async with await alkstore.connect(f"sqlite:///{tmp_path}/n.db") as store:
        assert (await store.queue("q").get_job(job_id)) is not None


async def test_a_group_of_claims_alone_commits_without_its_fsync(tmp_path: Path) -> None:
    # A claim is a quick unit: a group of quick units alone commits at NORMAL (no
    # fsync; the next FULL commit syncs the WAL with it), any other group at the
    # store's FULL, and the connection is back at FULL after each.
    async with await alkstore.connect(f"sqlite:///{tmp_path}/c.db") as store:
        engine = store._engine

        def level(conn: sqlite3.Connection) -> int:
            return int(conn.execute("PRAGMA synchronous").fetchone()[0])

        assert await engine._write_call(level, quick=True) == 1  # type: ignore[attr-defined]
        assert await engine._write_call(level) == 2  # type: ignore[attr-defined]
        assert await _pragma(store, "synchronous") == 2
        q = store.queue("q")
        await q.enqueue(b"x")
        handle = await q.claim_one("w")
        assert handle is not None and await handle.ack()
        assert await _pragma(store, "synchronous") == 2


@pytest.mark.parametrize("query", ["synchronous=sometimes", "busy_timeout_s=soon", "bogus=1"])
async def test_bad_engine_options_are_rejected(tmp_path: Path, query: str) -> None:
    with pytest.raises(InvalidArgumentError):
        await alkstore.connect(f"sqlite:///{tmp_path}/x.db?{query}")


async def test_relative_and_absolute_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    async with await alkstore.connect("sqlite:///rel.db") as store:
        await store.queue("q").enqueue(b"")
    assert (tmp_path / "rel.db").exists()
    async with await alkstore.connect(f"sqlite:///{tmp_path / 'abs.db'}") as store:
        await store.queue("q").enqueue(b"")
    assert (tmp_path / "abs.db").exists()


# -- atomicity of every dead-letter move ------------------------------------------------


def _where(path: Path, job_id: int) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        live = conn.execute("SELECT count(*) FROM alk_jobs WHERE id = ?", (job_id,)).fetchone()
        dead = conn.execute("SELECT count(*) FROM alk_dead WHERE id = ?", (job_id,)).fetchone()
    finally:
        conn.close()
    return ["live"] * live[0] + ["dead"] * dead[0]


@pytest.mark.slow
@pytest.mark.parametrize("move", ["fail", "retry", "sweep", "expire"])
@pytest.mark.parametrize("at", ["DELETE FROM alk_jobs", "COMMIT"])
def test_a_process_dying_mid_move_leaves_the_job_in_exactly_one_table(
    tmp_path: Path, move: str, at: str
) -> None:
    path = tmp_path / "crash.db"
    result = _run("crash", str(path), move, at)
    assert "survived" not in result.stdout, "the move never reached the statement"
    assert result.returncode == 1, result.stderr
    job_id = int(result.stdout.split()[0])
    assert _where(path, job_id) == ["live"]  # the move rolled back as one unit
    # and the store opens and carries on: the move can be done again
    with sync.connect(f"sqlite:///{path}") as store:
        job = store.queue("crash").get_job(job_id)
        assert job is not None and job.state in ("pending", "processing")


@pytest.mark.parametrize("move", ["fail", "retry", "sweep", "expire"])
async def test_each_move_completes_into_the_dead_table_only(tmp_path: Path, move: str) -> None:
    path = tmp_path / "ok.db"
    async with await alkstore.connect(f"sqlite:///{path}") as store:
        vt = 0.2 if move == "sweep" else 60
        q = store.queue("m", QueueOpts(visibility_timeout_s=vt, max_attempts=1))
        job_id = await q.enqueue(b"x", alkstore.EnqueueOpts(expires_in_s=0.2))
        handle = None if move == "expire" else await q.claim_one("w")
        if move in ("sweep", "expire"):
            await asyncio.sleep(0.3)
        if move == "fail":
            assert handle is not None and await handle.fail()
        elif move == "retry":
            assert handle is not None and await handle.retry()
        elif move == "sweep":
            await q.claim_one("w")
        else:
            assert (await q.sweep_expired()).expired == 1
    assert _where(path, job_id) == ["dead"]


# -- fork --------------------------------------------------------------------------------


def _in_child(body: Callable[[], str]) -> str:
    """Run ``body`` in a forked child; return what it reported."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 0
        try:
            os.close(read)
            os.write(write, body().encode())
        except BaseException as e:
            os.write(write, f"unexpected {type(e).__name__}: {e}".encode())
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as f:
        report = f.read()
    os.waitpid(pid, 0)
    return report


def _expect_closed(*calls: Callable[[], object]) -> str:
    results = []
    for call in calls:
        try:
            call()
            results.append("no error")
        except StoreClosedError as e:
            results.append("closed" if "fork" in str(e) else f"closed without fork: {e}")
        except BaseException as e:
            results.append(f"{type(e).__name__}: {e}")
    return ",".join(results)


async def test_an_async_store_carried_across_fork_fails_clearly_in_the_child(
    tmp_path: Path,
) -> None:
    store = await alkstore.connect(f"sqlite:///{tmp_path}/f.db")
    q = store.queue("q")
    job_id = await q.enqueue(b"parent")
    handle = await q.claim_one("w")
    assert handle is not None

    def child() -> str:
        def run(coro: object) -> object:
            try:
                return coro.send(None)  # type: ignore[attr-defined]
            except StopIteration as stop:
                return stop.value

        return _expect_closed(
            lambda: store.queue("q"),
            lambda: run(q.enqueue(b"child")),
            lambda: run(q.get_job(job_id)),
            lambda: run(handle.heartbeat()),
            lambda: run(store.notify("ch")),
            lambda: store.transaction(),
        )

    assert _in_child(child) == ",".join(["closed"] * 6)
    # the parent's store is untouched by the child
    assert await handle.ack() is True
    assert await q.get_job(job_id) is None
    await store.close()


def test_a_sync_store_carried_across_fork_fails_clearly_in_the_child(tmp_path: Path) -> None:
    store = sync.connect(f"sqlite:///{tmp_path}/s.db")
    q = store.queue("q")
    job_id = q.enqueue(b"parent")

    def child() -> str:
        report = _expect_closed(
            lambda: q.enqueue(b"child"),
            lambda: q.get_job(job_id),
            lambda: store.queue("q"),
            lambda: store.notify("ch"),
        )
        store.close()  # closing the inherited store in the child is harmless
        with sync.connect(f"sqlite:///{tmp_path}/s.db") as fresh:  # a new store works
            fresh.queue("q").enqueue(b"from child")
        return report

    assert _in_child(child) == ",".join(["closed"] * 4)
    assert q.get_job(job_id) is not None
    handles = q.claim_batch("w", 5)
    assert sorted(h.job.payload for h in handles) == [b"from child", b"parent"]
    store.close()


# -- busy contention ---------------------------------------------------------------------


@pytest.mark.slow
def test_many_processes_writing_at_once_never_see_database_is_locked(tmp_path: Path) -> None:
    path = tmp_path / "busy.db"
    with sync.connect(f"sqlite:///{path}"):
        pass
    holder = subprocess.Popen(
        [sys.executable, str(PROCS), "hold", str(path), "1.5"], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
    workers = [
        subprocess.Popen(
            [sys.executable, str(PROCS), "hammer", str(path), "150"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    results = [w.communicate(timeout=WAIT) for w in workers]
    holder.wait(timeout=WAIT)
    for (out, err), w in zip(results, workers, strict=True):
        assert "locked" not in err and "busy" not in err.lower(), err
        assert w.returncode == 0 and out.strip() == "ok", err


# -- one connection per store ------------------------------------------------------------


async def test_a_store_op_inside_its_own_transaction_raises_instead_of_deadlocking(
    tmp_path: Path,
) -> None:
    async with await alkstore.connect(f"sqlite:///{tmp_path}/t.db") as store:
        async with store.transaction() as tx:
            with pytest.raises(InvalidArgumentError):
                await asyncio.wait_for(store.queue("q").claim_one("w"), 10)
            await tx.queue("q").enqueue(b"inside")
        assert await store.queue("q").claim_one("w") is not None


def test_a_sync_store_op_inside_its_own_transaction_raises_instead_of_deadlocking(
    tmp_path: Path,
) -> None:
    with sync.connect(f"sqlite:///{tmp_path}/t.db") as store:
        with store.transaction() as tx:
            with pytest.raises(InvalidArgumentError):
                store.queue("q").get_job(1)
            tx.queue("q").enqueue(b"inside")
        assert store.queue("q").claim_one("w") is not None


async def test_connect_without_a_url_uses_alkstore_url_then_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ALKSTORE_URL", f"sqlite:///{tmp_path / 'env.db'}")
    async with await alkstore.connect() as store:
        assert store.engine_name == "sqlite"
        await store.queue("q").enqueue(b"")
    assert (tmp_path / "env.db").exists()
    monkeypatch.delenv("ALKSTORE_URL")
    async with await alkstore.connect() as store:
        await store.queue("q").enqueue(b"")
    assert (tmp_path / "alkstore.db").exists()


# -- listening --------------------------------------------------------------------------
async def test_a_channel_added_to_a_running_listener_gets_no_note_committed_before_it(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/jobs.db"
    notify = f"from alkstore import sync\nwith sync.connect({url!r}) as s: s.notify('second', 'b')"
    # the listener looks only when poked by a commit of this process (no polling)
    async with (
        await alkstore.connect(url, wake_poll_ms=600_000) as store,
        store.listen("first") as first,
    ):
        subprocess.run([sys.executable, "-c", notify], check=True, timeout=WAIT)
        async with store.listen("second") as second:  # the listener has not read 'b'
            await store.notify("first", "poke")  # a local commit: it reads now
            assert (await asyncio.wait_for(anext(first), WAIT)).payload == "poke"
            await store.notify("second", "after")
            assert (await asyncio.wait_for(anext(second), WAIT)).payload == "after"
