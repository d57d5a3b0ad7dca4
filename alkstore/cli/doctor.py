"""``alkstore doctor``: the health of the store and of the database behind it.

Each finding of ``Admin.health`` (``core.health``) is one row: check, subject,
verdict, what was seen and the fix. Exit 0 when nothing needs action, 1 when
something does (or the store cannot be opened), 2 on bad input. It runs as the
store's own runtime role; what that role cannot see is listed with the grant
that shows it (verdict ``unknown``, which alone does not fail the run).
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click
from rich.table import Table

from alkstore.cli import render
from alkstore.cli.base import _debug, _json_option, _one_line, _store_options, _target
from alkstore.connect import connect
from alkstore.core.health import ACTION, OK, Finding, Health, Thresholds
from alkstore.errors import AlkstoreError, EngineError, InvalidArgumentError, InvalidNameError

__all__ = ["doctor", "findings_table"]

F = TypeVar("F", bound=Callable[..., Any])
_STYLE = {OK: "green", ACTION: "bold red"}
_DEFAULTS = Thresholds()


def findings_table(findings: tuple[Finding, ...] | list[Finding]) -> Table:
    """The findings as a terminal table, in the doctor's order."""
    out = Table(title="alkstore doctor", title_justify="left")
    for column in ("check", "subject", "verdict", "seen", "fix"):
        out.add_column(column, overflow="fold")
    for f in findings:
        style = _STYLE.get(f.verdict, "yellow")
        out.add_row(f.check, f.subject, f"[{style}]{f.verdict}[/]", f.detail, f.fix)
    return out


def _json(health: Health) -> dict[str, Any]:
    return {
        "needs_action": health.needs_action,
        "findings": [dataclasses.asdict(f) for f in health.findings],
        "facts": dataclasses.asdict(health.facts),
    }


async def _look(url: str | None, schema: str, limits: Thresholds) -> Health:
    async with await connect(url, schema=schema, migrate="off") as store:
        return await store.admin().health(limits)


def _seconds(name: str, default: float, help_text: str) -> Callable[[F], F]:
    return click.option(
        name,
        type=click.FloatRange(min=0),
        default=default,
        show_default=True,
        metavar="SECONDS",
        help=help_text,
    )


@click.command()
@click.option(
    "--dead-rows",
    type=click.IntRange(min=0),
    default=_DEFAULTS.dead_rows,
    show_default=True,
    help="Dead rows in one table (PostgreSQL) that need a VACUUM.",
)
@_seconds("--xmin-age", _DEFAULTS.xmin_age_s, "A transaction holding the xmin horizon this long.")
@_seconds(
    "--idle-xact-age",
    _DEFAULTS.idle_xact_s,
    "An idle-in-transaction session holding the xmin horizon this long.",
)
@_seconds("--claim-overdue", _DEFAULTS.claim_overdue_s, "A claim past its deadline for this long.")
@_seconds("--silent-after", _DEFAULTS.silent_s, "A worker whose last heartbeat is this old.")
@_seconds("--clock-skew", _DEFAULTS.clock_skew_s, "This host's clock this far off the database's.")
@click.option(
    "--checkpoint-lag",
    type=click.IntRange(min=0),
    default=_DEFAULTS.checkpoint_lag_bytes // 2**20,
    show_default=True,
    metavar="MIB",
    help="WAL not yet checkpointed (SQLite), in MiB.",
)
@_json_option
@_store_options
@click.pass_context
def doctor(
    ctx: click.Context,
    dead_rows: int,
    xmin_age: float,
    idle_xact_age: float,
    claim_overdue: float,
    silent_after: float,
    clock_skew: float,
    checkpoint_lag: int,
    as_json: bool,
    schema: str | None,
    url: str | None,
) -> None:
    """Check the store and its database: dead rows and vacuums, the oldest transaction
    holding back the xmin horizon, claims past their deadline, silent workers, clock
    skew, migrations, SQLite's WAL. Exit 1 if anything needs action."""
    url, target_schema = _target(ctx, url, schema)
    limits = Thresholds(
        dead_rows=dead_rows,
        xmin_age_s=xmin_age,
        idle_xact_s=idle_xact_age,
        claim_overdue_s=claim_overdue,
        silent_s=silent_after,
        clock_skew_s=clock_skew,
        checkpoint_lag_bytes=checkpoint_lag * 2**20,
    )
    debug = _debug()
    try:
        health = asyncio.run(_look(url, target_schema, limits))
    except (InvalidNameError, InvalidArgumentError) as e:
        if debug:
            raise
        click.echo(f"Error: {_one_line(e)}", err=True)
        sys.exit(2)
    except (AlkstoreError, OSError, ValueError) as e:
        if debug:
            raise
        _unopened(e, as_json)
    if as_json:
        render.print_json(_json(health))
    else:
        out = render.console()
        out.print(findings_table(health.findings))
        n = sum(f.verdict == ACTION for f in health.findings)
        out.print(f"{n} finding(s) need action" if n else "healthy: nothing needs action")
    sys.exit(1 if health.needs_action else 0)


def _unopened(error: BaseException, as_json: bool) -> NoReturn:
    """The store could not be opened: a schema at another version is the migration
    finding; anything else one ``Error:`` line. Exit 1 either way."""
    text = _one_line(error)
    if not (isinstance(error, EngineError) and re.search(r"at (schema )?version \d", text)):
        cause = error.__cause__
        detail = f" ({_one_line(cause)})" if cause and str(cause) not in str(error) else ""
        click.echo(f"Error: cannot open the store: {text}{detail}", err=True)
        sys.exit(1)
    fix = (
        "upgrade alkstore on this host"
        if "newer" in text or "upgrade" in text
        else ("run `alkstore migrate` as a role that may create tables")
    )
    finding = Finding("migration", "schema", ACTION, text, fix)
    if as_json:
        render.print_json({"needs_action": True, "findings": [dataclasses.asdict(finding)]})
    else:
        render.console().print(findings_table([finding]))
    sys.exit(1)
