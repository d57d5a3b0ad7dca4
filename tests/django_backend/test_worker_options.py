"""``manage.py alkstore_worker`` takes the same worker options as ``alkstore worker``
(issue #21: --metrics-port, --prefetch and --sweep-interval were missing)."""

from __future__ import annotations

from typing import Any

import pytest

from alkstore.cli.worker import worker as cli_worker

# what only one of the two commands has: the CLI names its app and store, Django its backend
CLI_ONLY = {"--traceback", "--url", "--schema", "--help"}
DJANGO_ONLY = {"--backend"}


def _cli_flags() -> set[str]:
    return {o for p in cli_worker.params for o in p.opts if o.startswith("--")} | {"--help"}


def _django_flags(django_project: Any) -> set[str]:
    from django.core.management.base import BaseCommand

    from alkstore.contrib.django.management.commands.alkstore_worker import Command

    ours = Command().create_parser("manage.py", "alkstore_worker")
    base = BaseCommand().create_parser("manage.py", "base")  # --verbosity, --settings, ...
    flags = {o for a in ours._actions for o in a.option_strings if o.startswith("--")}
    return flags - {o for a in base._actions for o in a.option_strings}


def test_the_django_worker_command_has_every_option_of_the_cli_worker(
    django_project: Any,
) -> None:
    cli, django = _cli_flags(), _django_flags(django_project)
    assert {"--metrics-port", "--prefetch", "--sweep-interval"} <= django
    assert cli - CLI_ONLY == django - DJANGO_ONLY


def test_the_django_worker_options_parse_and_check_bounds(django_project: Any) -> None:
    from django.core.management.base import CommandError

    from alkstore.cli.worker_options import worker_kwargs
    from alkstore.contrib.django.management.commands.alkstore_worker import Command

    parser = Command().create_parser("manage.py", "alkstore_worker")
    parsed = vars(parser.parse_args(["--prefetch", "0", "--metrics-port", "9100", "-q", "a"]))
    kwargs = worker_kwargs(parsed)
    assert (kwargs["prefetch"], kwargs["metrics_port"], kwargs["concurrency"]) == (0, 9100, 8)
    assert (parsed["queue"], kwargs["sweep_interval_s"]) == (["a"], 60.0)
    with pytest.raises(CommandError, match="--concurrency/-c: 0 is not >= 1"):
        parser.parse_args(["--concurrency", "0"])
