"""``alkstore jobs``: list, show, cancel and requeue jobs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import click

from alkstore.admin import JOB_STATES
from alkstore.cli import render
from alkstore.cli.base import (
    BadInput,
    Failed,
    _json_option,
    _one_line,
    _open,
    _out,
    _run,
    _store_options,
)
from alkstore.cli.life import attempts_table, life_json, life_of, progress_text
from alkstore.core.names import check_name
from alkstore.errors import InvalidNameError
from alkstore.store import Store

__all__ = ["jobs"]


def _job_id(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise BadInput(f"invalid job id {text!r}: expected a positive integer") from None
    if not 1 <= value <= 2**63 - 1:
        raise BadInput(f"invalid job id {text!r}: expected a positive integer")
    return value


@click.group()
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
@click.option(
    "--partition-key",
    default=None,
    metavar="K",
    help="Only this partition key's pending and processing jobs (read by key from the "
    "indexes that hold them; blocked and dead jobs have none: see jobs find).",
)
@_json_option
@_store_options
@click.pass_context
def jobs_list(
    ctx: click.Context,
    queue: str,
    state: str | None,
    limit: int,
    partition_key: str | None,
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
            return await store.admin().list_jobs(queue, state, limit, partition_key=partition_key)

    found = _run(go())
    if as_json:
        render.print_json([render.job_json(job) for job in found])
        return
    title = (
        f"queue {queue}"
        + (f", partition key {partition_key}" if partition_key is not None else "")
        + (f", {state}" if state else "")
        + f": {len(found)} job(s)"
    )
    _out().print(render.job_table(found, title))


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
            job, outcome = await admin.find_job(ident), await admin.outcome(ident)
            found = job or outcome
            life = None if found is None else await life_of(store, found.queue, ident)
            return job, outcome, life

    job, outcome, life = _run(go())
    if job is not None:
        if as_json:
            render.print_json({**render.job_json(job), **life_json(*life)})
        else:
            _out().print(render.job_detail(job, full))
    elif outcome is not None:  # finished: only its kept result is left
        if as_json:
            render.print_json({**render.outcome_json(outcome), **life_json(*life)})
        else:
            _out().print(render.outcome_detail(outcome, full))
    else:
        raise Failed(f"no job {ident} (a finished job shows only while its result is kept)")
    attempts, progress = life
    if not as_json and progress is not None:
        _out().print(f"progress: {progress_text(progress)}", markup=False, highlight=False)
    if not as_json and attempts:
        _out().print(attempts_table(attempts, full))


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
