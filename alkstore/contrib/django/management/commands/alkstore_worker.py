"""``manage.py alkstore_worker``: the alkstore worker, with Django set up, running the
Django tasks of one alkstore backend until SIGTERM/SIGINT."""

from __future__ import annotations

import logging
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from alkstore.errors import AlkstoreError
from alkstore.worker.runtime import redact_url

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
        parser.add_argument(
            "--queue",
            action="append",
            dest="queues",
            help="A queue to work (repeatable; default: the backend's QUEUES).",
        )
        parser.add_argument(
            "--concurrency", type=int, default=8, help="Tasks run at once (default: 8)."
        )
        parser.add_argument(
            "--grace",
            type=float,
            default=30.0,
            help="Seconds running tasks get to finish on SIGTERM (default: 30).",
        )
        parser.add_argument(
            "--poll-interval",
            type=float,
            default=1.0,
            help="Seconds between re-polls when no wake arrives (default: 1).",
        )
        parser.add_argument(
            "--worker-id", default=None, help="This worker's id (default: host:pid:…)."
        )
        parser.add_argument(
            "--log-level",
            default="INFO",
            type=str.upper,
            choices=["DEBUG", "INFO", "WARNING", "ERROR"],
            help="Log level of the worker's lines (default: INFO).",
        )

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
        queues = options["queues"] or sorted(backend.queues)
        if not queues:
            raise CommandError(f"TASKS[{alias!r}] has no QUEUES: pass --queue NAME")
        logging.basicConfig(
            level=options["log_level"], format="%(asctime)s %(levelname)s %(message)s"
        )
        self.stdout.write(
            f"alkstore worker on {redact_url(backend.url)}, queues {', '.join(queues)}"
        )
        try:
            code = backend.app.run_worker(
                queues,
                concurrency=options["concurrency"],
                grace_s=options["grace"],
                poll_interval_s=options["poll_interval"],
                worker_id=options["worker_id"],
            )
        except AlkstoreError as e:
            raise CommandError(str(e)) from None
        if code:
            raise CommandError("the worker was stopped before its tasks finished")
