"""Every ``alkstore`` command against a real store, including its error exits."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import alkstore
from tests.acceptance.conftest import _env, run_cli

CLOSED_PG = "postgresql://nobody@127.0.0.1:1/nothing"


def ok(out: Any) -> str:
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    return str(out.stdout)


def fails(out: Any, code: int, text: str) -> None:
    assert out.returncode == code, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert text in lines[0], lines[0]


async def test_migrate_creates_the_store(target: Any) -> None:
    assert "up to date" in ok(run_cli(target, "migrate"))
    assert "up to date" in ok(run_cli(target, "migrate"))  # idempotent


async def test_enqueue_with_options_and_show(target: Any) -> None:
    run_at = (datetime.now(UTC) + timedelta(hours=1)).replace(microsecond=0)
    out = ok(
        run_cli(
            target,
            "enqueue",
            "mail",
            '{"task": "t", "args": {"x": 1}}',
            "--priority",
            "7",
            "--max-attempts",
            "2",
            "--run-at",
            run_at.isoformat().replace("+00:00", "Z"),
            "--expires-in",
            "7200",
        )
    )
    job_id = int(out.strip())
    async with await alkstore.connect(target.url, **target.connect_kwargs()) as store:
        job = await store.queue("mail").get_job(job_id)
    assert job is not None
    assert job.json() == {"task": "t", "args": {"x": 1}}
    assert (job.priority, job.max_attempts, job.run_at) == (7, 2, run_at)
    assert job.expires_at is not None
    shown = ok(run_cli(target, "jobs", "show", str(job_id)))
    assert "mail" in shown and "t(x=1)" in shown and "0/2" in shown
    delayed = int(ok(run_cli(target, "enqueue", "mail", "later", "--delay", "60")).strip())
    stdin = int(ok(run_cli(target, "enqueue", "mail", "-", stdin="from stdin")).strip())
    async with await alkstore.connect(target.url, **target.connect_kwargs()) as store:
        later = await store.queue("mail").get_job(delayed)
        piped = await store.queue("mail").get_job(stdin)
    assert later is not None and later.run_at > datetime.now(UTC) + timedelta(seconds=30)
    assert piped is not None and piped.payload == b"from stdin"


async def test_enqueue_with_keys_dedupes_debounces_and_partitions(target: Any) -> None:
    first = ok(run_cli(target, "enqueue", "keys", "a", "--dedupe-key", "order-1"))
    again = ok(run_cli(target, "enqueue", "keys", "b", "--dedupe-key", "order-1"))
    assert first == again  # the live job's id, nothing written
    typed = ok(run_cli(target, "enqueue", "keys", "h", "--debounce-key", "doc", "--debounce", "60"))
    latest = ok(run_cli(target, "enqueue", "keys", "hey", "--debounce-key", "doc"))
    assert typed == latest
    tenant = [
        int(ok(run_cli(target, "enqueue", "tenants", str(n), "--partition-key", key)).strip())
        for n, key in enumerate(["acme", "acme", "umbrella"])
    ]
    async with await alkstore.connect(target.url, **target.connect_kwargs()) as store:
        debounced = await store.queue("keys").get_job(int(typed))
        assert debounced is not None and debounced.payload == b"hey"
        assert debounced.run_at > datetime.now(UTC) + timedelta(seconds=30)
        assert len(await store.queue("keys").claim_batch("cli-test", 10)) == 1  # "a" only
        await store.queue("tenants").set_limits(partition_concurrency=1)
        claimed = await store.queue("tenants").claim_batch("cli-test", 10)
        assert sorted(h.job.id for h in claimed) == [tenant[0], tenant[2]]  # one per key
    fails(run_cli(target, "enqueue", "keys", "x", "--debounce", "5"), 2, "--debounce-key")
    fails(run_cli(target, "enqueue", "keys", "x", "--partition-key", ""), 2, "--partition-key")


async def test_jobs_show_prints_the_partition_key_also_as_json(target: Any) -> None:
    keyed = ok(run_cli(target, "enqueue", "tenants", "k", "--partition-key", "acme")).strip()
    plain = ok(run_cli(target, "enqueue", "tenants", "p")).strip()
    shown = ok(run_cli(target, "jobs", "show", keyed))
    row = next(line for line in shown.splitlines() if "partition key" in line)
    assert "acme" in row
    row = next(
        line
        for line in ok(run_cli(target, "jobs", "show", plain)).splitlines()
        if "partition key" in line
    )
    assert row.split("│")[2].strip() == "-"
    as_json = json.loads(ok(run_cli(target, "jobs", "show", keyed, "--json")))
    assert as_json["partition_key"] == "acme"
    listed = json.loads(ok(run_cli(target, "jobs", "list", "tenants", "--json")))
    assert {j["id"]: j["partition_key"] for j in listed} == {int(keyed): "acme", int(plain): None}
    other = ok(run_cli(target, "enqueue", "tenants", "o", "--partition-key", "umbrella")).strip()
    mine = ok(run_cli(target, "jobs", "list", "tenants", "--partition-key", "acme"))
    assert "partition key acme: 1 job(s)" in mine
    only = json.loads(
        ok(run_cli(target, "jobs", "list", "tenants", "--partition-key", "umbrella", "--json"))
    )
    assert [(j["id"], j["partition_key"]) for j in only] == [(int(other), "umbrella")]
    refused = run_cli(
        target, "jobs", "list", "tenants", "--partition-key", "acme", "--state", "dead"
    )
    fails(refused, 2, "no index holds the key of blocked or dead jobs")


async def _dead_job(target: Any, queue: str) -> int:
    async with await alkstore.connect(target.url, **target.connect_kwargs()) as store:
        q = store.queue(queue, alkstore.QueueOpts(max_attempts=3))
        job_id = await q.enqueue({"task": "x", "args": {}})
        handle = await q.claim_one("cli-test")
        assert handle is not None
        await handle.fail("broken on purpose")
        return job_id


async def test_jobs_list_show_stats_cancel_requeue(target: Any) -> None:
    dead = await _dead_job(target, "ops")
    pending = int(ok(run_cli(target, "enqueue", "ops", "p1")).strip())
    delayed = int(ok(run_cli(target, "enqueue", "ops", "p2", "--delay", "600")).strip())

    listed = ok(run_cli(target, "jobs", "list", "ops"))
    assert "3 job(s)" in listed and "broken on purpose" in listed
    only_dead = ok(run_cli(target, "jobs", "list", "ops", "--state", "dead"))
    assert "1 job(s)" in only_dead and str(dead) in only_dead

    stats = ok(run_cli(target, "stats"))
    row = next(line for line in stats.splitlines() if " ops " in line)
    cells = [cell.strip() for cell in row.split("│")[1:-1]]
    # pending, delayed, blocked, processing, dead
    assert cells[:6] == ["ops", "1", "1", "0", "0", "1"]

    assert f"cancelled job {delayed}" in ok(run_cli(target, "jobs", "cancel", str(delayed)))
    fails(run_cli(target, "jobs", "cancel", str(delayed)), 1, f"no job {delayed}")
    fails(run_cli(target, "jobs", "cancel", str(dead)), 1, "is dead")

    requeued = ok(run_cli(target, "jobs", "requeue", str(dead)))
    assert f"requeued job {dead}" in requeued and "0/3" in requeued
    async with await alkstore.connect(target.url, **target.connect_kwargs()) as store:
        job = await store.queue("ops").get_job(dead)
        assert job is not None and (job.state, job.attempts) == ("pending", 0)
        assert job.last_error == "broken on purpose"  # the history stays readable
        handle = await store.queue("ops").claim_batch("cli-test", 2)
        assert {h.job.id for h in handle} == {dead, pending}  # claimable now
    fails(run_cli(target, "jobs", "requeue", str(pending)), 1, "not dead")
    fails(run_cli(target, "jobs", "requeue", "999999"), 1, "no job 999999")


async def test_sweep_dead_letters_expired_jobs(target: Any) -> None:
    job_id = int(ok(run_cli(target, "enqueue", "swept", "x", "--expires-in", "0.05")).strip())
    await asyncio.sleep(0.2)
    out = ok(run_cli(target, "sweep"))
    assert "swept: 1 expired, 0 purged" in out
    async with await alkstore.connect(target.url, **target.connect_kwargs()) as store:
        job = await store.queue("swept").get_job(job_id)
    assert job is not None and (job.state, job.last_error) == ("dead", "expired")
    out = ok(run_cli(target, "sweep", "--queue", "swept", "--retention", "0"))
    assert "swept: 0 expired, 1 purged" in out


async def test_stats_on_an_empty_store(target: Any) -> None:
    ok(run_cli(target, "migrate"))
    assert "no jobs" in ok(run_cli(target, "stats"))


READ_ONLY = [["stats"], ["jobs", "list", "q"], ["jobs", "show", "1"]]


@pytest.mark.parametrize("args", READ_ONLY)
def test_a_read_only_command_on_a_misspelt_sqlite_url_names_it_and_creates_no_file(
    tmp_path: Any, args: list[str]
) -> None:
    ok(run_cli(None, "migrate", "--url", f"sqlite:///{tmp_path}/jobs.db"))
    typo = tmp_path / "jbos.db"
    fails(run_cli(None, *args, "--url", f"sqlite:///{typo}"), 1, f"no alkstore store at '{typo}'")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jobs.db"]


@pytest.mark.parametrize("args", READ_ONLY)
def test_a_read_only_command_on_a_misspelt_schema_names_it_and_creates_nothing(
    pg_url: str, args: list[str]
) -> None:
    import psycopg

    typo = f"typo_{uuid.uuid4().hex[:8]}"
    out = run_cli(None, *args, "--url", pg_url, "--schema", typo)
    fails(out, 1, f"PostgreSQL schema '{typo}' does not exist")
    with psycopg.connect(pg_url) as conn:
        found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [typo])
        assert found.fetchone() is None


def test_a_read_only_command_on_a_file_that_is_no_store_says_so(tmp_path: Any) -> None:
    import sqlite3

    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    fails(run_cli(None, "stats", "--url", f"sqlite:///{other}"), 1, "is not an alkstore store")


@pytest.mark.parametrize(
    "args",
    [
        ["enqueue", "_reserved", "x"],
        ["enqueue", "bad name", "x"],
        ["jobs", "list", "way/too/odd"],
    ],
)
async def test_bad_queue_name_is_one_line_exit_2(target: Any, args: list[str]) -> None:
    fails(run_cli(target, *args), 2, "invalid queue name")


@pytest.mark.parametrize("command", ["show", "cancel", "requeue"])
@pytest.mark.parametrize("bad", ["abc", "0", "-3", "1.5", "99999999999999999999999"])
async def test_bad_job_id_is_one_line_exit_2(target: Any, command: str, bad: str) -> None:
    fails(run_cli(target, "jobs", command, "--", bad), 2, "invalid job id")


async def test_unknown_job_id_is_one_line_exit_1(target: Any) -> None:
    ok(run_cli(target, "migrate"))
    fails(run_cli(target, "jobs", "show", "424242"), 1, "no job 424242")


async def test_bad_options_are_one_line(target: Any) -> None:
    fails(run_cli(target, "enqueue", "q", "x", "--run-at", "tomorrow"), 2, "invalid --run-at")
    naive = run_cli(target, "enqueue", "q", "x", "--run-at", "2030-01-01T09:00")
    fails(naive, 2, "invalid --run-at '2030-01-01T09:00': add a time zone")
    assert "datetime.datetime" not in naive.stderr  # the value as written, not a repr
    fails(run_cli(target, "enqueue", "q", "x", "--delay", "-1"), 2, "--delay must be >= 0")
    fails(run_cli(target, "enqueue", "q", "x", "--max-attempts", "0"), 2, "--max-attempts")


@pytest.mark.parametrize(
    "args",
    [
        ["migrate"],
        ["stats"],
        ["enqueue", "q", "x"],
        ["jobs", "list", "q"],
        ["jobs", "show", "1"],
        ["jobs", "cancel", "1"],
        ["jobs", "requeue", "1"],
        ["sweep"],
    ],
)
def test_unreachable_database_is_one_line_exit_1(args: list[str]) -> None:
    fails(run_cli(None, *args, "--url", CLOSED_PG), 1, "127.0.0.1")


def test_unopenable_sqlite_file_is_one_line_exit_1(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path}/no/such/dir/jobs.db"
    fails(run_cli(None, "migrate", "--url", url), 1, "unable to open")
    fails(run_cli(None, "stats", "--url", url), 1, "the file does not exist")


def test_unsupported_url_is_one_line_exit_2() -> None:
    fails(run_cli(None, "stats", "--url", "mysql://x"), 2, "unsupported store URL")


def test_group_url_option_and_python_dash_m(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path}/group.db"
    job_id = ok(run_cli(None, "--url", url, "enqueue", "g", '"hi"')).strip()
    shown = json.dumps(ok(run_cli(None, "--url", url, "jobs", "show", job_id)))
    assert "g" in shown


def test_demo_runs_to_a_summary() -> None:
    out = run_cli(None, "demo", "--jobs", "500", "--workers", "2")
    text = ok(out)
    for expected in ("processed", "retried", "dead-lettered", "jobs/s", "wake latency", "p99"):
        assert expected in text


def test_enqueue_errors_name_the_cli_option_not_the_api_parameter(target: Any) -> None:
    out = run_cli(target, "enqueue", "q", "x", "--delay", "-5")
    assert out.returncode == 2 and "--delay must be >= 0" in out.stderr, out.stderr
    assert "delay_s" not in out.stderr and "Traceback" not in out.stderr
    out = run_cli(target, "enqueue", "q", "x", "--max-attempts", "0")
    assert out.returncode == 2 and "--max-attempts" in out.stderr


def test_every_option_of_every_command_has_help_text() -> None:
    import click

    from alkstore.cli.commands import cli

    ctx = click.Context(cli)

    def commands(group: click.Group, prefix: str) -> list[tuple[str, click.Command]]:
        found: list[tuple[str, click.Command]] = []
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            assert command is not None, name
            found.append((f"{prefix} {name}", command))
            if isinstance(command, click.Group):
                found += commands(command, f"{prefix} {name}")
        return found

    missing = [
        f"{where} {param.opts[0]}"
        for where, command in [("alkstore", cli), *commands(cli, "alkstore")]
        for param in command.params
        if isinstance(param, click.Option) and not param.help
    ]
    assert missing == []


async def test_enqueue_with_app_applies_the_tasks_own_options(target: Any) -> None:
    payload = json.dumps({"task": "slow", "args": {"key": "k", "seconds": 0}})
    out = run_cli(target, "enqueue", "slow", payload, "--app", "tests.acceptance.apps:app")
    job_id = int(ok(out).strip())
    assert "note:" not in out.stderr
    async with await alkstore.connect(target.url, **target.connect_kwargs()) as store:
        job = await store.queue("slow").get_job(job_id)
    assert job is not None
    # the task's stamps: visibility_timeout_s=1, max_attempts=3, retry_base_s=0
    assert (job.max_attempts, job.visibility_timeout_s, job.retry_base_s) == (3, 1.0, 0.0)


async def test_enqueue_of_a_task_call_without_app_says_the_tasks_options_do_not_apply(
    target: Any,
) -> None:
    payload = json.dumps({"task": "slow", "args": {"key": "k", "seconds": 0}})
    out = run_cli(target, "enqueue", "slow", payload)
    job_id = int(ok(out).strip())
    assert "no --app is given" in out.stderr and "'slow'" in out.stderr
    async with await alkstore.connect(target.url, **target.connect_kwargs()) as store:
        job = await store.queue("slow").get_job(job_id)
    assert job is not None and job.max_attempts == 5  # the queue's defaults


@pytest.mark.parametrize(
    ("queue", "payload", "text"),
    [
        ("slow", '"not a call"', "PAYLOAD must be a task call"),
        ("slow", '{"task": "nope", "args": {}}', "has no task 'nope'"),
        ("work", '{"task": "slow", "args": {"key": "k"}}', "runs on queue 'slow', not 'work'"),
        ("slow", '{"task": "slow", "args": {"wrong": 1}}', "does not fit task 'slow'"),
    ],
)
def test_enqueue_with_app_refuses_what_the_task_cannot_run_and_writes_nothing(
    tmp_path: Any, queue: str, payload: str, text: str
) -> None:
    url = f"sqlite:///{tmp_path}/jobs.db"
    args = ["enqueue", queue, payload, "--app", "tests.acceptance.apps:app", "--url", url]
    fails(run_cli(None, *args), 2, text)
    assert not (tmp_path / "jobs.db").exists()


async def test_requeue_and_cancel_take_several_ids(target: Any) -> None:
    dead = [await _dead_job(target, "many") for _ in range(3)]
    out = ok(run_cli(target, "jobs", "requeue", str(dead[0]), str(dead[1])))
    assert f"requeued job {dead[0]}" in out and f"requeued job {dead[1]}" in out
    live = int(ok(run_cli(target, "enqueue", "many", "x")).strip())
    # one that cannot be done: the others are still done, then one error line names it
    fails(run_cli(target, "jobs", "requeue", str(live), str(dead[2])), 1, f"job {live} is")
    out = ok(run_cli(target, "jobs", "cancel", str(dead[0]), str(dead[1]), str(live)))
    assert out.count("cancelled job") == 3
    async with await alkstore.connect(target.url, **target.connect_kwargs()) as store:
        left = await store.admin().list_jobs("many")
    assert [(j.id, j.state) for j in left] == [(dead[2], "pending")]
    fails(run_cli(target, "jobs", "cancel", "--", "1", "abc"), 2, "invalid job id 'abc'")


async def test_queues_list_counts_delayed_apart_from_pending(target: Any) -> None:
    ok(run_cli(target, "enqueue", "split", "now"))
    ok(run_cli(target, "enqueue", "split", "later", "--delay", "600"))
    ok(run_cli(target, "enqueue", "split", "later", "--delay", "600"))
    listed = ok(run_cli(target, "queues", "list"))
    header = next(line for line in listed.splitlines() if "pending" in line)
    row = next(line for line in listed.splitlines() if " split " in line)
    cells = dict(
        zip(
            [c.strip() for c in header.split("┃")[1:-1]],
            [c.strip() for c in row.split("│")[1:-1]],
            strict=True,
        )
    )
    assert (cells["pending"], cells["delayed"], cells["processing"]) == ("1", "2", "0")


PERIODIC_APP = """
import alkstore
app = alkstore.App({url!r})

@app.periodic(cron="0 8 * * *", name="own-url-schedule")
@app.task(queue="own")
async def report() -> None: ...
"""


def test_schedules_uses_the_apps_own_url(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path}/own.db"
    (tmp_path / "ownapp.py").write_text(PERIODIC_APP.format(url=url))
    ok(run_cli(None, "migrate", "--url", url))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = subprocess.run(
        [sys.executable, "-m", "alkstore", "schedules", f"{tmp_path}/ownapp.py:app"],
        cwd=elsewhere,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "own-url-schedule" in ok(out)
    assert not (elsewhere / "alkstore.db").exists()


NO_URL_APP = """
import alkstore
app = alkstore.App()

@app.task(queue="nowhere")
async def noop() -> None: ...
"""


def _cli_in(cwd: Any, *args: str) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "alkstore", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_worker_refuses_to_create_the_default_store(tmp_path: Any) -> None:
    (tmp_path / "nourl.py").write_text(NO_URL_APP)
    out = _cli_in(tmp_path, "worker", "nourl.py:app")
    fails(out, 1, f"no store at {tmp_path}/alkstore.db")
    assert f"--url sqlite:///{tmp_path}/alkstore.db" in out.stderr
    assert "alkstore migrate" in out.stderr
    assert not (tmp_path / "alkstore.db").exists()  # nothing created


def test_a_worker_logs_the_absolute_path_of_a_relative_url(tmp_path: Any) -> None:
    (tmp_path / "nourl.py").write_text(NO_URL_APP)
    proc = subprocess.Popen(
        [sys.executable, "-m", "alkstore", "worker", "nourl.py:app", "--url", "sqlite:///rel.db"],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # until the start line (the pytest timeout bounds it)
            if "concurrency" in line:
                assert f"on sqlite:///{tmp_path}/rel.db" in line, line
                break
        proc.terminate()
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (tmp_path / "rel.db").exists()  # named explicitly: created, as before


async def test_jobs_show_cuts_a_long_payload_unless_full(target: Any) -> None:
    job_id = ok(run_cli(target, "enqueue", "long", "-", stdin="x" * 10_000)).strip()
    shown = ok(run_cli(target, "jobs", "show", job_id))
    assert "10,000 characters; --full shows all" in shown
    assert shown.count("x") < 5_000
    whole = ok(run_cli(target, "jobs", "show", job_id, "--full"))
    assert whole.count("x") >= 10_000 and "--full shows all" not in whole
