"""The ``alkstore`` command line (click + rich); ``main`` is the console entry point."""

from alkstore.cli.commands import main

__all__ = ["main"]
