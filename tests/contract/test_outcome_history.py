"""The per-minute outcome history the dashboard charts (migration 0011): kept a
week by default, purged past the writer's retention, summed per bucket and queue."""

from __future__ import annotations

import pytest

import alkstore
from alkstore import InvalidArgumentError, InvalidNameError
from alkstore.bookkeeping import Bookkeeping

from .conftest import Clock

DAY = 24 * 3600.0


def _totals(history: list[alkstore.admin.OutcomeCount]) -> dict[tuple[str, str], int]:
    totals: dict[tuple[str, str], int] = {}
    for h in history:
        totals[(h.queue, h.outcome)] = totals.get((h.queue, h.outcome), 0) + h.jobs
    return totals


async def test_history_is_kept_for_a_week_by_default_then_purged(
    store: alkstore.Store, clock: Clock
) -> None:
    admin = store.admin()
    books = Bookkeeping(store)
    await books.record_outcomes([("a", "success", 3)])
    clock.advance(3 * DAY)  # a day's retention would have dropped the first minute here
    await books.record_outcomes([("a", "success", 2)])
    week = await admin.outcome_history(7 * 1440)
    assert [h.jobs for h in week] == [3, 2]
    assert [h.jobs for h in await admin.outcome_history(1440)] == [2]
    clock.advance(5 * DAY)  # the first minute is now 8 days old
    await books.record_outcomes([("a", "dead", 1)])
    assert _totals(await admin.outcome_history(30 * 1440)) == {
        ("a", "success"): 2,
        ("a", "dead"): 1,
    }


async def test_a_shorter_retention_purges_sooner(store: alkstore.Store, clock: Clock) -> None:
    admin = store.admin()
    books = Bookkeeping(store)
    await books.record_outcomes([("a", "success", 1)], keep_s=3600)
    clock.advance(2 * 3600)
    await books.record_outcomes([("a", "retry", 1)], keep_s=3600)
    assert _totals(await admin.outcome_history(1440)) == {("a", "retry"): 1}


async def test_history_sums_per_bucket_and_filters_one_queue(
    store: alkstore.Store, clock: Clock
) -> None:
    admin = store.admin()
    books = Bookkeeping(store)
    start = clock.now
    clock.advance(-(start % 7200) + 60)  # a minute into a two-hour bucket
    for _ in range(3):  # three minutes of the same bucket
        await books.record_outcomes([("a", "success", 2), ("a", "retry", 1), ("b", "success", 5)])
        clock.advance(60)
    summed = await admin.outcome_history(7 * 1440, bucket_minutes=120)
    assert _totals(summed) == {("a", "success"): 6, ("a", "retry"): 3, ("b", "success"): 15}
    assert len({h.minute for h in summed}) == 1
    assert next(iter({h.minute for h in summed})).timestamp() % 7200 == 0
    only_a = await admin.outcome_history(7 * 1440, queue="a", bucket_minutes=120)
    assert _totals(only_a) == {("a", "success"): 6, ("a", "retry"): 3}
    per_minute = await admin.outcome_history(60, queue="b")
    assert [h.jobs for h in per_minute] == [5, 5, 5]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"minutes": 0}, InvalidArgumentError, "minutes must be an int in"),
        ({"minutes": 366 * 1440 + 1}, InvalidArgumentError, "minutes must be"),
        ({"minutes": 60, "bucket_minutes": 0}, InvalidArgumentError, "bucket_minutes"),
        ({"minutes": 60, "bucket_minutes": 61}, InvalidArgumentError, "bucket_minutes"),
        ({"minutes": 60, "queue": "no spaces"}, InvalidNameError, "no spaces"),
    ],
)
async def test_bad_history_reads_are_refused_naming_the_value(
    store: alkstore.Store, kwargs: dict[str, object], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        await store.admin().outcome_history(**kwargs)  # type: ignore[arg-type]


async def test_bad_retention_is_refused(store: alkstore.Store) -> None:
    with pytest.raises(InvalidArgumentError, match="keep_s"):
        await Bookkeeping(store).record_outcomes([("a", "success", 1)], keep_s=0)
