"""``alkstore queues fair`` and ``alkstore queues aging``: fairness and aging, stored in
the database like the limits (registered on the ``queues`` group in ``commands.py``)."""

from __future__ import annotations

from typing import Any

import click

from alkstore.cli.base import BadInput, _open, _out, _run, _store_options
from alkstore.core.fair import check_weights
from alkstore.core.options import check_positive
from alkstore.errors import InvalidArgumentError

__all__ = ["queues_aging", "queues_fair"]


def _weights(pairs: tuple[str, ...]) -> dict[str, float] | None:
    if not pairs:
        return None
    weights: dict[str, float] = {}
    for pair in pairs:
        key, sep, value = pair.rpartition("=")
        try:
            weights[key] = float(value) if sep else float("nan")
        except ValueError:
            weights[key] = float("nan")
        if not sep or weights[key] != weights[key]:
            raise BadInput(f"invalid --weight {pair!r}: use KEY=WEIGHT, e.g. --weight acme=3")
    try:  # checked before the store is opened
        return check_weights(weights)
    except InvalidArgumentError as e:
        raise BadInput(str(e)) from None


def _describe(fair: bool, weights: dict[str, float]) -> str:
    if not fair:
        return "plain claim order (fairness off)"
    shown = ", ".join(f"{k}={w:g}" for k, w in sorted(weights.items()))
    return "fair across partition keys" + (f" (weights {shown})" if shown else "")


@click.command("fair")
@click.argument("name")
@click.option("--off", is_flag=True, help="Back to the plain claim order.")
@click.option(
    "--weight",
    "weights",
    multiple=True,
    metavar="KEY=WEIGHT",
    help="A partition key's weight (repeatable; replaces the stored weights) [1].",
)
@click.option("--clear-weights", is_flag=True, help="Drop every stored weight.")
@_store_options
@click.pass_context
def queues_fair(
    ctx: click.Context,
    name: str,
    off: bool,
    weights: tuple[str, ...],
    clear_weights: bool,
    url: str | None,
    schema: str | None,
) -> None:
    """Claim NAME round-robin across its partition keys (every worker, every host)."""
    wanted = _weights(weights)
    if clear_weights:
        if wanted:
            raise BadInput("give --weight or --clear-weights, not both")
        wanted = {}

    async def go() -> Any:
        async with await _open(ctx, url, schema) as store:
            queue = store.queue(name)
            await queue.set_fair(not off, weights=wanted)
            return (await queue.settings()).fair, await queue.fair_weights()

    fair, stored = _run(go())
    _out().print(f"queue {name}: {_describe(fair, stored)}")


@click.command("aging")
@click.argument("name")
@click.argument("seconds")
@_store_options
@click.pass_context
def queues_aging(
    ctx: click.Context, name: str, seconds: str, url: str | None, schema: str | None
) -> None:
    """A due job of NAME gains one priority level per SECONDS waited ("off": none)."""
    aging: float | None = None
    if seconds.lower() != "off":
        try:
            aging = float(seconds)
        except ValueError:
            raise BadInput(
                f"invalid SECONDS {seconds!r}: a number of seconds > 0, or off"
            ) from None
        try:
            check_positive("aging_s", aging)
        except InvalidArgumentError as e:
            raise BadInput(str(e)) from None

    async def go() -> None:
        async with await _open(ctx, url, schema) as store:
            await store.queue(name).set_aging(aging)

    _run(go())
    said = "no aging" if aging is None else f"one priority level per {aging:g}s waited"
    _out().print(f"queue {name}: {said}")
