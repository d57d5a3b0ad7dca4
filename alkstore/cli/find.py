"""``alkstore jobs find`` and ``alkstore jobs bulk``: search by filter, act on every match.

The filter is the language of ``core/filters.py``, one term per argument::

    alkstore jobs find queue:emails state:dead error:timeout
    alkstore jobs bulk retry queue:emails state:dead error:timeout          # dry run
    alkstore jobs bulk retry queue:emails state:dead error:timeout --yes    # apply
    alkstore jobs bulk-resume 7        # finish an interrupted action
    alkstore jobs actions              # the audit: who did what, when, to how many
"""

from __future__ import annotations

import getpass
import socket
import time
from typing import Any

import click
from rich.markup import escape

from alkstore.bulk import BATCH_DEFAULT, BulkAction, BulkPreview, JobPage
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
from alkstore.cli.jobs import jobs
from alkstore.core.bulk import BULK_ACTIONS
from alkstore.core.filters import JobFilter, parse_filter
from alkstore.errors import InvalidArgumentError

__all__ = ["jobs_actions", "jobs_bulk", "jobs_bulk_resume", "jobs_find"]

_TERMS_HELP = (
    "TERMS: queue:NAME[,NAME] task:NAME state:pending|delayed|processing|dead "
    "worker:ID error:TEXT args.PATH=VALUE args.PATH~VALUE payload.PATH=VALUE "
    "created>WHEN created<WHEN run_at>WHEN died>WHEN (WHEN: ISO-8601 or -15m, -2h, -7d)."
)


def _filter(terms: tuple[str, ...]) -> JobFilter:
    try:
        return parse_filter(list(terms), now=time.time())
    except InvalidArgumentError as e:
        raise BadInput(_one_line(e)) from None


def _actor() -> str:
    try:
        user = getpass.getuser()
    except (OSError, KeyError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def _action_json(a: BulkAction) -> dict[str, Any]:
    out = a._asdict()
    for name in ("created_at", "updated_at", "finished_at"):
        value = out[name]
        out[name] = None if value is None else value.isoformat()
    out["finished"] = a.finished
    return out


def _action_line(a: BulkAction) -> str:
    state = "done" if a.finished else f"at {a.phase} id {a.after_id}"
    arg = f" priority={a.priority}" if a.priority is not None else ""
    arg += f" to={a.to_queue}" if a.to_queue is not None else ""
    return escape(
        f"action {a.id}: {a.action}{arg} [{a.filter}] by {a.actor} at "
        f"{a.created_at:%Y-%m-%d %H:%M:%S}Z: {a.done}/{a.matched} ({state})"
    )


@jobs.command("find", epilog=_TERMS_HELP)
@click.argument("terms", nargs=-1)
@click.option("--after", type=click.IntRange(0), default=None, help="The next page: ids above.")
@click.option(
    "--limit", type=click.IntRange(1, 1000), default=50, show_default=True, help="Page size."
)
@_json_option
@_store_options
@click.pass_context
def jobs_find(
    ctx: click.Context,
    terms: tuple[str, ...],
    after: int | None,
    limit: int,
    as_json: bool,
    url: str | None,
    schema: str | None,
) -> None:
    """Jobs (live and dead) matching every TERM, in id order, one page at a time."""
    where = _filter(terms)

    async def go() -> JobPage:
        async with await _open(ctx, url, schema) as store:
            return await store.admin().find(where, after=after, limit=limit)

    page = _run(go())
    if as_json:
        render.print_json(
            {"jobs": [render.job_json(j) for j in page.jobs], "next_after": page.after}
        )
        return
    more = f" (next page: --after {page.after})" if page.after is not None else ""
    title = escape(f"[{where.text() or 'every job'}]: {len(page.jobs)} job(s){more}")
    _out().print(render.job_table(page.jobs, title))


@jobs.command("bulk", epilog=_TERMS_HELP)
@click.argument("action", type=click.Choice(BULK_ACTIONS))
@click.argument("terms", nargs=-1)
@click.option("--priority", type=int, default=None, help="The new priority (action priority).")
@click.option("--to", "to_queue", default=None, help="The target queue (action move).")
@click.option("--yes", is_flag=True, help="Apply it (without: a dry run, the default).")
@click.option("--dry-run", is_flag=True, help="Only count and show a sample (the default).")
@click.option(
    "--batch",
    type=click.IntRange(1, 10_000),
    default=BATCH_DEFAULT,
    show_default=True,
    help="Jobs per batch (one short transaction each).",
)
@click.option("--actor", default=None, help="Who, for the audit row [user@host].")
@_json_option
@_store_options
@click.pass_context
def jobs_bulk(
    ctx: click.Context,
    action: str,
    terms: tuple[str, ...],
    priority: int | None,
    to_queue: str | None,
    yes: bool,
    dry_run: bool,
    batch: int,
    actor: str | None,
    as_json: bool,
    url: str | None,
    schema: str | None,
) -> None:
    """ACTION (retry, cancel, delete, priority, move) on every job matching the TERMS.

    retry: dead jobs back to pending with a fresh budget, delayed jobs due now;
    cancel: delete live jobs (a running one is stopped); delete: delete dead jobs;
    priority: set --priority of waiting and dead jobs; move: waiting and dead jobs
    to queue --to. A dry run unless --yes; applied in batches, resumable."""
    if yes and dry_run:
        raise BadInput("give --yes or --dry-run, not both")
    if not terms:
        raise BadInput("give at least one filter term (a bulk action on every job is refused)")
    where = _filter(terms)
    who = actor or _actor()

    async def preview() -> BulkPreview:
        async with await _open(ctx, url, schema) as store:
            return (
                await store.admin()
                .bulk()
                .preview(action, where, priority=priority, to_queue=to_queue)
            )

    async def apply() -> BulkAction:
        async with await _open(ctx, url, schema) as store:
            ops = store.admin().bulk()
            started = await ops.start(
                action, where, actor=who, priority=priority, to_queue=to_queue
            )
            if not as_json:
                _out().print(_action_line(started))
            return await ops.run(started.id, batch=batch, on_batch=_progress(as_json))

    if not yes:
        shown = _run(preview())
        if as_json:
            render.print_json(
                {
                    "dry_run": True,
                    "action": action,
                    "filter": where.text(),
                    "count": shown.count,
                    "sample": [render.job_json(j) for j in shown.sample],
                }
            )
            return
        title = escape(f"dry run: {action} would touch {shown.count} job(s) [{where.text()}]")
        _out().print(render.job_table(shown.sample, title))
        _out().print("nothing changed; add --yes to apply")
        return
    done = _run(apply())
    if as_json:
        render.print_json(_action_json(done))
    else:
        _out().print(_action_line(done))


def _progress(quiet: bool) -> Any:
    last = [0.0]

    def show(a: BulkAction) -> None:
        now = time.monotonic()
        if quiet or a.finished or now - last[0] < 1.0:
            return
        last[0] = now
        _out().print(f"  {a.done}/{a.matched} done")

    return show


@jobs.command("bulk-resume")
@click.argument("action_id", type=click.IntRange(1))
@click.option(
    "--batch",
    type=click.IntRange(1, 10_000),
    default=BATCH_DEFAULT,
    show_default=True,
    help="Jobs per batch (one short transaction each).",
)
@_json_option
@_store_options
@click.pass_context
def jobs_bulk_resume(
    ctx: click.Context,
    action_id: int,
    batch: int,
    as_json: bool,
    url: str | None,
    schema: str | None,
) -> None:
    """Run an interrupted bulk action to its end, from where its last batch stopped."""

    async def go() -> BulkAction:
        async with await _open(ctx, url, schema) as store:
            ops = store.admin().bulk()
            if await ops.get(action_id) is None:
                raise Failed(f"no bulk action {action_id}")
            return await ops.run(action_id, batch=batch, on_batch=_progress(as_json))

    done = _run(go())
    if as_json:
        render.print_json(_action_json(done))
    else:
        _out().print(_action_line(done))


@jobs.command("actions")
@click.option(
    "--limit",
    type=click.IntRange(1, 1000),
    default=20,
    show_default=True,
    help="At most this many actions.",
)
@_json_option
@_store_options
@click.pass_context
def jobs_actions(
    ctx: click.Context, limit: int, as_json: bool, url: str | None, schema: str | None
) -> None:
    """The bulk actions' audit, newest first: who, when, the filter, how many."""

    async def go() -> list[BulkAction]:
        async with await _open(ctx, url, schema) as store:
            return await store.admin().bulk().history(limit=limit)

    found = _run(go())
    if as_json:
        render.print_json([_action_json(a) for a in found])
        return
    for a in found:
        _out().print(_action_line(a))
    if not found:
        _out().print("no bulk actions yet")
