"""The CLI in parts: every command a module of alkstore/cli defines is registered on the
root group (commands.py is the one place), so none is defined and silently missing."""

from __future__ import annotations

import importlib
import pkgutil

import click

import alkstore.cli
from alkstore.cli.commands import cli


def _reachable(group: click.Group) -> set[int]:
    found: set[int] = set()
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)  # imported here: the root group is lazy
        assert command is not None, name
        found.add(id(command))
        if isinstance(command, click.Group):
            found |= _reachable(command)
    return found


def test_every_command_defined_in_the_cli_modules_is_registered() -> None:
    defined: dict[int, str] = {}
    for info in pkgutil.iter_modules(alkstore.cli.__path__):
        module = importlib.import_module(f"alkstore.cli.{info.name}")
        for name, value in vars(module).items():
            if not isinstance(value, click.Command) or value is cli or value.callback is None:
                continue
            if value.callback.__module__ == module.__name__:  # defined here, not imported
                defined[id(value)] = f"{module.__name__}.{name}"
    assert len(defined) >= 20  # every command and group, found where it is defined
    missing = sorted(where for key, where in defined.items() if key not in _reachable(cli))
    assert missing == []
