"""``alkstore worker`` (run MODULE:APP's tasks) and ``alkstore schedules`` (its
periodic schedules)."""

from __future__ import annotations

import gc
import logging
import os
import sys
from pathlib import Path
from typing import Any

import click

from alkstore.cli import supervisor, worker_options
from alkstore.cli.apps import load_app
from alkstore.cli.base import BadInput, Failed, _bind_app, _open, _out, _run, _store_options
from alkstore.cli.logs import setup_logging
from alkstore.cli.loops import loop_factory
from alkstore.cli.store_path import absolute_url, missing_default_store
from alkstore.connect import import_engine
from alkstore.errors import AlkstoreError
from alkstore.worker.recycle import parse_size
from alkstore.worker.runtime import Worker, catch_early_signals

__all__ = ["schedules", "worker"]


@click.command()
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
    queues: tuple[str, ...] = options["queue"]
    setup_logging(options["log_level"], options["log_format"])
    try:
        new_loop = loop_factory(options["loop"])  # before the app: a missing uvloop fails fast
    except AlkstoreError as e:
        raise BadInput(str(e)) from None
    if supervisor.wanted(options):  # --max-jobs/--max-memory/--reload: a fresh child each time
        _check_recycle(options)
        app_file = app_spec.rpartition(":")[0]
        watch = [Path(app_file).resolve().parent] if app_file.endswith(".py") else []
        sys.exit(supervisor.supervise(reload=options["reload"], watch=watch))
    catch_early_signals()  # a signal while starting is a clean stop, not a kill
    supervisor.follow_supervisor()
    app = load_app(app_spec, show_traceback=show_traceback)
    _bind_app(ctx, app, url, schema)
    refused = missing_default_store(app.url)
    if refused is not None:
        raise Failed(refused)
    app.url = absolute_url(app.url)  # logged at start as the file it is, wherever we run
    _import_engine_frozen(app.url)
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

    code = _run(go(), new_loop)
    # The store is closed and the worker done: spare the exit its full collection,
    # which would walk every object the process made only to free none (~30 ms of
    # a stop; the objects go with the process, atexit handlers still run).
    gc.freeze()
    if code or any(runner.abandoned_threads for runner in made):
        # a forced stop, or sync handlers still running past the grace period: their
        # jobs were given back, so exit without waiting for (and letting them finish)
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _import_engine_frozen(url: str | None) -> None:
    """Import the store's engine with the collector held off, then freeze what is alive,
    as the worker's own start does (``worker/gcpace.py``), only before the engine's
    imports instead of after them: psycopg's tens of thousands of objects then cost no
    collector pass (~4.5 ms of a PostgreSQL worker's start). Pausing alone would not
    do: the first allocation after it collects them all at once."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        import_engine(url)
    finally:
        gc.freeze()
        if collecting:
            gc.enable()


def _check_recycle(options: dict[str, Any]) -> None:
    """Refuse a bad --max-memory in the supervisor, not in each child."""
    if options["max_memory"] is not None:
        try:
            parse_size(options["max_memory"])
        except AlkstoreError as e:
            raise Failed(str(e)) from None


@click.command()
@click.argument("app_spec", metavar="MODULE:APP")
@_store_options
@click.pass_context
def schedules(ctx: click.Context, app_spec: str, url: str | None, schema: str | None) -> None:
    """MODULE:APP's periodic schedules with their last and next run."""
    import time

    from alkstore.cli import render

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
