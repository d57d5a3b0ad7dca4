"""The backend in the test process: enqueue through the project's view (Django's test
client), the outbox's commit and rollback, options mapped onto the job, signals,
results of live jobs and bad input. The worker process is in test_worker.py."""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client

import alkstore
from alkstore.contrib.django import AlkstoreBackend, InvalidTask
from alkstore.contrib.django.compat import (
    InvalidTaskError,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_backends,
    task_enqueued,
)
from tests.django_backend.conftest import Shop, tasks_setting


def only_on(engine: str) -> pytest.MarkDecorator:
    """Run a test on one engine only (what the other engine does instead has its own test)."""
    return pytest.mark.parametrize("shop", [engine], indirect=True)


def _job(shop: Shop, result_id: str) -> alkstore.Job | None:
    return shop.store().admin().find_job(int(result_id))  # type: ignore[no-any-return]


def test_capability_flags_are_what_the_backend_does(shop: Shop) -> None:
    backend = task_backends["default"]
    assert isinstance(backend, AlkstoreBackend)
    assert backend.supports_defer and backend.supports_async_task
    assert backend.supports_get_result and backend.supports_priority


def test_a_committed_view_leaves_its_row_and_its_job(shop: Shop) -> None:
    mode = "atomic" if shop.engine == "postgres" else "on_commit"
    response = Client().get("/orders", {"item": "teapot", "mode": mode})
    assert response.status_code == 200, response.content
    body = response.json()
    assert shop.Order.objects.using(shop.database).filter(id=body["order"]).exists()
    job = _job(shop, body["result_id"])
    assert job is not None and job.state == "pending" and job.queue == "default"
    assert job.json() == {
        "task": "tests.django_backend.project.shop.tasks.ship",
        "args": {"args": [body["order"], shop.database], "kwargs": {}},
    }
    result = shop.tasks.ship.get_result(body["result_id"])
    assert result.status == TaskResultStatus.READY and result.attempts == 0
    assert result.args == [body["order"], shop.database] and result.backend == "default"
    with pytest.raises(ValueError, match="not finished"):
        _ = result.return_value


@only_on("postgres")
def test_a_rolled_back_view_leaves_neither_row_nor_job_on_postgres(shop: Shop) -> None:
    seen: list[str] = []

    def on_enqueued(sender: Any, task_result: Any, **kwargs: Any) -> None:
        seen.append(task_result.id)

    task_enqueued.connect(on_enqueued)
    try:
        response = Client().get("/orders", {"item": "teapot", "fail": "1"})
    finally:
        task_enqueued.disconnect(on_enqueued)
    assert response.status_code == 409
    (result_id,) = response.json()["result_ids"]  # enqueued inside the transaction ...
    assert not shop.Order.objects.using(shop.database).exists()
    assert _job(shop, result_id) is None  # ... and rolled back with it
    with pytest.raises(TaskResultDoesNotExist):
        shop.tasks.ship.get_result(result_id)
    assert seen == []  # task_enqueued is sent after the commit only


@only_on("postgres")
def test_the_outbox_job_is_invisible_and_unannounced_until_commit(shop: Shop) -> None:
    from django.db import transaction

    store = shop.store()
    seen: list[str] = []

    def on_enqueued(sender: Any, task_result: Any, **kwargs: Any) -> None:
        seen.append(task_result.id)

    task_enqueued.connect(on_enqueued)
    try:
        with store.listen("low") as wakes:
            with transaction.atomic(using=shop.database):
                result = shop.tasks.add_slowly.using(queue_name="low").enqueue(1, 2)
                assert _job(shop, result.id) is None  # another connection: not committed
                assert wakes.get(timeout=0.2) is None  # no wake before the commit
                assert seen == []
            assert _job(shop, result.id) is not None
            assert wakes.get(timeout=30) is not None  # woken after the commit
    finally:
        task_enqueued.disconnect(on_enqueued)
    assert seen == [result.id]


@only_on("sqlite")
def test_sqlite_refuses_an_enqueue_inside_atomic_by_default(shop: Shop) -> None:
    response = Client().get("/orders", {"item": "teapot"})
    assert response.status_code == 400
    assert "would not roll back with it" in response.json()["error"]
    assert "IN_ATOMIC" in response.json()["error"]
    assert not shop.Order.objects.using(shop.database).exists()
    assert shop.store().admin().stats() == []


@pytest.mark.parametrize("shop_options", [{"IN_ATOMIC": "independent"}])
@only_on("sqlite")
def test_sqlite_independent_mode_keeps_the_job_when_the_view_rolls_back(shop: Shop) -> None:
    response = Client().get("/orders", {"item": "teapot", "fail": "1"})
    assert response.status_code == 409
    (result_id,) = response.json()["result_ids"]
    assert not shop.Order.objects.using(shop.database).exists()
    job = _job(shop, result_id)  # a separate database: not atomic with the view's rows
    assert job is not None and job.state == "pending"


def test_a_rolled_back_on_commit_enqueue_writes_nothing(shop: Shop) -> None:
    response = Client().get("/orders", {"item": "teapot", "mode": "on_commit", "fail": "1"})
    assert response.status_code == 409 and response.json()["result_ids"] == []
    assert shop.store().admin().stats() == []


def test_priority_run_after_and_queue_become_the_jobs_stamps(shop: Shop) -> None:
    later = datetime.now(UTC) + timedelta(hours=1)
    task = shop.tasks.add_slowly.using(priority=-100, queue_name="low", run_after=later)
    result = task.enqueue(2, 3)
    job = _job(shop, result.id)
    assert job is not None
    assert (job.queue, job.priority) == ("low", -100)
    assert abs((job.run_at - later).total_seconds()) < 0.01
    top = shop.tasks.add_slowly.using(priority=100).enqueue(1, 1)
    assert _job(shop, top.id).priority == 100  # type: ignore[union-attr]
    again = shop.tasks.add_slowly.get_result(result.id)
    assert again.status == TaskResultStatus.READY
    assert (again.task.queue_name, again.task.priority) == ("low", -100)
    assert again.args == [2, 3] and again.kwargs == {}
    # claim order follows Django's priority: larger first
    handle = shop.store().queue("default").claim_one("w1")
    assert handle is not None and handle.job.id == int(top.id)


def test_task_enqueued_fires_with_the_result(shop: Shop) -> None:
    seen: list[Any] = []

    def on_enqueued(sender: Any, task_result: Any, **kwargs: Any) -> None:
        seen.append((sender, task_result.id, task_result.status))

    task_enqueued.connect(on_enqueued)
    try:
        result = shop.tasks.charge.enqueue(amount=5)  # outside atomic(): at once on both engines
    finally:
        task_enqueued.disconnect(on_enqueued)
    assert seen == [(AlkstoreBackend, result.id, TaskResultStatus.READY)]


def test_aenqueue_and_aget_result(shop: Shop) -> None:
    async def go() -> tuple[Any, Any]:
        result = await shop.tasks.add_slowly.aenqueue(20, 22)
        return result, await shop.tasks.add_slowly.aget_result(result.id)

    result, again = asyncio.run(go())
    assert again.id == result.id and again.status == TaskResultStatus.READY
    assert again.args == [20, 22]


def test_bad_input_is_refused_with_errors_naming_it(shop: Shop) -> None:
    with pytest.raises(InvalidTask, match=r"queue 'nope' is not one of .*\['default', 'low'\]"):
        shop.tasks.ship.using(queue_name="nope")
    with pytest.raises(
        InvalidTaskError, match=r"priority must be an int in \[-100, 100\], got 101"
    ):
        shop.tasks.ship.using(priority=101)
    with pytest.raises(alkstore.InvalidArgumentError, match="got -101"):
        shop.tasks.ship.using(priority=-101)
    with pytest.raises(InvalidTask, match="aware datetime"):
        shop.tasks.ship.using(run_after=datetime(2030, 1, 1))
    with pytest.raises(alkstore.PayloadError, match=r"shop\.tasks\.charge"):
        shop.tasks.charge.enqueue({1, 2})
    for bad in ("nope", "-1", "99999999999999999999999"):
        with pytest.raises(TaskResultDoesNotExist):
            shop.tasks.ship.get_result(bad)
    plain = shop.store().queue("default").enqueue({"not": "a django task"})
    with pytest.raises(TaskResultDoesNotExist, match=f"no result of a Django task with id {plain}"):
        shop.tasks.ship.get_result(str(plain))
    handle = shop.store().queue("default").claim_one("w1")
    assert handle is not None and handle.ack_result({"kept": "not by Django"}, 60)
    with pytest.raises(TaskResultDoesNotExist, match=f"with id {plain}"):
        shop.tasks.ship.get_result(str(plain))  # a kept result, but not a Django task's
    assert shop.store().admin().stats() == []  # nothing was written by the refusals


def test_bad_options_are_refused_at_configuration(shop: Shop) -> None:
    base = tasks_setting("sqlite:///x.db", "alkstore", "default")["default"]

    def build(**changes: Any) -> AlkstoreBackend:
        params = {**base, **changes}
        return AlkstoreBackend("broken", params)

    with pytest.raises(alkstore.InvalidArgumentError, match=r"unknown key\(s\) \['URLS'\]"):
        build(OPTIONS={"URLS": "sqlite:///x.db"})
    with pytest.raises(alkstore.InvalidArgumentError, match=r"\['URL'\] must name"):
        build(OPTIONS={})
    with pytest.raises(alkstore.InvalidNameError, match=r"TASKS\['broken'\]\['QUEUES'\]"):
        build(QUEUES=["default", "bad name!"])
    with pytest.raises(alkstore.InvalidArgumentError, match="IN_ATOMIC"):
        build(OPTIONS={"URL": "sqlite:///x.db", "IN_ATOMIC": "sometimes"})
    with pytest.raises(alkstore.InvalidArgumentError, match="'elsewhere' is not in DATABASES"):
        build(OPTIONS={"URL": "sqlite:///x.db", "DATABASE": "elsewhere"})


@only_on("postgres")
def test_the_outbox_refuses_a_store_outside_djangos_database(shop: Shop) -> None:
    import uuid

    import psycopg
    from django.test import override_settings

    from tests.conftest import PG_ADMIN_URL, _pg_database_url

    name = f"alkstore_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"  # dropped below
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        with override_settings(TASKS=tasks_setting(_pg_database_url(name), "alkstore", "pg")):
            try:
                with pytest.raises(InvalidTask, match="is not in Django's database 'pg'"):
                    shop.tasks.ship.enqueue(1, "pg")
            finally:
                task_backends["default"].app.close_sync()
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_the_worker_command_refuses_bad_input_in_one_line(shop: Shop) -> None:
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="no TASKS backend 'nope'"):
        call_command("alkstore_worker", backend="nope")
    with pytest.raises(CommandError, match="concurrency must be an int >= 1, got 0"):
        call_command("alkstore_worker", concurrency=0)
