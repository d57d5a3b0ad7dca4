"""``alkstore queues``: list, pause, resume and limit queues."""

from __future__ import annotations

from typing import Any

import click

from alkstore.cli import render
from alkstore.cli.base import _json_option, _open, _out, _run, _store_options

__all__ = ["queues"]


@click.group()
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
