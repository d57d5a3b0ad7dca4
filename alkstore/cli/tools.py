"""The commands that run a larger tool of their own: ``dashboard`` (the web server),
``demo`` (producer and worker processes) and ``copy`` (a whole store into another)."""

from __future__ import annotations

import sys
from typing import Any

import click

from alkstore.cli.base import BadInput, Failed, _one_line, _out, _run, _store_options, _target
from alkstore.connect import connect
from alkstore.core.urls import redact_url
from alkstore.errors import InvalidArgumentError

__all__ = ["copy_command", "dashboard", "demo"]


@click.command()
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


@click.command()
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


@click.command("copy")
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
