"""The worker's options, defined once: ``alkstore worker`` (click) and Django's
``manage.py alkstore_worker`` (argparse) are both built from :data:`WORKER_OPTIONS`,
so the two commands cannot drift apart. Each option is also settable by its
environment variable; ``kwarg`` names the :class:`~alkstore.worker.Worker` argument
it sets (``None``: the command handles it, as the queues and the log setup)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import click

from alkstore.cli.logs import LOG_FORMATS
from alkstore.cli.loops import LOOPS

if TYPE_CHECKING:
    import argparse  # Django's command only: the CLI's start leaves it unimported

__all__ = ["WORKER_OPTIONS", "WorkerOption", "add_arguments", "click_options", "worker_kwargs"]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class WorkerOption:
    """One worker option: its flags, type, bounds, default, help and variable."""

    flags: tuple[str, ...]
    env: str
    help: str
    kind: type = str
    minimum: float | None = None
    maximum: float | None = None
    default: Any = None
    choices: tuple[str, ...] | None = None
    multiple: bool = False
    kwarg: str | None = None
    flag: bool = False  # an on/off switch (no value)

    @property
    def dest(self) -> str:
        return self.flags[0].removeprefix("--").replace("-", "_")


WORKER_OPTIONS: tuple[WorkerOption, ...] = (
    WorkerOption(
        ("--queue", "-q"),
        "ALKSTORE_WORKER_QUEUES",
        "Queue to work (repeatable; the variable is space-separated) [every queue of the "
        "app's tasks].",
        multiple=True,
    ),
    WorkerOption(
        ("--concurrency", "-c"),
        "ALKSTORE_WORKER_CONCURRENCY",
        "Jobs run at once (sync tasks: threads).",
        int,
        1,
        default=8,
        kwarg="concurrency",
    ),
    WorkerOption(
        ("--prefetch",),
        "ALKSTORE_WORKER_PREFETCH",
        "Cap on jobs claimed ahead while handlers run [max(4×concurrency, 1024)]; 0: none.",
        int,
        0,
        kwarg="prefetch",
    ),
    WorkerOption(
        ("--grace",),
        "ALKSTORE_WORKER_GRACE",
        "Seconds running jobs get to finish after SIGTERM/SIGINT.",
        float,
        0,
        default=30.0,
        kwarg="grace_s",
    ),
    WorkerOption(
        ("--poll-interval",),
        "ALKSTORE_WORKER_POLL_INTERVAL",
        "Seconds between re-polls covering a lost wake.",
        float,
        0.001,
        default=1.0,
        kwarg="poll_interval_s",
    ),
    WorkerOption(
        ("--sweep-interval",),
        "ALKSTORE_WORKER_SWEEP_INTERVAL",
        "Seconds between sweeps of expired jobs.",
        float,
        0.001,
        default=60.0,
        kwarg="sweep_interval_s",
    ),
    WorkerOption(
        ("--dead-letter-retention",),
        "ALKSTORE_WORKER_DEAD_LETTER_RETENTION",
        "Sweeps also purge dead jobs older than this many seconds [keep them].",
        float,
        0,
        kwarg="dead_letter_retention_s",
    ),
    WorkerOption(
        ("--worker-id",),
        "ALKSTORE_WORKER_ID",
        "Claimant name [host:pid:random].",
        kwarg="worker_id",
    ),
    WorkerOption(
        ("--metrics-port",),
        "ALKSTORE_WORKER_METRICS_PORT",
        "Serve Prometheus metrics on this port (0: any free port; see the log).",
        int,
        0,
        65535,
        kwarg="metrics_port",
    ),
    WorkerOption(
        ("--metrics-host",),
        "ALKSTORE_WORKER_METRICS_HOST",
        "Address the metrics endpoint binds to.",
        default="127.0.0.1",
        kwarg="metrics_host",
    ),
    WorkerOption(
        ("--presence-interval",),
        "ALKSTORE_WORKER_PRESENCE_INTERVAL",
        "Seconds between refreshes of this worker's registry row, outcome counts and gauges.",
        float,
        0.01,
        default=5.0,
        kwarg="presence_interval_s",
    ),
    WorkerOption(
        ("--attempt-history",),
        "ALKSTORE_WORKER_ATTEMPT_HISTORY",
        "Attempts kept per job in its history (the newest; 0: none).",
        int,
        0,
        default=20,
        kwarg="attempt_history",
    ),
    WorkerOption(
        ("--history-retention",),
        "ALKSTORE_WORKER_HISTORY_RETENTION",
        "Seconds of per-minute outcome history kept for the dashboard's charts (7 days).",
        float,
        60,
        default=7 * 24 * 3600.0,
        kwarg="history_retention_s",
    ),
    WorkerOption(
        ("--max-jobs",),
        "ALKSTORE_WORKER_MAX_JOBS",
        "Recycle after this many jobs: stop claiming, finish, start a fresh process.",
        int,
        1,
        kwarg="max_jobs",
    ),
    WorkerOption(
        ("--max-memory",),
        "ALKSTORE_WORKER_MAX_MEMORY",
        "Recycle above this resident memory (e.g. 512MB, 1GiB), checked every second.",
        kwarg="max_memory",
    ),
    WorkerOption(
        ("--reload",),
        "ALKSTORE_WORKER_RELOAD",
        "Development: restart the worker when a .py file under the current directory changes.",
        flag=True,
        default=False,
    ),
    WorkerOption(
        ("--log-level",),
        "ALKSTORE_WORKER_LOG_LEVEL",
        "info: failures one by one and a summary every 10 s; debug: a line per "
        "success too; warning: only the failures.",
        default="info",
        choices=("debug", "info", "warning", "error"),
    ),
    WorkerOption(
        ("--loop",),
        "ALKSTORE_WORKER_LOOP",
        "Event loop: asyncio's own, or uvloop (pip install 'alkstore[uvloop]'; ~10% less "
        "of the worker's own CPU per job).",
        default="asyncio",
        choices=LOOPS,
    ),
    WorkerOption(
        ("--log-format",),
        "ALKSTORE_WORKER_LOG_FORMAT",
        "json: one object per line, a job outcome's fields at the top level.",
        default="text",
        choices=LOG_FORMATS,
    ),
)


def _click_type(option: WorkerOption) -> Any:
    if option.choices is not None:
        return click.Choice(option.choices)
    if option.kind is int:
        return click.IntRange(option.minimum, option.maximum)  # type: ignore[arg-type]
    if option.kind is float:
        return click.FloatRange(option.minimum, option.maximum)
    return None


def click_options(fn: F) -> F:
    """Decorate a click command with every worker option (flag or variable)."""
    for option in reversed(WORKER_OPTIONS):
        if option.flag:
            fn = click.option(
                *option.flags, envvar=option.env, show_envvar=True, is_flag=True, help=option.help
            )(fn)
            continue
        fn = click.option(
            *option.flags,
            envvar=option.env,
            show_envvar=True,
            type=_click_type(option),
            default=option.default,
            show_default=option.default is not None,
            multiple=option.multiple,
            help=option.help,
        )(fn)
    return fn


def _argparse_type(option: WorkerOption) -> Callable[[str], Any]:
    import argparse

    def convert(text: str) -> Any:
        if option.choices is not None:
            value: Any = text.lower()
            if value not in option.choices:
                raise argparse.ArgumentTypeError(
                    f"invalid choice {text!r} (choose from {', '.join(option.choices)})"
                )
            return value
        try:
            value = option.kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"invalid {option.kind.__name__} value {text!r}"
            ) from None
        low, high = option.minimum, option.maximum
        if (low is not None and value < low) or (high is not None and value > high):
            bounds = f">= {low}" if high is None else f"in [{low}, {high}]"
            raise argparse.ArgumentTypeError(f"{value} is not {bounds}")
        return value

    return convert


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add every worker option to an argparse parser (Django's ``add_arguments``)."""
    for option in WORKER_OPTIONS:
        env = os.environ.get(option.env)
        shown = "" if option.default is None else f" (default: {option.default})"
        common: dict[str, Any] = {"dest": option.dest, "help": option.help + shown}
        if option.flag:
            on = (env or "").strip().lower() in ("1", "true", "yes", "on")
            parser.add_argument(*option.flags, action="store_true", default=on, **common)
            continue
        if option.multiple:
            names = env.split() if env else None
            parser.add_argument(*option.flags, action="append", default=names, **common)
            continue
        default = env if env is not None else option.default  # a str default is converted
        parser.add_argument(*option.flags, type=_argparse_type(option), default=default, **common)


def worker_kwargs(values: dict[str, Any]) -> dict[str, Any]:
    """The :class:`~alkstore.worker.Worker` arguments set by parsed option ``values``."""
    return {o.kwarg: values[o.dest] for o in WORKER_OPTIONS if o.kwarg is not None}
