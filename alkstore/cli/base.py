"""The root ``alkstore`` group and what every command shares: the store options, opening
the store, and running a command so that an error is one line, never a traceback.

The store comes from ``--url`` (on the group or the command), else
``$ALKSTORE_URL``, else ``sqlite:///alkstore.db``; the PostgreSQL schema from
``--schema``, else ``$ALKSTORE_SCHEMA``, else ``alkstore``. Bad input and an
unreachable store print one ``Error: …`` line and exit non-zero (2 for bad
input, 1 otherwise); ``ALKSTORE_DEBUG=1`` shows tracebacks.
"""

from __future__ import annotations

import asyncio
import importlib
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from alkstore.connect import connect
from alkstore.errors import AlkstoreError, InvalidArgumentError, InvalidNameError, PayloadError

if TYPE_CHECKING:
    from alkstore.app import App
    from alkstore.store import Store

__all__ = ["BadInput", "Failed", "LazyGroup", "cli"]

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


def _run(
    coro: Awaitable[T], loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None
) -> T:
    """Run the command's coroutine (on a loop of ``loop_factory``'s, if given: the
    worker's ``--loop``); translate errors to one line."""

    async def wrapped() -> T:
        return await coro

    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            return runner.run(wrapped())
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


def _json_option(fn: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(fn)


def _out() -> Any:
    from alkstore.cli import render  # rich: only for the commands that print with it

    return render.console()


class LazyGroup(click.Group):
    """A group whose commands are imported when one is looked up (run, ``--help``),
    not at start: ``alkstore worker`` then never imports the modules of the other
    commands (rich tables, the dashboard, the admin API), ~0.1 s of every start.

    ``lazy`` maps a command name to ``"module:attribute"``, then the
    ``"module:attribute"`` of commands added to it when it is a group."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy: dict[str, tuple[str, tuple[str, ...]]] = {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            where, children = self.lazy[cmd_name]
            command = _load(where)
            if isinstance(command, click.Group):
                for child in children:
                    sub = _load(child)
                    command.add_command(sub, sub.name)
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)


def _load(where: str) -> click.Command:
    module, _, attribute = where.partition(":")
    command = getattr(importlib.import_module(module), attribute)
    assert isinstance(command, click.Command), where
    return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--url", default=None, help="Store URL [ALKSTORE_URL, else sqlite:///alkstore.db].")
@click.option("--schema", default=None, help="PostgreSQL schema [ALKSTORE_SCHEMA, else alkstore].")
@click.version_option(package_name="alkstore")
@click.pass_context
def cli(ctx: click.Context, url: str | None, schema: str | None) -> None:
    """alkstore: a durable job queue on SQLite or PostgreSQL."""
    ctx.obj = {"url": url, "schema": schema}
