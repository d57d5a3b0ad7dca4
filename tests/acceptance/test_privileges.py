"""Least privilege on PostgreSQL: the GRANTs of docs/postgres.md ("Roles and
privileges") are enough for a worker role and a producer role, and nothing more.

Each test creates its own login roles (unique names) and schema, and drops
them at the end.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

import alkstore
from alkstore import EngineError
from alkstore.engines.postgres import migrate
from tests.acceptance import apps
from tests.acceptance.conftest import Workers, results, run_cli, wait_until
from tests.conftest import Target

DOCS = Path(__file__).resolve().parents[2] / "docs" / "postgres.md"


def _documented_grants(schema: str, worker: str, producer: str) -> list[str]:
    """The ```sql block under "Roles and privileges", for this test's names."""
    text = DOCS.read_text()
    section = text[text.index("## Roles and privileges") :]
    block = re.search(r"```sql\n(.*?)```", section, re.S)
    assert block is not None, "docs/postgres.md lost its GRANT block"
    code = re.sub(r"--[^\n]*", "", block[1])
    names = {"jobs": schema, "app_worker": worker, "app_producer": producer}
    code = re.sub(r"\b(jobs|app_worker|app_producer)\b", lambda m: f'"{names[m[1]]}"', code)
    return [s.strip() for s in code.split(";") if s.strip()]


def _as(url: str, role: str) -> str:
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{role}@{host}"))


class Roles:
    """The schema and two login roles of one test, granted as the docs say."""

    def __init__(self, pg_url: str) -> None:
        tag = uuid.uuid4().hex[:10]
        self.pg_url = pg_url
        self.schema = f"priv_{tag}"
        self.worker = f"alk_worker_{tag}"
        self.producer = f"alk_producer_{tag}"
        self.worker_url = _as(pg_url, self.worker)
        self.producer_url = _as(pg_url, self.producer)

    def create(self) -> None:
        with psycopg.connect(self.pg_url, autocommit=True) as admin:
            for role in (self.worker, self.producer):
                admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))

    def grant(self) -> None:
        with psycopg.connect(self.pg_url, autocommit=True) as admin:
            for statement in _documented_grants(self.schema, self.worker, self.producer):
                admin.execute(statement.encode())

    def drop(self) -> None:
        with psycopg.connect(self.pg_url, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self.schema))
            )
            for role in (self.worker, self.producer):
                exists = admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role])
                if exists.fetchone() is None:
                    continue
                ident = sql.Identifier(role)
                # the role's sessions (a killed worker's) first, then its grants
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                    [role],
                )
                admin.execute(sql.SQL("DROP OWNED BY {}").format(ident))
                admin.execute(sql.SQL("DROP ROLE {}").format(ident))


@pytest.fixture
def roles(pg_url: str) -> Iterator[Roles]:
    made = Roles(pg_url)
    made.create()
    try:
        yield made
    finally:
        made.drop()


@pytest.fixture
async def granted(roles: Roles) -> Roles:
    """The schema migrated by the owner (this session's superuser), then granted."""
    assert await migrate(roles.pg_url, schema=roles.schema) > 0
    roles.grant()
    return roles


def _engine_error(caught: pytest.ExceptionInfo[EngineError]) -> str:
    assert isinstance(caught.value.__cause__, psycopg.errors.InsufficientPrivilege)
    return str(caught.value)


async def test_the_documented_worker_grants_run_a_worker_process_and_the_admin_commands(
    granted: Roles, tmp_path: Path
) -> None:
    target = Target("postgres", granted.worker_url, granted.schema)
    apps.app.url, apps.app.schema = target.url, target.schema
    try:
        store = await apps.app.connect()  # migrate=on, but the schema is current: no DDL
        ids = [await apps.echo.defer(key=f"k{i}") for i in range(3)]
        ids.append(await apps.always_fails.defer("doomed"))  # retries, then dead-letters
        workers = Workers(target, tmp_path)
        try:
            proc = workers.start("--concurrency", "2")

            async def done() -> bool:
                dead = await store.admin().list_jobs("work", state="dead", limit=10)
                return len(await results(store)) == 6 and len(dead) == 1

            await wait_until(done, what="the worker role's worker to run every job")
            assert proc.poll() is None, workers.log(proc)
        finally:
            workers.close()
        assert "permission denied" not in workers.log(proc)
        stats = run_cli(target, "stats")
        assert stats.returncode == 0, stats.stderr
        listed = run_cli(target, "jobs", "list", "work", "--state", "dead")
        assert listed.returncode == 0 and str(ids[-1]) in listed.stdout, listed.stderr
        found = run_cli(target, "jobs", "find", "queue:work", "state:dead", "task:always_fails")
        assert found.returncode == 0 and str(ids[-1]) in found.stdout, found.stderr
        bulk = run_cli(target, "jobs", "bulk", "retry", "queue:work", "state:dead", "--yes")
        assert bulk.returncode == 0 and "1/1 (done)" in bulk.stdout, bulk.stderr
        assert run_cli(target, "jobs", "cancel", str(ids[-1])).returncode == 0
    finally:
        await apps.app.close()
        apps.app.url, apps.app.schema = None, "alkstore"


async def test_the_worker_role_cannot_create_or_upgrade_a_schema(granted: Roles) -> None:
    other = f"{granted.schema}_new"
    with pytest.raises(EngineError) as caught:
        await alkstore.connect(granted.worker_url, schema=other)
    message = _engine_error(caught)
    assert "permission denied for database" in message and "Roles and privileges" in message
    with pytest.raises(EngineError) as caught:
        await migrate(granted.worker_url, schema=other)
    assert "permission denied" in _engine_error(caught)
    with pytest.raises(EngineError, match=f"schema '{other}' does not exist"):
        await alkstore.connect(granted.worker_url, schema=other, migrate="off")
    with psycopg.connect(granted.pg_url) as admin:
        found = admin.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [other])
        assert found.fetchone() is None


async def test_the_producer_role_enqueues_and_every_other_write_is_refused(
    granted: Roles,
) -> None:
    async with await alkstore.connect(granted.producer_url, schema=granted.schema) as store:
        q = store.queue("mail")
        first = await q.enqueue({"to": "a"})
        more = await q.enqueue_many([b"b", b"c"])
        assert more == [first + 1, first + 2]
        for refused in (
            q.claim_one("w1"),
            q.cancel(first),
            q.ack_batch([first]),
            store.admin().stats(),
        ):
            with pytest.raises(EngineError) as caught:
                await refused
            message = _engine_error(caught)
            assert "permission denied for table" in message, message
            assert "docs/postgres.md" in message
    async with await alkstore.connect(granted.pg_url, schema=granted.schema) as owner:
        jobs = await owner.admin().list_jobs("mail", limit=10)
        assert [job.id for job in jobs] == [first, *more]
        assert all(job.attempts == 0 for job in jobs)  # nothing claimed, nothing deleted


def test_a_role_with_no_grants_gets_a_clear_error_naming_the_schema(granted: Any) -> None:
    bare = f"alk_bare_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(granted.pg_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(bare)))
    try:
        target = Target("postgres", _as(granted.pg_url, bare), granted.schema)
        out = run_cli(target, "stats")
        assert out.returncode != 0 and "Traceback" not in out.stderr
        assert "permission denied for schema" in out.stderr and granted.schema in out.stderr
    finally:
        with psycopg.connect(granted.pg_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(bare)))


async def test_the_doctor_runs_as_the_worker_role_and_says_what_it_cannot_see(
    granted: Roles,
) -> None:
    """#26: the least-privilege runtime role runs ``alkstore doctor``; another role's
    held transaction is hidden from it (no pg_read_all_stats), which it says; its
    own role's is named."""
    target = Target("postgres", granted.worker_url, granted.schema)
    healthy = run_cli(target, "doctor", "--json")
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    blind = [f for f in json.loads(healthy.stdout)["findings"] if f["verdict"] == "unknown"]
    assert len(blind) == 1 and "other roles' sessions" in blind[0]["subject"], blind
    assert f"GRANT pg_read_all_stats TO {granted.worker}" in blind[0]["fix"]
    with (
        psycopg.connect(granted.pg_url, autocommit=True) as other,
        psycopg.connect(granted.worker_url, autocommit=True) as own,
    ):
        for held in (other, own):
            held.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            held.execute("SELECT 1")
        out = run_cli(target, "doctor", "--json", "--idle-xact-age", "0")
        assert out.returncode == 1, out.stdout + out.stderr
        verdicts = {f["subject"]: f for f in json.loads(out.stdout)["findings"]}
        assert verdicts[f"pid {own.info.backend_pid}"]["verdict"] == "action"
        # the other role's session: its xmin and pid show, its state, age and query not
        hidden = verdicts[f"pid {other.info.backend_pid}"]
        assert hidden["verdict"] == "unknown" and "hidden from this role" in hidden["detail"]
        owner = Target("postgres", granted.pg_url, granted.schema)
        as_owner = run_cli(owner, "doctor", "--json", "--idle-xact-age", "0")
        seen = {f["subject"]: f for f in json.loads(as_owner.stdout)["findings"]}
        assert seen[f"pid {other.info.backend_pid}"]["verdict"] == "action"  # a superuser sees
        for held in (other, own):
            held.execute("ROLLBACK")


async def test_the_producer_role_hands_jobs_to_an_idle_worker_role_worker(
    granted: Roles, tmp_path: Path
) -> None:
    """With the documented read grants, a producer's enqueue hands its job to an idle
    worker running as the worker role (docs/postgres.md "Hand-offs"); without them
    (a role granted before they were documented) the same enqueue inserts it pending."""
    target = Target("postgres", granted.worker_url, granted.schema)
    apps.app.url, apps.app.schema = target.url, target.schema
    workers = Workers(target, tmp_path)
    try:
        store = await apps.app.connect()
        proc = workers.start("--concurrency", "2")
        async with await alkstore.connect(granted.producer_url, schema=granted.schema) as p:
            for i in range(3):
                await _until_idle(granted)
                await p.queue("work").enqueue({"task": "echo", "args": {"key": f"h{i}"}})

                async def ran(n: int = i + 1) -> bool:
                    return len(await results(store)) == n

                await wait_until(ran, what=f"job {i} to run")
        with psycopg.connect(granted.pg_url, autocommit=True) as admin:
            admin.execute(
                sql.SQL("REVOKE SELECT ON {}.alk_handoff FROM {}").format(
                    sql.Identifier(granted.schema), sql.Identifier(granted.producer)
                )
            )
        async with await alkstore.connect(granted.producer_url, schema=granted.schema) as p:
            await _until_idle(granted)
            await p.queue("work").enqueue({"task": "echo", "args": {"key": "plain"}})
            await wait_until(lambda: _count(store, 4), what="the plain job to run")
        proc.terminate()
        assert proc.wait(30) == 0, workers.log(proc)
        assert "3 job(s) handed over" in workers.log(proc)
        assert "permission denied" not in workers.log(proc)
    finally:
        workers.close()
        await apps.app.close()
        apps.app.url, apps.app.schema = None, "alkstore"


async def _count(store: alkstore.Store, n: int) -> bool:
    return len(await results(store)) == n


async def _until_idle(roles: Roles) -> None:
    """Until the worker holds its idle mark (an exclusive advisory lock of the schema's class)."""
    from alkstore.engines.postgres.handoff import lock_class

    async def idle() -> bool:
        async with await psycopg.AsyncConnection.connect(roles.pg_url, autocommit=True) as c:
            cur = await c.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s::oid"
                " AND mode = 'ExclusiveLock' AND granted",
                (lock_class(roles.schema) % 2**32,),
            )
            row = await cur.fetchone()
            return row is not None and row[0] > 0

    await wait_until(idle, what="the worker to be idle")
