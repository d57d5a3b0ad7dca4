"""The test Django project, set up once per session (its tables on SQLite and, when a
server is there, in the session's PostgreSQL database), and a fresh alkstore store
per test given to Django with ``override_settings(TASKS=...)``.

``shop`` is parametrised over the engines: on ``postgres`` the view's database is
the ``pg`` alias and the store a schema of its own in that same database (the
outbox); on ``sqlite`` the view's database is SQLite and the store a file of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # Django imports tests.django_backend.project
    sys.path.insert(0, str(ROOT))

from tests.conftest import IN_CI  # noqa: E402 (needs ROOT on sys.path)

ENGINES = [e for e in os.environ.get("ALKSTORE_TEST_ENGINES", "sqlite,postgres").split(",") if e]
MANAGE = ROOT / "tests" / "django_backend" / "project" / "manage.py"
SETTINGS = "tests.django_backend.project.settings"


@dataclass
class Django:
    """The project's process-wide setup: its databases' env, for the worker too."""

    env: dict[str, str]
    has_pg: bool


@pytest.fixture(scope="session")
def django_project(request: pytest.FixtureRequest, tmp_path_factory: Any) -> Django:
    base = tmp_path_factory.mktemp("django")
    env = {"DJANGO_SETTINGS_MODULE": SETTINGS, "SHOP_SQLITE": str(base / "shop.db")}
    has_pg = False
    if "postgres" in ENGINES:
        try:
            env["SHOP_PG_URL"] = request.getfixturevalue("pg_url")
            has_pg = True
        except pytest.skip.Exception:
            pass  # the PostgreSQL cases skip on their own (pg_url fails under CI=true)
    os.environ.update(env)
    import django
    from django.core.management import call_command

    django.setup()
    for alias in ("default", "pg") if has_pg else ("default",):
        call_command("migrate", run_syncdb=True, database=alias, verbosity=0)
    return Django(env, has_pg)


@dataclass
class Shop:
    """One test's TASKS (a store of its own) on one engine."""

    engine: str
    database: str  # the Django alias of the view's writes
    setting: dict[str, Any]  # TASKS
    env: dict[str, str]
    tmp_path: Path

    @property
    def tasks(self) -> Any:
        """The project's tasks module (imported once Django is set up)."""
        from tests.django_backend.project.shop import tasks

        return tasks

    @property
    def Order(self) -> Any:  # the model class
        from tests.django_backend.project.shop.models import Order

        return Order

    @property
    def options(self) -> dict[str, Any]:
        return self.setting["default"]["OPTIONS"]  # type: ignore[no-any-return]

    def store(self) -> Any:
        from alkstore.contrib.django.compat import task_backends

        return task_backends["default"].app.sync_store()

    def worker(self, *args: str) -> subprocess.Popen[bytes]:
        """``manage.py alkstore_worker`` as a real process with this test's TASKS."""
        env = {**os.environ, **self.env, "SHOP_TASKS": json.dumps(self.setting)}
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        log = open(self.tmp_path / "worker.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(
            [sys.executable, str(MANAGE), "alkstore_worker", "--poll-interval", "0.2", *args],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        self._procs.append(proc)
        return proc

    def worker_log(self) -> str:
        return (self.tmp_path / "worker.log").read_text()

    def signals(self) -> list[dict[str, Any]]:
        path = Path(self.env["SHOP_SIGNAL_LOG"])
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]

    _procs: list[subprocess.Popen[bytes]] = field(default_factory=list)


def tasks_setting(url: str, schema: str, database: str, **options: Any) -> dict[str, Any]:
    return {
        "default": {
            "BACKEND": "alkstore.contrib.django.AlkstoreBackend",
            "QUEUES": ["default", "low"],
            "OPTIONS": {
                "URL": url,
                "SCHEMA": schema,
                "DATABASE": database,
                "MAX_ATTEMPTS": 2,
                "RETRY_BASE_S": 0,
                **options,
            },
        }
    }


@pytest.fixture
def shop_options() -> dict[str, Any]:
    """Extra backend OPTIONS of a test (parametrise it to change them)."""
    return {}


@pytest.fixture(params=ENGINES)
def shop(
    request: pytest.FixtureRequest,
    django_project: Django,
    tmp_path: Path,
    shop_options: dict[str, Any],
) -> Iterator[Shop]:
    from django.test import override_settings

    from alkstore.contrib.django.compat import task_backends

    engine = request.param
    if engine == "postgres":
        if not django_project.has_pg:
            if IN_CI:
                pytest.fail("PostgreSQL is required under CI=true but unreachable")
            pytest.skip("PostgreSQL unreachable")
        url, database = django_project.env["SHOP_PG_URL"], "pg"
        schema = f"t_{uuid.uuid4().hex[:12]}"
    else:
        url, database, schema = f"sqlite:///{tmp_path}/jobs.db", "default", "alkstore"
    tasks = tasks_setting(url, schema, database, **shop_options)
    env = {**django_project.env, "SHOP_SIGNAL_LOG": str(tmp_path / "signals.jsonl")}
    shop = Shop(engine, database, tasks, env, tmp_path)
    os.environ["SHOP_SIGNAL_LOG"] = env["SHOP_SIGNAL_LOG"]
    try:
        with override_settings(TASKS=tasks):
            yield shop
            task_backends["default"].app.close_sync()
    finally:
        os.environ.pop("SHOP_SIGNAL_LOG", None)
        for proc in shop._procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        from tests.django_backend.project.shop.models import Order

        Order.objects.using(database).all().delete()
