"""``alkstore doctor`` as a subprocess against real stores (#26): a healthy store
exits 0 on both engines; a held transaction, a silent worker and a lapsed claim
are each named with exit 1."""

from __future__ import annotations

import asyncio
import json

import psycopg
import pytest

import alkstore
from alkstore.bookkeeping import Bookkeeping
from alkstore.core.options import QueueOpts
from tests.acceptance.conftest import run_cli
from tests.conftest import Target


def _findings(out: str) -> list[dict[str, str]]:
    found: list[dict[str, str]] = json.loads(out)["findings"]
    return found


async def test_a_healthy_store_exits_0_with_every_check_ok(
    target: Target, store: alkstore.Store
) -> None:
    await store.queue("mail").enqueue(b"x")
    await Bookkeeping(store).report_worker("w-healthy", "host-a", 4242, ["mail"], 2, 0)
    out = run_cli(target, "doctor")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "healthy: nothing needs action" in out.stdout
    assert "Traceback" not in out.stderr
    as_json = run_cli(target, "doctor", "--json")
    assert as_json.returncode == 0, as_json.stderr
    findings = _findings(as_json.stdout)
    checks = {f["check"] for f in findings}
    assert {"migration", "claims past deadline", "silent workers"} <= checks
    assert all(f["verdict"] == "ok" for f in findings), findings
    if target.engine == "postgres":
        assert {"xmin horizon", "dead rows", "clock skew"} <= checks
        assert any(f["subject"] == "alk_jobs" for f in findings)
    else:
        assert "wal" in checks


async def test_a_silent_worker_and_a_lapsed_claim_need_action(
    target: Target, store: alkstore.Store
) -> None:
    queue = store.queue("mail", QueueOpts(visibility_timeout_s=0.01))
    job_id = await queue.enqueue(b"x")
    assert await queue.claim_one("w-gone") is not None
    await Bookkeeping(store).report_worker("w-gone", "host-b", 777, ["mail"], 1, 1)
    while not (await store.admin().health()).facts.overdue:  # the 10 ms claim lapses
        await asyncio.sleep(0.01)
    out = run_cli(target, "doctor", "--json", "--silent-after", "0", "--claim-overdue", "0")
    assert out.returncode == 1, out.stdout + out.stderr
    action = {(f["check"], f["subject"]) for f in _findings(out.stdout) if f["verdict"] == "action"}
    assert action == {("silent workers", "w-gone"), ("claims past deadline", "mail")}, action
    assert job_id  # the claim named is this job's queue
    table = run_cli(target, "doctor", "--silent-after", "0")
    assert table.returncode == 1 and "host-b" in table.stdout and "pid 777" in table.stdout


def test_bad_thresholds_exit_2(target: Target) -> None:
    out = run_cli(target, "doctor", "--xmin-age", "-1")
    assert out.returncode == 2 and "--xmin-age" in out.stderr


def test_an_unmigrated_store_is_the_migration_finding(tmp_path: object) -> None:
    target = Target("sqlite", f"sqlite:///{tmp_path}/missing.db", "alkstore")
    out = run_cli(target, "doctor")
    assert out.returncode == 1 and "does not exist" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("target", ["postgres"], indirect=True)
async def test_an_idle_in_transaction_session_is_named_by_its_pid(
    target: Target, store: alkstore.Store
) -> None:
    with psycopg.connect(target.url, autocommit=True) as held:
        held.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        held.execute("SELECT 1 AS held_by_the_doctor_test")  # the snapshot: an xmin
        pid = held.info.backend_pid
        out = run_cli(target, "doctor", "--idle-xact-age", "0")
        assert out.returncode == 1, out.stdout + out.stderr
        assert f"pid {pid}" in out.stdout and "1 finding(s) need action" in out.stdout
        as_json = run_cli(target, "doctor", "--json", "--idle-xact-age", "0")
        named = [f for f in _findings(as_json.stdout) if f["subject"] == f"pid {pid}"]
        assert len(named) == 1 and named[0]["verdict"] == "action", named
        assert "idle in transaction" in named[0]["detail"]
        assert "query: SELECT 1 AS held_by_the_doctor_test" in named[0]["detail"]
        assert f"pg_terminate_backend({pid})" in named[0]["fix"]
        held.execute("ROLLBACK")
    healthy = run_cli(target, "doctor", "--idle-xact-age", "0")
    assert healthy.returncode == 0, healthy.stdout
