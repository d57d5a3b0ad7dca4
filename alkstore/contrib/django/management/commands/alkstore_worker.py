"""``manage.py alkstore_worker``: the alkstore worker, with Django set up, running the
Django tasks of one alkstore backend until SIGTERM/SIGINT."""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from alkstore.cli import supervisor, worker_options
from alkstore.cli.logs import setup_logging
from alkstore.cli.loops import loop_factory
from alkstore.core.urls import redact_url
from alkstore.errors import AlkstoreError
from alkstore.worker.recycle import RECYCLE_EXIT, parse_size

from ...backend import AlkstoreBackend
from ...compat import task_backends


class Command(BaseCommand):
    help = (
        "Run the alkstore worker for a TASKS backend: claims the backend's queues and "
        "runs their Django tasks until SIGTERM/SIGINT (a second signal stops at once)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--backend", default="default", help="The TASKS alias to work (default: default)."
        )
        # the same options as `alkstore worker`, from the one definition of them
        worker_options.add_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        alias = options["backend"]
        try:
            backend = task_backends[alias]
        except Exception as e:
            raise CommandError(f"no TASKS backend {alias!r}: {e}") from None
        if not isinstance(backend, AlkstoreBackend):
            raise CommandError(
                f"TASKS[{alias!r}] is {type(backend).__name__}, not "
                "alkstore.contrib.django.AlkstoreBackend"
            )
        try:
            new_loop = loop_factory(options["loop"])
        except AlkstoreError as e:
            raise CommandError(str(e)) from None
        queues = options["queue"] or sorted(backend.queues)
        if not queues:
            raise CommandError(f"TASKS[{alias!r}] has no QUEUES: pass --queue NAME")
        setup_logging(options["log_level"], options["log_format"])
        if supervisor.wanted(options):  # --max-jobs/--max-memory/--reload: fresh children
            try:
                if options["max_memory"] is not None:
                    parse_size(options["max_memory"])
            except AlkstoreError as e:
                raise CommandError(str(e)) from None
            sys.exit(supervisor.supervise(reload=options["reload"]))
        supervisor.follow_supervisor()
        self.stdout.write(
            f"alkstore worker on {redact_url(backend.url)}, queues {', '.join(queues)}"
        )
        try:
            code = backend.app.run_worker(
                queues, loop_factory=new_loop, **worker_options.worker_kwargs(options)
            )
        except AlkstoreError as e:
            raise CommandError(str(e)) from None
        if code == RECYCLE_EXIT:
            sys.exit(code)  # recycled: the supervisor starts a fresh process
        if code:
            raise CommandError("the worker was stopped before its tasks finished")
