"""The ``alkstore`` commands.

The store comes from ``--url`` (on the group or the command), else
``$ALKSTORE_URL``, else ``sqlite:///alkstore.db``; the PostgreSQL schema from
``--schema``, else ``$ALKSTORE_SCHEMA``, else ``alkstore``. Bad input and an
unreachable store print one ``Error: …`` line and exit non-zero (2 for bad
input, 1 otherwise); ``ALKSTORE_DEBUG=1`` shows tracebacks.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import re
import sys
import traceback
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from alkstore.admin import GONE_AFTER_S, JOB_STATES
from alkstore.app import App
from alkstore.cli import render, worker_options
from alkstore.cli.logs import setup_logging
from alkstore.cli.store_path import absolute_url, missing_default_store
from alkstore.connect import connect
from alkstore.core.names import check_name
from alkstore.core.options import EnqueueOpts, QueueOpts
from alkstore.errors import AlkstoreError, InvalidArgumentError, InvalidNameError, PayloadError
from alkstore.store import Store
from alkstore.tasks import BadCall, decode_call
from alkstore.worker.runtime import Worker, catch_early_signals, redact_url

__all__ = ["cli", "main"]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


class BadInput(click.ClickException):
    """Bad input on the command line: one line, exit 2."""

    exit_code = 2


class Failed(click.ClickException):
    """The command could not do its job (no such job, store unreachable): one line, exit 1."""

    exit_code = 1


def _debug() -> bool:
    return os.environ.get("ALKSTORE_DEBUG", "") not in ("", "0")


def _one_line(error: BaseException) -> str:
    text = str(error) or type(error).__name__
    return " ".join(text.split())


def _store_options(fn: F) -> F:
    """``--url`` and ``--schema`` on a command (overriding the group's)."""
    fn = click.option("--schema", default=None, help="PostgreSQL schema [ALKSTORE_SCHEMA].")(fn)
    fn = click.option("--url", default=None, help="Store URL [ALKSTORE_URL].")(fn)
    return fn


def _target(ctx: click.Context, url: str | None, schema: str | None) -> tuple[str | None, str]:
    group = ctx.find_root().obj or {}
    url = url or group.get("url")
    schema = schema or group.get("schema") or os.environ.get("ALKSTORE_SCHEMA") or "alkstore"
    return url, schema


def _bind_app(ctx: click.Context, app: App, url: str | None, schema: str | None) -> None:
    """Point ``app`` at the command line's store, as every command taking MODULE:APP does:
    ``--url`` (command, then group), else the app's own URL, else ``$ALKSTORE_URL``,
    else the default; ``--schema``, else ``$ALKSTORE_SCHEMA``, else the app's schema."""
    group = ctx.find_root().obj or {}
    url = url or group.get("url")
    schema = schema or group.get("schema") or os.environ.get("ALKSTORE_SCHEMA")
    if url is not None:
        app.url = url
    if schema is not None:
        app.schema = schema


def _run(coro: Awaitable[T]) -> T:
    """Run the command's coroutine; translate errors to one line."""

    async def wrapped() -> T:
        return await coro

    try:
        return asyncio.run(wrapped())
    except click.ClickException:
        raise
    except (InvalidNameError, InvalidArgumentError, PayloadError) as e:
        if _debug():
            raise
        raise BadInput(_one_line(e)) from None
    except AlkstoreError as e:
        if _debug():
            raise
        cause = e.__cause__
        detail = f" ({_one_line(cause)})" if cause is not None and str(cause) not in str(e) else ""
        raise Failed(_one_line(e) + detail) from None
    except (OSError, ValueError) as e:
        if _debug():
            raise
        raise Failed(_one_line(e)) from None


async def _open(
    ctx: click.Context, url: str | None, schema: str | None, *, create: bool = False
) -> Store:
    """The command's store. Only ``migrate`` and ``enqueue`` (``create``) may create
    the file, schema or tables; every other command opens with ``migrate=off``, so
    a misspelt ``--url`` or ``--schema`` is an error naming it, not an empty store."""
    url, schema = _target(ctx, url, schema)
    if create:
        return await connect(url, schema=schema)
    return await connect(url, schema=schema, migrate="off")


# API parameter -> the CLI option that sets it, for messages a CLI user can act on
_CLI_OPTIONS = {
    "delay_s": "--delay",
    "expires_in_s": "--expires-in",
    "max_attempts": "--max-attempts",
    "priority": "--priority",
    "run_at": "--run-at",
}


def _cli_names(message: str) -> str:
    """``message`` with API parameter names replaced by the CLI options that set them."""
    for name, option in _CLI_OPTIONS.items():
        message = re.sub(rf"\b{name}\b", option, message)
    return message


def _job_id(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise BadInput(f"invalid job id {text!r}: expected a positive integer") from None
    if not 1 <= value <= 2**63 - 1:
        raise BadInput(f"invalid job id {text!r}: expected a positive integer")
    return value


def _json_option(fn: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(fn)


def _out() -> Any:
    return render.console()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--url", default=None, help="Store URL [ALKSTORE_URL, else sqlite:///alkstore.db].")
@click.option("--schema", default=None, help="PostgreSQL schema [ALKSTORE_SCHEMA, else alkstore].")
@click.version_option(package_name="alkstore")
@click.pass_context
def cli(ctx: click.Context, url: str | None, schema: str | None) -> None:
    """alkstore: a durable job queue on SQLite or PostgreSQL."""
    ctx.obj = {"url": url, "schema": schema}


@cli.command()
@_store_options
@click.pass_context
def migrate(ctx: click.Context, url: str | None, schema: str | None) -> None:
    """Create or upgrade the store's tables (connecting does it too; this is explicit)."""

    async def go() -> str:
        async with await _open(ctx, url, schema, create=True) as store:
            return store.url

    where = redact_url(_run(go()))
    _out().print(f"store {where} is up to date")


@cli.command()
@click.argument("queue")
@click.argument("payload")
@click.option("--priority", type=int, default=None, help="Higher runs first.")
@click.option("--delay", type=float, default=None, help="Seconds before it is claimable.")
@click.option("--run-at", default=None, help="ISO 8601 time with a zone, e.g. 2030-01-01T09:00Z.")
@click.option("--expires-in", type=float, default=None, help="Seconds until it expires.")
@click.option("--max-attempts", type=int, default=None, help="Attempt budget of this job.")
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
        )
    except InvalidArgumentError as e:
        raise BadInput(_cli_names(_one_line(e))) from None

    async def go() -> int:
        async with await _open(ctx, url, schema, create=True) as store:
            return await store.queue(queue, stamps).enqueue(payload, opts)

    click.echo(_run(go()))


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


def _import_app_module(module_name: str, show_traceback: bool) -> Any:
    """Import ``module_name`` (a dotted name, or a path to a ``.py`` file); any failure
    in the user's module is one line naming it (``--traceback`` for the whole)."""
    path = Path(module_name)
    try:
        if module_name.endswith(".py") or os.sep in module_name:
            if not path.is_file():
                raise BadInput(f"cannot import app module {module_name!r}: no such file")
            directory = str(path.resolve().parent)
            if directory not in sys.path:
                sys.path.insert(0, directory)
            return importlib.import_module(path.stem)
        if os.getcwd() not in sys.path and "" not in sys.path:
            sys.path.insert(0, os.getcwd())
        return importlib.import_module(module_name)
    except click.ClickException:
        raise
    except BaseException as e:  # SyntaxError, ImportError, or whatever the module raised
        if isinstance(e, KeyboardInterrupt | SystemExit):
            raise
        if show_traceback or _debug():
            traceback.print_exception(e)
        where = ""
        if isinstance(e, SyntaxError) and e.filename:
            where = f" ({e.filename}, line {e.lineno})"
        detail = f"{type(e).__name__}: {_one_line(e)}{where}"
        hint = "" if show_traceback else " (--traceback shows where)"
        raise BadInput(f"cannot import app module {module_name!r}: {detail}{hint}") from None


def load_app(spec: str, *, show_traceback: bool = False) -> App:
    """``module:attribute`` or ``path/to/file.py:attribute`` (attribute defaults to ``app``)
    naming an :class:`App`."""
    module_name, _, attr = spec.rpartition(":") if ":" in spec else (spec, "", "")
    attr = attr or "app"
    if not module_name:
        raise BadInput(f"invalid app {spec!r}: use module:attribute, e.g. myapp:app")
    module = _import_app_module(module_name, show_traceback)
    app = getattr(module, attr, None)
    if not isinstance(app, App):
        found = "nothing" if app is None else type(app).__name__
        raise BadInput(f"{spec!r} is not an alkstore.App (found {found})")
    return app


@cli.command()
@click.argument("app_spec", metavar="MODULE:APP")
@worker_options.click_options
@click.option(
    "--traceback",
    "show_traceback",
    is_flag=True,
    help="Show the whole traceback when the app module fails to import.",
)
@_store_options
@click.pass_context
def worker(
    ctx: click.Context,
    /,
    app_spec: str,
    show_traceback: bool,
    url: str | None,
    schema: str | None,
    **options: Any,
) -> None:
    """Run MODULE:APP's tasks until SIGTERM/SIGINT (a second signal stops at once).

    MODULE is a dotted module name (the current directory is importable) or a
    path to a .py file: alkstore worker ./shop.py:app.
    """
    catch_early_signals()  # a signal while starting is a clean stop, not a kill
    queues: tuple[str, ...] = options["queue"]
    setup_logging(options["log_level"], options["log_format"])
    app = load_app(app_spec, show_traceback=show_traceback)
    _bind_app(ctx, app, url, schema)
    refused = missing_default_store(app.url)
    if refused is not None:
        raise Failed(refused)
    app.url = absolute_url(app.url)  # logged at start as the file it is, wherever we run
    unknown = [q for q in queues if q not in app.queues]
    if unknown:
        logging.getLogger("alkstore.worker").warning(
            "queue(s) %s have no task in %s; their jobs are retried until a worker knows them",
            ", ".join(unknown),
            app_spec,
        )

    made: list[Worker] = []  # built inside _run, so a bad option is one line too

    async def go() -> int:
        try:
            runner = app.worker(list(queues) or None, **worker_options.worker_kwargs(options))
            made.append(runner)
            return await runner.run()
        finally:
            await app.close()

    code = _run(go())
    if code or any(runner.abandoned_threads for runner in made):
        # a forced stop, or sync handlers still running past the grace period: their
        # jobs were given back, so exit without waiting for (and letting them finish)
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


@cli.group()
def jobs() -> None:
    """List, show, cancel and requeue jobs."""


@jobs.command("list")
@click.argument("queue")
@click.option(
    "--state", type=click.Choice(JOB_STATES), default=None, help="Only jobs in this state."
)
@click.option(
    "--limit",
    type=click.IntRange(1, 10_000),
    default=50,
    show_default=True,
    help="At most this many jobs.",
)
@_json_option
@_store_options
@click.pass_context
def jobs_list(
    ctx: click.Context,
    queue: str,
    state: str | None,
    limit: int,
    as_json: bool,
    url: str | None,
    schema: str | None,
) -> None:
    """Jobs of QUEUE (live and dead), oldest first."""
    try:
        check_name(queue)  # before the store is opened: a bad name is bad input
    except InvalidNameError as e:
        raise BadInput(_one_line(e)) from None

    async def go() -> Any:
        async with await _open(ctx, url, schema) as store:
            return await store.admin().list_jobs(queue, state, limit)

    found = _run(go())
    if as_json:
        render.print_json([render.job_json(job) for job in found])
        return
    title = f"queue {queue}" + (f", {state}" if state else "") + f": {len(found)} job(s)"
    _out().print(render.job_table(found, title))


@cli.command()
@click.argument("app_spec", metavar="MODULE:APP")
@_store_options
@click.pass_context
def schedules(ctx: click.Context, app_spec: str, url: str | None, schema: str | None) -> None:
    """MODULE:APP's periodic schedules with their last and next run."""
    import time

    app = load_app(app_spec)
    if not app.schedules:
        _out().print(f"{app_spec} has no schedules")
        return
    _bind_app(ctx, app, url, schema)  # the app's own URL, as the worker uses

    async def go() -> Any:
        async with await _open(ctx, app.url, app.schema) as store:
            return await store.admin().schedule_marks([s.name for s in app.schedules])

    marks = {name: (tick, job) for name, tick, job in _run(go())}
    _out().print(render.schedules_table(app.schedules, marks, time.time()))


@jobs.command("show")
@click.argument("job_id", metavar="ID")
@click.option("--full", is_flag=True, help="Print a long payload or result whole (not cut).")
@_json_option
@_store_options
@click.pass_context
def jobs_show(
    ctx: click.Context,
    job_id: str,
    full: bool,
    as_json: bool,
    url: str | None,
    schema: str | None,
) -> None:
    """Every field of job ID, live or dead."""
    ident = _job_id(job_id)

    async def go() -> Any:
        async with await _open(ctx, url, schema) as store:
            admin = store.admin()
            return await admin.find_job(ident), await admin.outcome(ident)

    job, outcome = _run(go())
    if job is not None:
        if as_json:
            render.print_json(render.job_json(job))
        else:
            _out().print(render.job_detail(job, full))
    elif outcome is not None:  # finished: only its kept result is left
        if as_json:
            render.print_json(render.outcome_json(outcome))
        else:
            _out().print(render.outcome_detail(outcome, full))
    else:
        raise Failed(f"no job {ident} (a finished job shows only while its result is kept)")


@jobs.command("outcomes")
@click.argument("queue")
@click.option(
    "--limit",
    type=click.IntRange(1, 10_000),
    default=20,
    show_default=True,
    help="At most this many outcomes.",
)
@_json_option
@_store_options
@click.pass_context
def jobs_outcomes(
    ctx: click.Context, queue: str, limit: int, as_json: bool, url: str | None, schema: str | None
) -> None:
    """The latest finished jobs of QUEUE, newest first: kept results and dead jobs."""

    async def go() -> Any:
        async with await _open(ctx, url, schema) as store:
            return await store.admin().outcomes(queue, limit)

    found = _run(go())
    if as_json:
        render.print_json([render.outcome_json(o) for o in found])
        return
    _out().print(render.outcomes_table(found, f"queue {queue}: {len(found)} outcome(s)"))


@jobs.command("cancel")
@click.argument("job_ids", metavar="ID...", nargs=-1, required=True)
@_store_options
@click.pass_context
def jobs_cancel(
    ctx: click.Context, job_ids: tuple[str, ...], url: str | None, schema: str | None
) -> None:
    """Delete each live job ID (pending or processing; a running handler is stopped)."""

    async def one(store: Store, ident: int) -> str:
        job = await store.admin().find_job(ident)
        if job is None:
            raise Failed(f"no job {ident}")
        if job.state == "dead":
            raise Failed(f"job {ident} is dead, not live: nothing to cancel")
        if not await store.queue(job.queue).cancel(ident):
            raise Failed(f"job {ident} finished before it could be cancelled")
        return f"cancelled job {ident} (queue {job.queue})"

    _each_job(ctx, url, schema, job_ids, one)


@jobs.command("requeue")
@click.argument("job_ids", metavar="ID...", nargs=-1, required=True)
@_store_options
@click.pass_context
def jobs_requeue(
    ctx: click.Context, job_ids: tuple[str, ...], url: str | None, schema: str | None
) -> None:
    """Move each dead job ID back to pending, claimable now, with a fresh attempt budget."""

    async def one(store: Store, ident: int) -> str:
        admin = store.admin()
        if not await admin.requeue(ident):
            job = await admin.find_job(ident)
            if job is None:
                raise Failed(f"no job {ident}")
            raise Failed(f"job {ident} is {job.state}, not dead: nothing to requeue")
        job = await admin.find_job(ident)
        where = f"queue {job.queue}, " if job is not None else ""
        budget = f"attempts 0/{job.max_attempts}" if job is not None else "attempts 0"
        return f"requeued job {ident} ({where}pending, {budget})"

    _each_job(ctx, url, schema, job_ids, one)


def _each_job(
    ctx: click.Context,
    url: str | None,
    schema: str | None,
    job_ids: tuple[str, ...],
    act: Callable[[Store, int], Awaitable[str]],
) -> None:
    """Run ``act`` on each job id in turn on one store; print what each did, then fail
    (one line naming every job that could not be done) if any could not."""
    idents = [_job_id(text) for text in job_ids]  # all checked before any is touched

    async def go() -> list[tuple[str, bool]]:
        async with await _open(ctx, url, schema) as store:
            done = []
            for ident in idents:
                try:
                    done.append((await act(store, ident), True))
                except Failed as e:
                    done.append((e.message, False))
            return done

    done = _run(go())
    for line, worked in done:
        if worked:
            _out().print(line)
    errors = [line for line, worked in done if not worked]
    if errors:
        raise Failed("; ".join(errors))


@cli.command()
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


@cli.group()
def queues() -> None:
    """Pause, resume and limit queues (stored in the database, obeyed by every worker)."""


@queues.command("list")
@_json_option
@_store_options
@click.pass_context
def queues_list(ctx: click.Context, as_json: bool, url: str | None, schema: str | None) -> None:
    """Every queue with jobs or settings: paused or active, limits, counts."""

    async def go() -> Any:
        async with await _open(ctx, url, schema) as store:
            return await store.admin().queues()

    found = _run(go())
    if as_json:
        render.print_json([render.queue_json(i) for i in found])
        return
    out = _out()
    if not found:
        out.print("no queues in the store")
        return
    out.print(render.queues_table(found))


async def _set_paused(
    ctx: click.Context, name: str, url: str | None, schema: str | None, paused: bool
) -> None:
    async with await _open(ctx, url, schema) as store:
        queue = store.queue(name)
        await (queue.pause() if paused else queue.resume())


@queues.command("pause")
@click.argument("name")
@_store_options
@click.pass_context
def queues_pause(ctx: click.Context, name: str, url: str | None, schema: str | None) -> None:
    """Stop every worker from claiming from NAME (enqueues are still accepted)."""
    _run(_set_paused(ctx, name, url, schema, True))
    _out().print(f"queue {name} paused")


@queues.command("resume")
@click.argument("name")
@_store_options
@click.pass_context
def queues_resume(ctx: click.Context, name: str, url: str | None, schema: str | None) -> None:
    """Let workers claim from NAME again (wakes them at once)."""
    _run(_set_paused(ctx, name, url, schema, False))
    _out().print(f"queue {name} resumed")


@queues.command("limit")
@click.argument("name")
@click.option("--concurrency", type=int, default=None, help="At most N processing at once.")
@click.option(
    "--partition-concurrency",
    type=int,
    default=None,
    help="At most N processing at once per partition key.",
)
@click.option("--rate", default=None, help="At most COUNT/UNIT claims, e.g. 100/s, 10/m.")
@click.option("--burst", type=int, default=None, help="Claims the rate allows at once [1].")
@_store_options
@click.pass_context
def queues_limit(
    ctx: click.Context,
    name: str,
    concurrency: int | None,
    partition_concurrency: int | None,
    rate: str | None,
    burst: int | None,
    url: str | None,
    schema: str | None,
) -> None:
    """Replace NAME's limits (an option left out means no such limit; none clears all)."""

    async def go() -> Any:
        async with await _open(ctx, url, schema) as store:
            queue = store.queue(name)
            await queue.set_limits(
                concurrency=concurrency,
                partition_concurrency=partition_concurrency,
                rate=rate,
                burst=burst,
            )
            return await queue.info()

    info = _run(go())
    _out().print(f"queue {name}: {render.flow(info)}")


@cli.command()
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


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="Port to serve on (0: any free port).",
)
@click.option(
    "--token",
    default=None,
    envvar="ALKSTORE_DASHBOARD_TOKEN",
    help="Enables actions (requeue, cancel) for who logs in with it "
    "[ALKSTORE_DASHBOARD_TOKEN]; without it the dashboard is read-only. "
    "Required beyond loopback, where every page needs it.",
)
@_store_options
@click.pass_context
def dashboard(
    ctx: click.Context,
    host: str,
    port: int,
    token: str | None,
    url: str | None,
    schema: str | None,
) -> None:
    """Serve the web dashboard (queues, jobs, dead letters, workers, /metrics)."""
    import uvicorn

    from alkstore.dashboard import bind_plan, create_app

    url, schema_name = _target(ctx, url, schema)
    if token is not None and len(token) < 8:
        raise BadInput("--token must be at least 8 characters")
    try:  # loopback: only loopback Host names; beyond: a token, and every page needs it
        hosts, private = bind_plan(host, token)
    except InvalidArgumentError as e:
        raise BadInput(str(e)) from None
    app = create_app(
        url, schema=schema_name, token=token, allowed_hosts=hosts, login_to_read=private
    )
    mode = "actions enabled with the token" if token else "read-only (no --token)"
    mode = "every page needs the token" if private else mode
    click.echo(f"alkstore dashboard on http://{host}:{port}/ ({mode})", err=True)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    try:
        uvicorn.Server(config).run()
    except (OSError, SystemExit) as e:
        raise Failed(f"dashboard stopped: {_one_line(e)}") from None


@cli.command()
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


@cli.command()
@click.option(
    "--jobs",
    "count",
    type=click.IntRange(10, 1_000_000),
    default=3000,
    show_default=True,
    help="No-op jobs the producer enqueues.",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 32),
    default=3,
    show_default=True,
    help="Worker processes.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, 256),
    default=16,
    show_default=True,
    help="Jobs each worker runs at once.",
)
@click.option("--keep", is_flag=True, help="Keep the demo database afterwards.")
def demo(count: int, workers: int, concurrency: int, keep: bool) -> None:
    """A producer and a few workers, in separate processes, on a fresh SQLite file."""
    from alkstore.cli.demo import run_demo

    code = run_demo(count=count, workers=workers, concurrency=concurrency, keep=keep)
    sys.exit(code)


@cli.command("copy")
@click.argument("src_url", metavar="SRC_URL")
@click.argument("dst_url", metavar="DST_URL")
@click.option(
    "--src-schema", default=None, help="PostgreSQL schema of the source [--schema, else alkstore]."
)
@click.option(
    "--dst-schema",
    default=None,
    help="PostgreSQL schema of the destination [--schema, else alkstore].",
)
@click.option("--force", is_flag=True, help="Copy even while workers are registered.")
@click.pass_context
def copy_command(
    ctx: click.Context,
    src_url: str,
    dst_url: str,
    src_schema: str | None,
    dst_schema: str | None,
    force: bool,
) -> None:
    """Copy a whole store into an empty one (SQLite <-> PostgreSQL), then verify it.

    Jobs keep their ids, stamps, attempts and errors (a claimed job arrives
    pending again); dead letters, results, dedupe windows, schedule marks and
    queue settings come along. Stop producers and workers first. An
    interrupted copy can be rerun: rows already copied are skipped.
    """
    _, src_schema = _target(ctx, src_url, src_schema)
    _, dst_schema = _target(ctx, dst_url, dst_schema)
    if (src_url, src_schema) == (dst_url, dst_schema):
        raise BadInput("SRC_URL and DST_URL name the same store")
    out = _out()

    async def go() -> Any:
        from alkstore.cli.copying import copy_with_progress

        async with (
            await connect(src_url, schema=src_schema) as source,
            await connect(dst_url, schema=dst_schema) as dest,
        ):
            return await copy_with_progress(source, dest, force=force, console=out)

    try:
        report = _run(go())
    except KeyboardInterrupt:
        raise Failed(
            "interrupted: run the same command again to finish (copied rows are skipped)"
        ) from None
    from alkstore.cli.copying import report_table

    out.print(report_table(report))
    if not report.ok:
        raise Failed("the copy does not match its source (see the table above)")
    out.print(
        f"copied {redact_url(src_url)} to {redact_url(dst_url)}; "
        f"new job ids start after {report.last_id}"
    )


def main(argv: list[str] | None = None) -> None:
    """The console entry point."""
    try:
        cli.main(args=argv, prog_name="alkstore", standalone_mode=True)
    except KeyboardInterrupt:  # pragma: no cover - interactive
        sys.exit(130)
