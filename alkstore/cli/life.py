"""A job's life on the command line (#24): the attempt history and progress that
``alkstore jobs show`` prints under the job, and ``alkstore jobs signal``."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from alkstore.cli import render
from alkstore.cli.base import BadInput, Failed, _one_line, _open, _out, _run, _store_options
from alkstore.core.life import Attempt, Progress
from alkstore.errors import InvalidArgumentError, PayloadError
from alkstore.store import Store

__all__ = ["attempts_table", "jobs_signal", "life_of", "progress_text"]


async def life_of(store: Store, queue: str, job_id: int) -> tuple[list[Attempt], Progress | None]:
    """The job's attempts and latest progress (one queue's reads)."""
    q = store.queue(queue)
    return await q.attempts(job_id), await q.progress(job_id)


def progress_text(progress: Progress) -> str:
    """``[#####-----] 50% row 5`` for a fraction, ``1234 rows`` for a count."""
    value = progress.value
    if value <= 1:
        filled = round(value * 20)
        head = f"[{'#' * filled}{'-' * (20 - filled)}] {value * 100:.0f}%"
    else:
        head = f"{value:g}"
    tail = f" {progress.message}" if progress.message else ""
    return f"{head}{tail} (attempt {progress.attempt}, {render.when(progress.updated_at)})"


def attempts_table(attempts: list[Attempt], full: bool = False) -> Table:
    """One row per finished attempt: number, outcome, worker, host, times, error."""
    table = Table(title="attempts", title_justify="left")
    for column in ("#", "outcome", "worker", "host", "claimed", "took", "error"):
        table.add_column(column, overflow="fold")
    now = datetime.now(UTC)
    for a in attempts:
        took = (
            f"{(a.finished_at - a.claimed_at).total_seconds():.3f}s"
            if a.claimed_at is not None and a.finished_at is not None
            else "-"
        )
        error = a.error or "-"
        if not full:
            error = error.splitlines()[0] if error else "-"
        style = {"success": "green", "snoozed": "cyan"}.get(a.outcome, "red")
        table.add_row(
            str(a.number),
            f"[{style}]{a.outcome}[/{style}]",
            escape(a.worker_id or "-"),
            escape(a.host or "-"),
            render.when(a.claimed_at, now),
            took,
            escape(error),
        )
    return table


def life_json(attempts: list[Attempt], progress: Progress | None) -> dict[str, Any]:
    return {
        "attempt_history": [a.as_dict() for a in attempts],
        "progress": None if progress is None else progress.as_dict(),
    }


@click.command("signal")
@click.argument("job_id", metavar="ID", type=click.IntRange(1, 2**63 - 1))
@click.argument("name")
@click.option("--payload", default="null", show_default=True, help="The payload, as JSON.")
@_store_options
@click.pass_context
def jobs_signal(
    ctx: click.Context,
    job_id: int,
    name: str,
    payload: str,
    url: str | None,
    schema: str | None,
) -> None:
    """Send signal NAME to job ID: a handler waiting in wait_for(NAME) resumes with
    the payload."""
    ident = job_id
    try:
        value = json.loads(payload)
    except ValueError as e:
        raise BadInput(f"--payload is not JSON: {e}") from None

    async def go() -> bool:
        async with await _open(ctx, url, schema) as store:
            return await store.signal(ident, name, value)

    try:
        sent = _run(go())
    except (InvalidArgumentError, PayloadError) as e:
        raise BadInput(_one_line(e)) from None
    if not sent:
        raise Failed(f"no live job {ident}: signal {name!r} not sent")
    _out().print(f"signal {name!r} sent to job {ident}")
