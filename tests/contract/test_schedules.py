"""Schedules: each tick one job whoever enqueues it; missed-tick policies; no pile-up.

The scheduler is driven with explicit ``now`` values (a test clock), never sleeps.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

import alkstore
from alkstore.bookkeeping import Bookkeeping
from alkstore.schedules import Schedule, enqueue_due

from .rawsql import count_rows


def _app() -> tuple[alkstore.App, Any]:
    app = alkstore.App()

    @app.task(queue="periodic", name="tick")
    async def tick(label: str = "") -> None: ...

    return app, tick


def _start() -> float:
    # on a whole second (the ticks of "* * * * * *"), a minute ago: every tick is due
    return float(int(time.time()) - 60)


async def test_each_tick_is_one_job_however_many_schedulers_race(
    open_store,
    target,  # type: ignore[no-untyped-def]
) -> None:
    _, task = _app()
    schedule = Schedule(task, "* * * * * *", overlap=True)  # ticks pile up here: not run
    stores = [await open_store() for _ in range(3)]
    t0 = _start()
    assert await enqueue_due(stores[0], [schedule], now=t0 + 0.5) == []  # first sight: a mark
    for k in range(1, 11):
        await asyncio.gather(*(enqueue_due(s, [schedule], now=t0 + k + 0.5) for s in stores))
    jobs = await stores[0].admin().list_jobs("periodic", limit=100)
    ticks = sorted(alkstore.schedules.tick_of(j.payload).timestamp() for j in jobs)  # type: ignore[union-attr]
    assert ticks == [t0 + k for k in range(1, 11)]
    assert all(j.dedupe_key is not None and j.dedupe_key.startswith("tick:") for j in jobs)
    assert jobs[0].run_at.timestamp() == ticks[0]  # the job's run_at is its tick


async def test_a_stale_scheduler_cannot_enqueue_a_finished_tick_again(
    store: alkstore.Store,
    target,  # type: ignore[no-untyped-def]
) -> None:
    _, task = _app()
    schedule = Schedule(task, "* * * * * *")
    t0 = _start()
    await enqueue_due(store, [schedule], now=t0 + 0.5)
    [tick] = await enqueue_due(store, [schedule], now=t0 + 1.5)
    assert tick.enqueued is not None and not tick.enqueued.duplicate
    handle = await store.queue("periodic").claim_one("w")
    assert handle is not None and await handle.ack()
    # a worker that read the old mark enqueues the same tick: the window says duplicate
    q = store.queue("periodic")
    opts = alkstore.EnqueueOpts(
        dedupe_key=schedule.key(tick.at), dedupe_window_s=schedule.window_s(tick.at)
    )
    again = await q.enqueue_unique(schedule.payload(tick.at), opts)
    assert again.duplicate and again.id == tick.enqueued.id
    assert await count_rows(store, target) == (0, 0)
    marks = await store.admin().schedule_marks([schedule.name])
    await Bookkeeping(store).mark_schedule(schedule.name, t0, None)  # never moves back
    assert await store.admin().schedule_marks([schedule.name]) == marks


@pytest.mark.parametrize(
    ("missed", "expected"),
    [("latest", [10]), ("skip", []), ("all", [6, 7, 8, 9, 10])],
)
async def test_missed_ticks_after_downtime_follow_the_policy(
    store: alkstore.Store, missed: str, expected: list[int]
) -> None:
    _, task = _app()
    schedule = Schedule(task, "* * * * * *", missed=missed, max_missed=5, grace_s=0.2)  # type: ignore[arg-type]
    t0 = _start()
    await enqueue_due(store, [schedule], now=t0 + 0.5)
    done = await enqueue_due(store, [schedule], now=t0 + 10.5)  # 10 ticks were missed
    assert [round(t.at.timestamp() - t0) for t in done] == expected
    [(_, mark, _)] = await store.admin().schedule_marks([schedule.name])
    assert mark == t0 + 10  # handled up to the newest tick whatever the policy ran


async def test_a_tick_still_live_when_the_next_falls_due_does_not_pile_up(
    store: alkstore.Store,
) -> None:
    _, task = _app()
    schedule = Schedule(task, "* * * * * *")
    t0 = _start()
    await enqueue_due(store, [schedule], now=t0 + 0.5)
    [first] = await enqueue_due(store, [schedule], now=t0 + 1.5)
    handle = await store.queue("periodic").claim_one("w")  # tick 1 is running
    assert handle is not None and first.enqueued is not None
    [skipped] = await enqueue_due(store, [schedule], now=t0 + 2.5)
    assert skipped.enqueued is None
    assert await handle.ack()
    [third] = await enqueue_due(store, [schedule], now=t0 + 3.5)
    assert third.enqueued is not None and not third.enqueued.duplicate


async def test_several_schedules_of_one_task_keep_their_own_arguments(
    store: alkstore.Store,
) -> None:
    app, task = _app()
    app.periodic(cron="* * * * * *", args={"label": "a"})(task)
    app.periodic(cron="* * * * * *", args={"label": "b"})(task)
    t0 = _start()
    await enqueue_due(store, app.schedules, now=t0 + 0.5)
    await enqueue_due(store, app.schedules, now=t0 + 1.5)
    jobs = await store.admin().list_jobs("periodic")
    assert sorted(j.json()["args"]["label"] for j in jobs) == ["a", "b"]


@pytest.mark.parametrize(
    "bad",
    [
        {"cron": "not cron"},
        {"cron": "* * * * *", "timezone": "Mars/Olympus"},
        {"cron": "* * * * *", "missed": "some"},
        {"cron": "* * * * *", "max_missed": 0},
        {"cron": "* * * * *", "args": {"nope": 1}},
    ],
)
def test_bad_schedules_raise_a_typed_error(bad: dict[str, Any]) -> None:
    app, task = _app()
    with pytest.raises((alkstore.InvalidArgumentError, TypeError)):
        app.periodic(**bad)(task)
    assert app.schedules == []
