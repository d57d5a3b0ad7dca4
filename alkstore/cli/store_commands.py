"""The store-level commands: ``migrate``, ``enqueue``, ``stats``, ``workers``, ``sweep``."""

from __future__ import annotations

import re
import sys
from datetime import datetime
from typing import Any

import click

from alkstore.admin import GONE_AFTER_S
from alkstore.app import App
from alkstore.cli import render
from alkstore.cli.apps import load_app
from alkstore.cli.base import (
    BadInput,
    _bind_app,
    _json_option,
    _one_line,
    _open,
    _out,
    _run,
    _store_options,
)
from alkstore.core.options import EnqueueOpts, QueueOpts
from alkstore.core.urls import redact_url
from alkstore.errors import InvalidArgumentError
from alkstore.tasks import BadCall, decode_call

__all__ = ["enqueue", "migrate", "stats", "sweep", "workers"]


@click.command()
@_store_options
@click.pass_context
def migrate(ctx: click.Context, url: str | None, schema: str | None) -> None:
    """Create or upgrade the store's tables (connecting does it too; this is explicit)."""

    async def go() -> str:
        async with await _open(ctx, url, schema, create=True) as store:
            return store.url

    where = redact_url(_run(go()))
    _out().print(f"store {where} is up to date")


@click.command()
@click.argument("queue")
@click.argument("payload")
@click.option("--priority", type=int, default=None, help="Higher runs first.")
@click.option("--delay", type=float, default=None, help="Seconds before it is claimable.")
@click.option("--run-at", default=None, help="ISO 8601 time with a zone, e.g. 2030-01-01T09:00Z.")
@click.option("--expires-in", type=float, default=None, help="Seconds until it expires.")
@click.option("--max-attempts", type=int, default=None, help="Attempt budget of this job.")
@click.option(
    "--dedupe-key",
    default=None,
    help="While a live job of QUEUE has this key, enqueue nothing and print that job's id.",
)
@click.option(
    "--dedupe-window",
    type=float,
    default=None,
    help="Seconds the --dedupe-key stays taken after its first enqueue.",
)
@click.option(
    "--partition-key",
    default=None,
    help="The job's key for a fair queue's turns and per-key limits (e.g. a tenant).",
)
@click.option(
    "--debounce-key",
    default=None,
    help="One pending job per key: replace a pending job's payload instead of adding one.",
)
@click.option(
    "--debounce",
    type=float,
    default=None,
    help="With --debounce-key: seconds from now before the job may start (pushed out again "
    "by each enqueue).",
)
@click.option(
    "--app",
    "app_spec",
    metavar="MODULE:APP",
    default=None,
    help="The app whose task PAYLOAD calls: the task's own options (max attempts, "
    "visibility timeout, retry base) apply and its arguments are checked.",
)
@_store_options
@click.pass_context
def enqueue(
    ctx: click.Context,
    queue: str,
    payload: str,
    priority: int | None,
    delay: float | None,
    run_at: str | None,
    expires_in: float | None,
    max_attempts: int | None,
    dedupe_key: str | None,
    dedupe_window: float | None,
    partition_key: str | None,
    debounce_key: str | None,
    debounce: float | None,
    app_spec: str | None,
    url: str | None,
    schema: str | None,
) -> None:
    """Enqueue PAYLOAD (text, stored verbatim as UTF-8; '-' reads stdin) on QUEUE; prints the id.

    A task's job is JSON: '{"task": "myapp.send_email", "args": {"to": "a@b.c"}}';
    with --app MODULE:APP it gets that task's own options, as task.defer() would.
    """
    if payload == "-":
        payload = sys.stdin.read()
    stamps: QueueOpts | None = None
    if app_spec is not None:
        app = load_app(app_spec)
        stamps = _task_stamps(app, app_spec, queue, payload)
        _bind_app(ctx, app, url, schema)
        url, schema = app.url, app.schema
    elif (called := _called_task(payload)) is not None:
        click.echo(
            f"note: PAYLOAD calls task {called!r} but no --app is given, so queue "
            f"{queue!r}'s default options apply, not the task's own (max attempts, "
            "visibility timeout, retry base); pass --app MODULE:APP to apply them",
            err=True,
        )
    when: datetime | None = None
    if run_at is not None:
        try:
            when = datetime.fromisoformat(run_at.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            raise BadInput(
                f"invalid --run-at {run_at!r}: use ISO 8601, e.g. 2030-01-01T09:00Z"
            ) from None
        if when.utcoffset() is None:
            raise BadInput(f"invalid --run-at {run_at!r}: add a time zone, e.g. {run_at}Z")

    try:
        opts = EnqueueOpts(
            priority=priority,
            delay_s=delay,
            run_at=when,
            expires_in_s=expires_in,
            max_attempts=max_attempts,
            dedupe_key=dedupe_key,
            dedupe_window_s=dedupe_window,
            partition_key=partition_key,
            debounce_key=debounce_key,
            debounce_s=debounce,
        )
    except InvalidArgumentError as e:
        raise BadInput(_cli_names(_one_line(e))) from None

    async def go() -> int:
        async with await _open(ctx, url, schema, create=True) as store:
            return await store.queue(queue, stamps).enqueue(payload, opts)

    click.echo(_run(go()))


# API parameter -> the CLI option that sets it, for messages a CLI user can act on
_CLI_OPTIONS = {
    "delay_s": "--delay",
    "expires_in_s": "--expires-in",
    "max_attempts": "--max-attempts",
    "priority": "--priority",
    "run_at": "--run-at",
    "dedupe_window_s": "--dedupe-window",
    "dedupe_key": "--dedupe-key",
    "partition_key": "--partition-key",
    "debounce_key": "--debounce-key",
    "debounce_s": "--debounce",
}


def _cli_names(message: str) -> str:
    """``message`` with API parameter names replaced by the CLI options that set them."""
    for name, option in _CLI_OPTIONS.items():
        message = re.sub(rf"\b{name}\b", option, message)
    return message


def _called_task(payload: str) -> str | None:
    """The task a payload calls, if it is a task call."""
    try:
        name, _ = decode_call(payload.encode("utf-8", "surrogatepass"))
    except BadCall:
        return None
    return name


def _task_stamps(app: App, app_spec: str, queue: str, payload: str) -> QueueOpts:
    """The options of the task PAYLOAD calls (its arguments checked); bad input otherwise."""
    try:
        name, arguments = decode_call(payload.encode("utf-8", "surrogatepass"))
    except BadCall as e:
        raise BadInput(f"with --app, PAYLOAD must be a task call: {_one_line(e)}") from None
    task = app.tasks.get(name)
    if task is None:
        known = ", ".join(sorted(app.tasks)) or "none"
        raise BadInput(f"app {app_spec!r} has no task {name!r} (its tasks: {known})")
    if task.queue != queue:
        raise BadInput(f"task {name!r} runs on queue {task.queue!r}, not {queue!r}")
    try:
        task.call_arguments(arguments)
    except BadCall as e:
        raise BadInput(f"PAYLOAD does not fit task {name!r}: {_one_line(e)}") from None
    return task.opts


@click.command()
@_json_option
@_store_options
@click.pass_context
def stats(ctx: click.Context, as_json: bool, url: str | None, schema: str | None) -> None:
    """Per queue: pending, delayed, processing, dead, and the oldest pending job's age."""

    async def go() -> Any:
        async with await _open(ctx, url, schema) as store:
            admin = store.admin()
            return await admin.stats(), {i.queue: i for i in await admin.queues()}

    found, infos = _run(go())
    if as_json:
        render.print_json([render.stats_json(s, infos.get(s.queue)) for s in found])
        return
    out = _out()
    if not found:
        out.print("no jobs in the store")
        return
    out.print(render.stats_table(found, infos))


@click.command()
@click.option(
    "--gone-after",
    type=click.FloatRange(min=0.001),
    default=GONE_AFTER_S,
    show_default=True,
    help="Seconds without a heartbeat after which a worker is shown as gone.",
)
@_json_option
@_store_options
@click.pass_context
def workers(
    ctx: click.Context, gone_after: float, as_json: bool, url: str | None, schema: str | None
) -> None:
    """Registered workers: host, pid, queues, running/concurrency, last heartbeat."""

    async def go() -> Any:
        async with await _open(ctx, url, schema) as store:
            return await store.admin().workers(gone_after)

    found = _run(go())
    if as_json:
        render.print_json([render.worker_json(w) for w in found])
        return
    out = _out()
    if not found:
        out.print("no workers registered")
        return
    out.print(render.workers_table(found))


@click.command()
@click.option("--queue", "-q", "queues", multiple=True, help="Queue to sweep [every queue].")
@click.option(
    "--retention",
    type=click.FloatRange(min=0),
    default=None,
    help="Also purge dead jobs older than this many seconds.",
)
@_store_options
@click.pass_context
def sweep(
    ctx: click.Context,
    queues: tuple[str, ...],
    retention: float | None,
    url: str | None,
    schema: str | None,
) -> None:
    """Dead-letter expired jobs (and purge old dead ones with --retention)."""
    from alkstore.core.options import QueueOpts

    async def go() -> list[tuple[str, int, int]]:
        async with await _open(ctx, url, schema) as store:
            names = list(queues) or [s.queue for s in await store.admin().stats()]
            opts = QueueOpts(dead_letter_retention_s=retention)
            done = []
            for name in names:
                result = await store.queue(name, opts).sweep_expired()
                done.append((name, result.expired, result.purged))
            return done

    done = _run(go())
    out = _out()
    if not done:
        out.print("no queues to sweep")
    for name, expired, purged in done:
        out.print(f"{name}: {expired} expired, {purged} purged")
