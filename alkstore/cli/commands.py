"""The ``alkstore`` command: every command and group, registered on the root group here.

Each group lives in its own module (``jobs.py``, ``queues.py``, ``worker.py``,
``store_commands.py``, ``tools.py``); ``base.py`` holds the root group, the shared
options and the error handling. A new command or group plugs in with one line below
(a subcommand of a group likewise: ``queues.add_command(fair)``).
"""

from __future__ import annotations

import sys

from alkstore.cli.base import cli
from alkstore.cli.doctor import doctor
from alkstore.cli.fair import queues_aging, queues_fair
from alkstore.cli.find import jobs_actions, jobs_bulk, jobs_bulk_resume, jobs_find
from alkstore.cli.flows import flows
from alkstore.cli.jobs import jobs
from alkstore.cli.life import jobs_signal
from alkstore.cli.queues import queues
from alkstore.cli.store_commands import enqueue, migrate, stats, sweep, workers
from alkstore.cli.tools import copy_command, dashboard, demo
from alkstore.cli.worker import schedules, worker

__all__ = ["cli", "main"]

cli.add_command(migrate)
cli.add_command(enqueue)
cli.add_command(worker)
cli.add_command(schedules)
cli.add_command(jobs)
cli.add_command(queues)
cli.add_command(stats)
cli.add_command(workers)
cli.add_command(sweep)
cli.add_command(dashboard)
cli.add_command(demo)
cli.add_command(copy_command)
cli.add_command(doctor)
cli.add_command(flows)
queues.add_command(queues_fair)
queues.add_command(queues_aging)
jobs.add_command(jobs_signal)
jobs.add_command(jobs_find)
jobs.add_command(jobs_bulk)
jobs.add_command(jobs_bulk_resume)
jobs.add_command(jobs_actions)


def main(argv: list[str] | None = None) -> None:
    """The console entry point."""
    try:
        cli.main(args=argv, prog_name="alkstore", standalone_mode=True)
    except KeyboardInterrupt:  # pragma: no cover - interactive
        sys.exit(130)
