"""Migrations: schema.sql equals every migration in order; upgrades keep every row; once only.

The test-only migrations in ``fixtures/migrations/<engine>/`` stand for what
real ones contain (``$$`` bodies, literal braces, triggers, a statement that
must run outside a transaction) and count their own runs, so "applied exactly
once" is a row count, not a hope.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

import alkstore
from alkstore.engines.postgres import migrator as pg_migrate
from alkstore.engines.sqlite import migrator as sqlite_migrate
from alkstore.errors import EngineError

from . import catalog
from .together import start_together

PROCS = Path(__file__).with_name("procs.py")
WAIT = 120.0


def _sibling(target: Any, suffix: str) -> Any:
    """Another empty location next to ``target`` (another file, another schema)."""
    if target.engine == "sqlite":
        return dataclasses.replace(target, url=target.url.replace(".db", f"-{suffix}.db"))
    return dataclasses.replace(target, schema=f"{target.schema}_{suffix}")


def _use_fixtures(monkeypatch: pytest.MonkeyPatch, engine: str) -> list[Any]:
    migrations = catalog.with_fixtures(engine)
    module = sqlite_migrate if engine == "sqlite" else pg_migrate
    monkeypatch.setattr(module, "MIGRATIONS", migrations)
    return migrations


async def _fixture_runs(target: Any) -> list[tuple[Any, ...]]:
    if target.engine == "sqlite":
        conn = sqlite3.connect(catalog.sqlite_path(target))
        try:
            return conn.execute("SELECT id, note, odd FROM alk_fixture_runs").fetchall()
        finally:
            conn.close()
    with psycopg.connect(target.url) as conn:
        table = sql.Identifier(target.schema, "alk_fixture_runs")
        rows = conn.execute(sql.SQL("SELECT id, note, odd FROM {}").format(table)).fetchall()
        return [tuple(row) for row in rows]


async def test_every_migration_in_order_builds_exactly_schema_sql(target: Any) -> None:
    migrated, built = target, _sibling(target, "schema")
    await catalog.migrate_to(migrated, catalog.real_migrations(target.engine))
    await catalog.build_from_schema(built)
    got, want = catalog.catalog(migrated), catalog.catalog(built)
    assert got, "nothing was built"
    assert got == want


async def test_the_catalog_comparison_sees_a_missing_index(target: Any) -> None:
    migrated, built = target, _sibling(target, "schema")
    await catalog.migrate_to(migrated, catalog.real_migrations(target.engine))
    await catalog.build_from_schema(built)
    if target.engine == "sqlite":
        conn = sqlite3.connect(catalog.sqlite_path(built))
        conn.execute("DROP INDEX alk_dead_died")
        conn.close()
    else:
        with psycopg.connect(target.url) as conn:
            conn.execute(
                sql.SQL("DROP INDEX {}").format(sql.Identifier(built.schema, "alk_dead_died"))
            )
    assert catalog.catalog(migrated) != catalog.catalog(built)


async def test_test_only_migrations_with_bodies_braces_and_no_transaction_apply(
    target: Any,
) -> None:
    migrations = catalog.with_fixtures(target.engine)
    assert not migrations[-1].transactional  # the no-transaction path is exercised
    assert await catalog.migrate_to(target, migrations) == migrations[-1].version
    assert await catalog.migrate_to(target, migrations) == migrations[-1].version  # idempotent
    if target.engine == "sqlite":
        assert await _fixture_runs(target) == [(1, "{}", "a;b")]
        objects = catalog.catalog(target)
        assert "trigger alk_fixture_trigger" in objects
        assert "index alk_fixture_runs_note" in objects
    else:
        assert await _fixture_runs(target) == [(1, {}, "a;b")]
        with psycopg.connect(target.url) as conn:
            fn = sql.Identifier(target.schema, "alk_fixture_fn")
            assert conn.execute(sql.SQL("SELECT {}()").format(fn)).fetchone() == (42,)
            valid = conn.execute(
                "SELECT indisvalid FROM pg_index WHERE indexrelid = %s::regclass",
                (f'"{target.schema}".alk_fixture_runs_note',),
            ).fetchone()
            assert valid == (True,)


async def _v1_rows(target: Any) -> dict[str, int]:
    """Pending, delayed, processing and dead rows written straight into a v1 schema."""
    now = time.time()
    live = (
        # id, queue, payload, state, priority, run_at, attempts, worker, claim_expires_at
        (1, "up", b"pending", "pending", 5, now - 10, 0, None, None),
        (2, "up", b"delayed", "pending", 0, now + 3600, 0, None, None),
        (3, "up", b"processing", "processing", 0, now - 20, 1, "w1", now + 3600),
    )
    dead = (4, "up", b"dead", 0, now - 30, 3, "boom")
    if target.engine == "sqlite":
        conn = sqlite3.connect(catalog.sqlite_path(target), isolation_level=None)
        try:
            for i, q, p, state, prio, run_at, att, worker, claim in live:
                conn.execute(
                    "INSERT INTO alk_jobs (id, queue, payload, state, priority, run_at, "
                    "created_at, attempts, max_attempts, visibility_timeout_s, retry_base_s, "
                    "worker_id, claim_expires_at) VALUES (?,?,?,?,?,?,?,?,3,30,1,?,?)",
                    (i, q, p, state, prio, run_at, now - 40, att, worker, claim),
                )
            i, q, p, prio, run_at, att, err = dead
            conn.execute(
                "INSERT INTO alk_dead (id, queue, payload, priority, run_at, created_at, "
                "attempts, max_attempts, visibility_timeout_s, retry_base_s, last_error, "
                "died_at) VALUES (?,?,?,?,?,?,?,3,30,1,?,?)",
                (i, q, p, prio, run_at, now - 40, att, err, now - 5),
            )
            # the dead row's id came from alk_jobs' sequence when it was live
            conn.execute("UPDATE sqlite_sequence SET seq = 4 WHERE name = 'alk_jobs'")
        finally:
            conn.close()
    else:
        with psycopg.connect(target.url) as conn:
            jobs = sql.Identifier(target.schema, "alk_jobs")
            dead_t = sql.Identifier(target.schema, "alk_dead")
            for i, q, p, state, prio, run_at, att, worker, claim in live:
                conn.execute(
                    sql.SQL(
                        "INSERT INTO {} (id, queue, payload, state, priority, run_at, created_at, "
                        "attempts, max_attempts, visibility_timeout_s, retry_base_s, worker_id, "
                        "claim_expires_at) OVERRIDING SYSTEM VALUE VALUES (%s,%s,%s,%s,%s,"
                        "to_timestamp(%s),to_timestamp(%s),%s,3,30,1,%s,to_timestamp(%s))"
                    ).format(jobs),
                    (i, q, p, state, prio, run_at, now - 40, att, worker, claim),
                )
            i, q, p, prio, run_at, att, err = dead
            conn.execute(
                sql.SQL(
                    "INSERT INTO {} (id, queue, payload, priority, run_at, created_at, attempts, "
                    "max_attempts, visibility_timeout_s, retry_base_s, last_error, died_at) "
                    "VALUES (%s,%s,%s,%s,to_timestamp(%s),to_timestamp(%s),%s,3,30,1,%s,"
                    "to_timestamp(%s))"
                ).format(dead_t),
                (i, q, p, prio, run_at, now - 40, att, err, now - 5),
            )
            conn.execute(
                "SELECT setval(pg_get_serial_sequence(%s, 'id'), 4)",
                (f'"{target.schema}".alk_jobs',),
            )
    return {"pending": 1, "delayed": 2, "processing": 3, "dead": 4}


async def test_a_v1_store_with_rows_in_every_state_upgrades_to_current_keeping_them(
    target: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    migrations = _use_fixtures(monkeypatch, target.engine)
    await catalog.migrate_to(target, migrations[:1])
    ids = await _v1_rows(target)
    async with await alkstore.connect(target.url, **target.connect_kwargs()) as store:
        q = store.queue("up")
        jobs = {state: await q.get_job(job_id) for state, job_id in ids.items()}
        assert {s: (j.state, j.payload) for s, j in jobs.items() if j} == {
            "pending": ("pending", b"pending"),
            "delayed": ("pending", b"delayed"),
            "processing": ("processing", b"processing"),
            "dead": ("dead", b"dead"),
        }
        assert jobs["pending"] is not None and jobs["pending"].priority == 5
        assert jobs["processing"] is not None and jobs["processing"].attempts == 1
        assert jobs["processing"].worker_id == "w1"
        assert jobs["dead"] is not None and jobs["dead"].last_error == "boom"
        claimed = await q.claim_batch("after-upgrade", 10)
        assert [h.job.id for h in claimed] == [ids["pending"]]  # delayed waits, claim holds
        assert await claimed[0].ack()
        fresh = await q.enqueue(b"new")
        assert fresh > ids["dead"]  # ids are never reused across the upgrade
        assert jobs["dead"].dedupe_key is None  # v2: keys, results, schedules work at once
        keyed = await q.enqueue_unique(b"k", alkstore.EnqueueOpts(dedupe_key="k"))
        assert (await q.enqueue_unique(b"k", alkstore.EnqueueOpts(dedupe_key="k"))).duplicate
        handle = await q.claim_one("after-upgrade")
        assert handle is not None and handle.job.id in (fresh, keyed.id)
        assert await handle.ack_result("kept", keep_s=60)
        assert await q.result(handle.job.id) == "kept"
        assert await store.admin().requeue(ids["dead"])
    assert await _fixture_runs(target) != []


async def test_a_schema_newer_than_this_alkstore_is_refused(
    target: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    await catalog.migrate_to(target, catalog.with_fixtures(target.engine))  # "a future version"
    with pytest.raises(EngineError, match="newer"):
        await alkstore.connect(target.url, **target.connect_kwargs())


@pytest.mark.slow
async def test_many_processes_connecting_at_once_apply_each_migration_once(
    target: Any,
) -> None:
    migrations = catalog.with_fixtures(target.engine)
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            str(PROCS),
            "migrate",
            target.url,
            target.schema,
            "-",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        for _ in range(8)
    ]
    try:
        await start_together(procs, WAIT)
        outputs = await asyncio.wait_for(asyncio.gather(*(p.communicate() for p in procs)), WAIT)
    finally:
        for p in procs:
            if p.returncode is None:
                p.kill()
                await p.wait()
    assert [out.strip() for out, _ in outputs] == [b"ok"] * 8
    assert len(await _fixture_runs(target)) == 1  # the counting migration ran once
    if target.engine == "sqlite":
        conn = sqlite3.connect(catalog.sqlite_path(target))
        assert conn.execute("PRAGMA user_version").fetchone()[0] == migrations[-1].version
        conn.close()
    else:
        with psycopg.connect(target.url) as conn:
            table = sql.Identifier(target.schema, "alk_migrations")
            rows = conn.execute(sql.SQL("SELECT version FROM {} ORDER BY 1").format(table))
            assert [v for (v,) in rows.fetchall()] == [m.version for m in migrations]


def _store_exists(target: Any) -> bool:
    if target.engine == "sqlite":
        return Path(catalog.sqlite_path(target)).exists()
    with psycopg.connect(target.url) as conn:
        found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [target.schema])
        return found.fetchone() is not None


async def test_migrate_off_runs_no_ddl_and_names_what_is_missing_or_behind(
    target: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    kwargs = target.connect_kwargs()
    named = catalog.sqlite_path(target) if target.engine == "sqlite" else target.schema
    with pytest.raises(EngineError, match=f"{named}'.*(does not exist|the file does not)"):
        await alkstore.connect(target.url, **kwargs, migrate="off")
    assert not _store_exists(target)  # no file, no schema
    with pytest.raises(alkstore.InvalidArgumentError, match="migrate must be on or off"):
        await alkstore.connect(target.url, **kwargs, migrate="maybe")

    migrations = _use_fixtures(monkeypatch, target.engine)
    await catalog.migrate_to(target, migrations[:1])
    monkeypatch.undo()
    with pytest.raises(EngineError, match=r"version 1, this alkstore needs .*alkstore migrate"):
        await alkstore.connect(target.url, **kwargs, migrate="off")
    with pytest.raises(EngineError, match="version 1, this alkstore needs"):  # still behind
        await alkstore.connect(target.url, **kwargs, migrate="off")

    async with await alkstore.connect(target.url, **kwargs):  # migrate=on upgrades it
        pass
    sep = "&" if "?" in target.url else "?"
    async with await alkstore.connect(f"{target.url}{sep}migrate=off", **kwargs) as store:
        job_id = await store.queue("q").enqueue(b"x")
        job = await store.queue("q").get_job(job_id)
        assert job is not None and job.payload == b"x"
