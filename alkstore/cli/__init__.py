"""The ``alkstore`` command line (click + rich); ``main`` is the console entry point."""

from alkstore.cli import fair as _fair  # noqa: F401  (registers `queues fair` / `queues aging`)
from alkstore.cli.commands import main

__all__ = ["main"]
