"""The ``alkstore`` command: every command and group, registered on the root group here.

Each group lives in its own module (``jobs.py``, ``queues.py``, ``worker.py``,
``store_commands.py``, ``tools.py``); ``base.py`` holds the root group, the shared
options and the error handling. A command is registered by name and imported only
when it runs (or ``--help`` lists it), so ``alkstore worker`` starts without the
other commands' imports. A new command or group plugs in with one line below (a
subcommand of a group: in its group's tuple, as ``queues fair``).
"""

from __future__ import annotations

import sys

from alkstore.cli.base import cli

__all__ = ["COMMANDS", "cli", "main"]

_C = "alkstore.cli"
COMMANDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "migrate": (f"{_C}.store_commands:migrate", ()),
    "enqueue": (f"{_C}.store_commands:enqueue", ()),
    "worker": (f"{_C}.worker:worker", ()),
    "schedules": (f"{_C}.worker:schedules", ()),
    "jobs": (
        f"{_C}.jobs:jobs",
        (
            f"{_C}.life:jobs_signal",
            f"{_C}.find:jobs_find",
            f"{_C}.find:jobs_bulk",
            f"{_C}.find:jobs_bulk_resume",
            f"{_C}.find:jobs_actions",
        ),
    ),
    "queues": (f"{_C}.queues:queues", (f"{_C}.fair:queues_fair", f"{_C}.fair:queues_aging")),
    "stats": (f"{_C}.store_commands:stats", ()),
    "workers": (f"{_C}.store_commands:workers", ()),
    "sweep": (f"{_C}.store_commands:sweep", ()),
    "dashboard": (f"{_C}.tools:dashboard", ()),
    "demo": (f"{_C}.tools:demo", ()),
    "copy": (f"{_C}.tools:copy_command", ()),
    "doctor": (f"{_C}.doctor:doctor", ()),
    "flows": (f"{_C}.flows:flows", ()),
}
cli.lazy.update(COMMANDS)


def main(argv: list[str] | None = None) -> None:
    """The console entry point."""
    try:
        cli.main(args=argv, prog_name="alkstore", standalone_mode=True)
    except KeyboardInterrupt:  # pragma: no cover - interactive
        sys.exit(130)
