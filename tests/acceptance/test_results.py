"""Kept results through a real worker process: defer, await the call, read it in the CLI."""

from __future__ import annotations

import json

import pytest

import alkstore
from tests.acceptance import apps
from tests.acceptance.conftest import Workers, run_cli


async def test_await_a_deferred_call_for_its_result_and_see_it_in_the_cli(
    app_store: alkstore.Store, workers: Workers, target
) -> None:  # type: ignore[no-untyped-def]
    call = await apps.adds.defer(2, 40)
    assert isinstance(call, int) and not call.duplicate  # still the job id
    workers.start()
    assert await call.result(timeout_s=60) == {"sum": 42}
    shown = run_cli(target, "jobs", "show", str(call))
    assert shown.returncode == 0, shown.stderr
    assert "success" in shown.stdout and '"sum": 42' in shown.stdout
    listed = run_cli(target, "jobs", "outcomes", "work")
    assert listed.returncode == 0 and str(call.id) in listed.stdout
    as_json = json.loads(run_cli(target, "jobs", "show", str(call), "--json").stdout)
    assert as_json["outcome"] == "success" and as_json["result"] == {"sum": 42}
    assert as_json["finished_at"].endswith("Z")
    listed_json = json.loads(run_cli(target, "jobs", "outcomes", "work", "--json").stdout)
    assert {"id": call.id, "result": {"sum": 42}}.items() <= listed_json[0].items()


async def test_a_return_value_that_is_not_json_fails_the_attempt_with_a_clear_error(
    app_store: alkstore.Store, workers: Workers
) -> None:
    call = await apps.returns_a_set.defer()
    workers.start()
    with pytest.raises(alkstore.JobDeadError) as caught:
        await call.result(timeout_s=60)
    assert caught.value.attempts == 2
    assert caught.value.last_error is not None
    assert "not JSON-serialisable" in caught.value.last_error


async def test_a_dead_call_raises_with_its_last_error(
    app_store: alkstore.Store, workers: Workers
) -> None:
    call = await apps.dies_keeping.defer("order-7")
    workers.start()
    with pytest.raises(alkstore.JobDeadError, match="order-7 is broken"):
        await call.result(timeout_s=60)


async def test_configure_dedupe_key_defers_once_while_live(app_store: alkstore.Store) -> None:
    first = await apps.echo.configure(dedupe_key="once").defer("k1")
    again = await apps.echo.configure(dedupe_key="once").defer("k2")
    assert again == first and again.duplicate and not first.duplicate
    job = await app_store.admin().find_job(first)
    assert job is not None and job.dedupe_key == "once"
    with pytest.raises(alkstore.InvalidArgumentError, match="keeps no results"):
        await first.result()
