"""``alkstore copy``: a whole store moved between engines, verified, resumable."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

import alkstore
from alkstore.bookkeeping import Bookkeeping
from alkstore.copy import copy_store
from alkstore.core.tables import COPIED_TABLES, canonical
from alkstore.worker.job_life import JobLife
from tests.acceptance import apps
from tests.acceptance.conftest import Workers, results, run_cli, wait_until
from tests.conftest import Target

DIRECTIONS = [
    pytest.param(("sqlite", "postgres"), id="sqlite-to-postgres"),
    pytest.param(("postgres", "sqlite"), id="postgres-to-sqlite"),
]


def _target(engine: str, request: pytest.FixtureRequest, tmp_path: Path, name: str) -> Target:
    if engine == "sqlite":
        return Target("sqlite", f"sqlite:///{tmp_path}/{name}.db", "alkstore")
    return Target("postgres", request.getfixturevalue("pg_url"), f"t_{uuid.uuid4().hex[:12]}")


@pytest.fixture(params=DIRECTIONS)
def ends(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Target, Target]:
    """(source, destination) locations on two engines."""
    src, dst = request.param
    return _target(src, request, tmp_path, "src"), _target(dst, request, tmp_path, "dst")


async def _open(target: Target) -> alkstore.Store:
    return await alkstore.connect(target.url, **target.connect_kwargs())


def _cli_args(src: Target, dst: Target) -> list[str]:
    return ["copy", src.url, dst.url, "--src-schema", src.schema, "--dst-schema", dst.schema]


async def _fill(store: alkstore.Store) -> dict[str, int]:
    """One row of every kind the copy carries; the ids by kind."""
    opts = alkstore.QueueOpts(visibility_timeout_s=45.5, max_attempts=7, retry_base_s=0.25)
    mail = store.queue("mail", opts)
    ids = {
        "pending": await mail.enqueue(
            {"n": "pending", "ü": "é"},
            alkstore.EnqueueOpts(
                priority=5, expires_in_s=3600, dedupe_key="k-pending", partition_key="p1"
            ),
        ),
        "delayed": await mail.enqueue(b"\x00raw\xff", alkstore.EnqueueOpts(delay_s=900)),
        "windowed": (
            await mail.enqueue_unique(
                {"n": "windowed"}, alkstore.EnqueueOpts(dedupe_key="w1", dedupe_window_s=600)
            )
        ).id,
    }
    claimed = store.queue("claimed", opts)
    ids["processing"] = await claimed.enqueue({"n": "processing"})
    ids["retried"] = await claimed.enqueue({"n": "retried"})
    ids["dead"] = await claimed.enqueue(
        {"n": "dead"}, alkstore.EnqueueOpts(partition_key="p9", dedupe_key="k-dead")
    )
    ids["result"] = await claimed.enqueue({"n": "result"})
    handles = {h.job.id: h for h in await claimed.claim_batch("w-old", 4)}
    assert await handles[ids["retried"]].retry("flaky: try again", delay_s=0)
    assert await handles[ids["dead"]].fail("boom: for good")
    assert await handles[ids["result"]].ack_result({"answer": 42}, keep_s=3600)
    # a job's life: a step, progress and a signal of the claimed job, an attempt of the dead one
    life = JobLife(handles[ids["processing"]], asyncio.get_running_loop())
    assert await life.step("charged", lambda: {"id": "ch_1"}) == {"id": "ch_1"}
    await life._write(0.5, "half way")
    assert await store.signal(ids["processing"], "approval", {"by": "ann"})
    engine: Any = store._engine
    attempt = (ids["dead"], "claimed", 1, "w-old", "h1", 1_700_000_000.25, 1_700_000_001.5)
    await engine.add_attempts([(*attempt, "dead", "boom: for good")], 20)
    # the processing one stays claimed by a worker that is gone
    (h,) = await claimed.claim_batch("w-old", 1)
    assert h.job.id == ids["retried"]
    assert await h.release()
    await store.queue("paused").pause()
    limited = store.queue("limited")
    await limited.set_limits(concurrency=3, partition_concurrency=2, rate="10/s", burst=4)
    await limited.enqueue({"n": "limited"})
    (h,) = await limited.claim_batch("w-old", 1)  # spends the rate: tat is set
    assert await h.ack()
    fair = store.queue("fair")  # a key cursor and a weight, fairness and aging on
    await fair.set_fair(weights={"t1": 2.5})
    await fair.set_aging(30.0)
    ids["fair"] = await fair.enqueue({"n": "fair"}, alkstore.EnqueueOpts(partition_key="t1"))
    ids["debounced"] = await fair.enqueue(
        {"n": "debounced"}, alkstore.EnqueueOpts(debounce_key="d1", debounce_s=600)
    )
    ids["blocked"] = await mail.enqueue(  # a dependency edge, a flagged parent
        {"n": "blocked"}, alkstore.EnqueueOpts(after=(ids["pending"],))
    )
    books = Bookkeeping(store)
    await books.mark_schedule("nightly", 1_700_000_000.5, ids["delayed"])
    await books.record_outcomes([("mail", "success", 3), ("mail", "dead", 1)])
    gone = store.queue("gone")
    ids["acked"] = await gone.enqueue({"n": "acked"})  # the newest id, gone from every table
    (h,) = await gone.claim_batch("w-old", 1)
    assert await h.ack()
    return ids


async def _tables(store: alkstore.Store) -> dict[str, list[tuple[Any, ...]]]:
    engine: Any = store._engine
    out = {}
    for spec in COPIED_TABLES:
        rows = await engine.copy_read(spec.name, spec.start, 10_000)
        out[spec.name] = sorted(canonical(spec, row) for row in rows)
    return out


def _as_moved(tables: dict[str, list[tuple[Any, ...]]]) -> dict[str, list[tuple[Any, ...]]]:
    """The source's rows as the destination must hold them: claimed jobs pending again."""
    spec = next(t for t in COPIED_TABLES if t.name == "alk_jobs")
    state, worker, deadline = (
        spec.names.index(c) for c in ("state", "worker_id", "claim_expires_at")
    )
    jobs = []
    for row in tables["alk_jobs"]:
        if row[state] == "processing":
            row = tuple(
                {state: "pending", worker: None, deadline: None}.get(i, v)
                for i, v in enumerate(row)
            )
        jobs.append(row)
    return {**tables, "alk_jobs": jobs}


async def test_copy_keeps_every_row_of_every_kind_in_both_directions(
    ends: tuple[Target, Target],
) -> None:
    src_target, dst_target = ends
    async with await _open(src_target) as src:
        ids = await _fill(src)
        before = await _tables(src)
        jobs_before = {i: await src.admin().find_job(i) for i in ids.values()}
    assert all(before[spec.name] for spec in COPIED_TABLES), "a table of the fixture is empty"

    done = run_cli(None, *_cli_args(src_target, dst_target))
    assert done.returncode == 0, done.stderr + done.stdout
    assert "Traceback" not in done.stderr
    for spec in COPIED_TABLES:
        assert spec.name in done.stdout
    assert "MISMATCH" not in done.stdout

    async with await _open(dst_target) as dst:
        assert await _tables(dst) == _as_moved(before)
        admin = dst.admin()
        for kind, job_id in ids.items():
            old, new = jobs_before[job_id], await admin.find_job(job_id)
            if kind in ("acked", "result"):
                assert old is None and new is None
                continue
            assert old is not None and new is not None, kind
            if kind == "processing":
                assert old.state == "processing" and old.worker_id == "w-old"
                assert new.state == "pending" and new.worker_id is None
                assert new.claim_expires_at is None
            expected = old.as_dict()
            if kind == "processing":
                expected.update(state="pending", worker_id=None, claim_expires_at=None)
            assert new.as_dict() == expected, kind
        dead = await admin.find_job(ids["dead"])
        assert dead is not None and dead.last_error == "boom: for good" and dead.attempts == 1
        retried = await admin.find_job(ids["retried"])
        assert retried is not None and retried.last_error == "flaky: try again"
        outcome = await admin.outcome(ids["result"])
        assert outcome is not None and outcome.value == {"answer": 42}
        assert (await dst.queue("paused").settings()).paused
        limits = await dst.queue("limited").settings()
        assert (limits.concurrency, limits.partition_concurrency, limits.burst) == (3, 2, 4)
        assert await admin.schedule_marks(["nightly"]) == [
            ("nightly", 1_700_000_000.5, ids["delayed"])
        ]
        # dedupe state came along: the live key and the window are still taken
        mail = dst.queue("mail")
        again = await mail.enqueue_unique({}, alkstore.EnqueueOpts(dedupe_key="k-pending"))
        assert again == alkstore.Enqueued(ids["pending"], True)
        window = await mail.enqueue_unique(
            {}, alkstore.EnqueueOpts(dedupe_key="w1", dedupe_window_s=600)
        )
        assert window.duplicate
        # new ids start past every id the source handed out, even the acked one
        fresh = await mail.enqueue({"n": "new"})
        assert fresh > max(ids.values())
        # the job's life came along, and new attempt rows get ids of their own
        claimed = dst.queue("claimed")
        assert [a.outcome for a in await claimed.attempts(ids["dead"])] == ["dead"]
        progress = await claimed.progress(ids["processing"])
        assert progress is not None and progress.message == "half way"
        engine: Any = dst._engine
        now = 1_700_000_002.0
        row = (ids["dead"], "claimed", 2, "w-new", "h2", now, now, "dead", "again")
        await engine.add_attempts([row], 20)
        assert len(await claimed.attempts(ids["dead"])) >= 2


async def test_copy_refuses_while_workers_are_registered_unless_forced(
    ends: tuple[Target, Target],
) -> None:
    src_target, dst_target = ends
    async with await _open(src_target) as src:
        await src.queue("mail").enqueue({"n": 1})
        await Bookkeeping(src).report_worker("w-live", "host1", 4242, ["mail"], 2, 0)
    refused = run_cli(None, *_cli_args(src_target, dst_target))
    assert refused.returncode == 1
    assert "Traceback" not in refused.stderr
    assert "worker(s) registered on the source" in refused.stderr
    assert "w-live" in refused.stderr and "--force" in refused.stderr
    async with await _open(dst_target) as dst:
        assert await dst.admin().stats() == []  # nothing was written

    forced = run_cli(None, *_cli_args(src_target, dst_target), "--force")
    assert forced.returncode == 0, forced.stderr
    async with await _open(dst_target) as dst:
        assert [s.pending for s in await dst.admin().stats()] == [1]
        assert await dst.admin().workers() == []  # the registry itself is not copied


async def test_copy_refuses_a_destination_holding_other_rows(
    ends: tuple[Target, Target],
) -> None:
    src_target, dst_target = ends
    async with await _open(src_target) as src:
        await src.queue("mail").enqueue({"n": "source"})
    async with await _open(dst_target) as dst:
        await dst.queue("mail").enqueue({"n": "already here"})
    refused = run_cli(None, *_cli_args(src_target, dst_target))
    assert refused.returncode == 1
    assert "Traceback" not in refused.stderr
    assert "differs from the source's" in refused.stderr
    async with await _open(dst_target) as dst:
        (job,) = await dst.admin().list_jobs("mail")
        assert job.json() == {"n": "already here"}  # untouched
        assert await dst.queue("mail").cancel(job.id)
        await dst.queue("elsewhere").pause()  # a settings row the source does not have
    async with await _open(src_target) as src, await _open(dst_target) as dst:
        with pytest.raises(alkstore.CopyRefusedError, match=r"'elsewhere'.*not in the source"):
            await copy_store(src, dst)
        assert await dst.admin().stats() == []


class Interrupted(Exception):
    pass


async def test_an_interrupted_copy_reruns_without_duplicating_a_row(
    ends: tuple[Target, Target],
) -> None:
    src_target, dst_target = ends
    async with await _open(src_target) as src:
        ids = await src.queue("bulk").enqueue_many([{"n": i} for i in range(25)])
        await src.queue("other").pause()

        def stop_after_two_pages(table: str, done: int) -> None:
            if table == "alk_jobs" and done >= 10:
                raise Interrupted

        async with await _open(dst_target) as dst:
            with pytest.raises(Interrupted):
                await copy_store(src, dst, progress=stop_after_two_pages, page_rows=5)
            assert len(await dst.admin().list_jobs("bulk")) == 10  # two pages made it

            report = await copy_store(src, dst, page_rows=5)
            assert report.ok
            jobs = {t.table: t for t in report.tables}["alk_jobs"]
            assert (jobs.source_rows, jobs.dest_rows, jobs.copied, jobs.skipped) == (25, 25, 15, 10)
            assert [j.id for j in await dst.admin().list_jobs("bulk", limit=100)] == ids
            assert (await dst.queue("other").settings()).paused

            again = await copy_store(src, dst, page_rows=5)  # a third run: all there already
            assert again.ok and sum(t.copied for t in again.tables) == 0


async def test_a_worker_on_the_destination_runs_the_copied_jobs(
    ends: tuple[Target, Target], tmp_path: Path
) -> None:
    src_target, dst_target = ends
    apps.app.url, apps.app.schema = src_target.url, src_target.schema
    try:
        async with await apps.app.connect():
            deferred = [await apps.echo.defer(key=f"moved{i}", value=i) for i in range(3)]
        await apps.app.close()
    finally:
        apps.app.url, apps.app.schema = None, "alkstore"
    done = run_cli(None, *_cli_args(src_target, dst_target))
    assert done.returncode == 0, done.stderr

    workers = Workers(dst_target, tmp_path)
    try:
        workers.start()
        async with await _open(dst_target) as dst:

            async def all_ran() -> bool:
                return len(await results(dst)) == len(deferred)

            await wait_until(all_ran, what="the copied jobs to run on the destination")
            seen = sorted((r["key"], r["job"]) for r in await results(dst))
            assert seen == [(f"moved{i}", job_id) for i, job_id in enumerate(deferred)]
    finally:
        workers.close()


def test_copy_of_a_store_onto_itself_is_bad_input(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/same.db"
    done = run_cli(None, "copy", url, url)
    assert done.returncode == 2
    assert "same store" in done.stderr and "Traceback" not in done.stderr


def test_copy_from_an_unreachable_store_is_one_line(tmp_path: Path) -> None:
    done = run_cli(
        None, "copy", "postgresql://nobody@127.0.0.1:1/none", f"sqlite:///{tmp_path}/d.db"
    )
    assert done.returncode == 1 and done.stderr.startswith("Error:")
    assert "Traceback" not in done.stderr
    done = run_cli(None, "copy", "mysql://db/app", f"sqlite:///{tmp_path}/d.db")
    assert done.returncode == 2 and "unsupported store URL" in done.stderr
    assert "Traceback" not in done.stderr


async def test_a_copy_process_killed_mid_way_is_finished_by_a_rerun(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """A real ``alkstore copy`` is SIGKILLed while blocked half-way (a lock the test holds
    on the destination's dead-letter table stops it after the jobs were written)."""
    import signal
    import subprocess
    import sys

    import psycopg

    src_target = _target("sqlite", request, tmp_path, "src")
    dst_target = _target("postgres", request, tmp_path, "dst")
    async with await _open(src_target) as src:
        ids = await src.queue("bulk").enqueue_many([{"n": i} for i in range(1200)])
        (h,) = await src.queue("bulk").claim_batch("w-old", 1)
        assert await h.fail("dead before the move")
    async with await _open(dst_target):
        pass  # the destination's tables exist
    with psycopg.connect(dst_target.url) as blocker:
        blocker.execute(
            psycopg.sql.SQL("LOCK TABLE {}.alk_dead IN EXCLUSIVE MODE").format(
                psycopg.sql.Identifier(dst_target.schema)
            )
        )  # reads go on, writes wait: the copy stops at its first dead letter
        proc = subprocess.Popen(
            [sys.executable, "-m", "alkstore", *_cli_args(src_target, dst_target)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            with psycopg.connect(dst_target.url, autocommit=True) as look:

                async def blocked_after_the_jobs() -> bool:
                    (waiting,) = look.execute(
                        "SELECT count(*) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND wait_event_type = 'Lock'"
                    ).fetchone()
                    return waiting > 0

                await wait_until(blocked_after_the_jobs, what="the copy to block on the lock")
                (copied,) = look.execute(
                    psycopg.sql.SQL("SELECT count(*) FROM {}.alk_jobs").format(
                        psycopg.sql.Identifier(dst_target.schema)
                    )
                ).fetchone()
                assert copied == len(ids) - 1
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        blocker.rollback()

    rerun = run_cli(None, *_cli_args(src_target, dst_target))
    assert rerun.returncode == 0, rerun.stderr
    async with await _open(dst_target) as dst:
        jobs = await dst.admin().list_jobs("bulk", limit=10_000)
        assert [j.id for j in jobs] == ids  # each exactly once, the dead one included
        assert sum(j.state == "dead" for j in jobs) == 1


NOT_COPIED = {
    "alk_workers",
    "alk_handoff",  # the source's live workers' hand-off slots
    "alk_notes",
    "alk_migrations",
    "alk_ack_receipts",  # + live acks
    "alk_bulk_actions",  # the source's bulk-action audit and cursors
    "alk_deps_woken",  # SQLite's wake-ups of released children
}


async def test_the_copy_covers_every_column_of_every_table_of_the_schema(
    target: Target,
) -> None:
    """A migration that adds a table or a column must teach core/tables.py about it."""
    async with await _open(target) as store:
        engine: Any = store._engine
        if target.engine == "sqlite":
            import sqlite3

            with sqlite3.connect(engine.path) as conn:
                names = [
                    r[0]
                    for r in conn.execute(
                        "SELECT name FROM sqlite_master WHERE type = 'table' "
                        "AND name LIKE 'alk\\_%' ESCAPE '\\'"
                    )
                ]
                found = {n: {r[1] for r in conn.execute(f"PRAGMA table_info({n})")} for n in names}
        else:
            import psycopg

            with psycopg.connect(target.url) as conn:
                rows = conn.execute(
                    "SELECT table_name, column_name FROM information_schema.columns "
                    "WHERE table_schema = %s",
                    [target.schema],
                ).fetchall()
            found = {}
            for table_name, column in rows:
                found.setdefault(table_name, set()).add(column)
    copied = {spec.name: set(spec.names) for spec in COPIED_TABLES}
    assert {n: c for n, c in found.items() if n not in NOT_COPIED} == copied
