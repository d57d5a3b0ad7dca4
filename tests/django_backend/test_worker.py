"""``manage.py alkstore_worker`` as a real process runs the project's Django tasks:
results, errors, attempts, the task context, async tasks and Django's signals."""

from __future__ import annotations

import contextlib
import signal
import time
from typing import Any

import pytest
from django.test import Client

import alkstore
from alkstore.contrib.django.compat import TaskResultStatus
from tests.django_backend.conftest import Shop


def _wait(shop: Shop, result: Any) -> None:
    """Until the worker is done with the job (the store's results API)."""
    queue = shop.store().queue(result.task.queue_name)
    with contextlib.suppress(alkstore.JobDeadError):
        queue.wait_outcome(int(result.id), timeout_s=60)


def test_the_worker_command_runs_the_views_task_and_results_report_each_outcome(
    shop: Shop,
) -> None:
    mode = "atomic" if shop.engine == "postgres" else "on_commit"
    response = Client().get("/orders", {"item": "teapot", "mode": mode})
    assert response.status_code == 200, response.content
    order_id, shipped_id = response.json()["order"], response.json()["result_id"]
    tasks = shop.tasks
    failing = tasks.charge.enqueue(amount=7)
    with_context = tasks.which_attempt.enqueue(label="ctx")
    coroutine = tasks.add_slowly.using(queue_name="low").enqueue(40, 2)

    worker = shop.worker("--queue", "default", "--queue", "low", "--concurrency", "2")
    for result in (tasks.ship.get_result(shipped_id), failing, with_context, coroutine):
        _wait(shop, result)

    shipped = tasks.ship.get_result(shipped_id)
    assert shipped.status == TaskResultStatus.SUCCESSFUL
    assert shipped.return_value == {"order": order_id, "item": "teapot"}
    assert shipped.attempts == 1 and shipped.errors == []
    assert shipped.args == [order_id, shop.database]
    assert shipped.finished_at is not None and shipped.started_at is not None
    assert shipped.enqueued_at is not None and shipped.enqueued_at <= shipped.started_at
    assert shop.Order.objects.using(shop.database).get(id=order_id).shipped  # the worker's write

    failed = tasks.charge.get_result(failing.id)
    assert failed.status == TaskResultStatus.FAILED
    assert failed.attempts == 2  # MAX_ATTEMPTS 2: retried once, then dead
    assert len(failed.errors) == 2  # one per attempt, from the attempt history
    for error in failed.errors:
        path = "tests.django_backend.project.shop.tasks.PaymentDeclined"
        assert error.exception_class_path == path
        assert error.exception_class is tasks.PaymentDeclined
        assert "card declined for 7" in error.traceback and "Traceback" in error.traceback
    assert len(failed.worker_ids) == 2 and "unknown" not in failed.worker_ids
    assert failed.finished_at is not None
    with pytest.raises(ValueError, match="failed"):
        _ = failed.return_value

    context = tasks.which_attempt.get_result(with_context.id)
    assert context.return_value == {"label": "ctx", "attempt": 1, "id": with_context.id}
    assert tasks.add_slowly.get_result(coroutine.id).return_value == 42

    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 0, shop.worker_log()

    seen = shop.signals()
    worker_pid = worker.pid

    def of(task: str, name: str) -> list[dict[str, Any]]:
        return [s for s in seen if s["task"] == task and s["signal"] == name]

    (enqueued,) = of("ship", "enqueued")
    assert enqueued["pid"] != worker_pid and enqueued["sender"] == "AlkstoreBackend"
    assert enqueued["status"] == "READY" and enqueued["id"] == shipped_id
    (started,) = of("ship", "started")
    assert (started["pid"], started["status"], started["attempts"]) == (worker_pid, "RUNNING", 1)
    (finished,) = of("ship", "finished")
    assert (finished["status"], finished["id"]) == ("SUCCESSFUL", shipped_id)
    # each attempt of the failing task: READY while it will be retried, then FAILED
    assert [s["status"] for s in of("charge", "finished")] == ["READY", "FAILED"]
    assert [s["attempts"] for s in of("charge", "started")] == [1, 2]


def test_a_job_naming_a_missing_or_broken_task_module_is_given_back_and_the_worker_goes_on(
    shop: Shop,
) -> None:
    from alkstore import QueueOpts

    queue = shop.store().queue("default", QueueOpts(max_attempts=1, retry_base_s=0))
    missing = queue.enqueue({"task": "no_such_module.task", "args": {"args": [], "kwargs": {}}})
    broken = queue.enqueue(
        {
            "task": "tests.django_backend.project.shop.broken_tasks.anything",
            "args": {"args": [], "kwargs": {}},
        }
    )
    good = shop.tasks.add_slowly.enqueue(1, 2)
    worker = shop.worker("--queue", "default")
    _wait(shop, good)
    assert shop.tasks.add_slowly.get_result(good.id).return_value == 3
    # given back unrun for a worker that knows them (a rolling deploy), no attempt spent
    for job_id in (missing, broken):
        job = queue.get_job(job_id)
        assert job is not None and job.attempts <= 1 and job.last_error is None
    assert worker.poll() is None
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 0
    assert "this module is broken" in shop.worker_log()


def test_the_worker_command_recycles_with_max_jobs_under_its_supervisor(shop: Shop) -> None:
    tasks = shop.tasks
    first = tasks.which_attempt.enqueue(label="one")
    second = tasks.which_attempt.enqueue(label="two")
    worker = shop.worker("--max-jobs", "1")
    for result in (first, second):
        _wait(shop, result)
    assert tasks.which_attempt.get_result(second.id).status == TaskResultStatus.SUCCESSFUL
    # the third process (after the second recycle) must be up before the stop: a
    # SIGTERM while a fresh process still imports Django ends it by the signal (143)
    deadline = time.monotonic() + 60
    while shop.worker_log().count(", concurrency ") < 3:
        assert time.monotonic() < deadline, shop.worker_log()
        time.sleep(0.05)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 0
    log = shop.worker_log()
    assert "recycling: 1 job(s) started (--max-jobs 1)" in log
    assert log.count("worker process") >= 3  # started, recycled, started again
