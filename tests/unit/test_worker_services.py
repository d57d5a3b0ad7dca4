"""The worker's runs, producer arithmetic, completer bookkeeping and maintenance
services, on their I/O-free sides (no database)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from typing import Any

import pytest

import alkstore
from alkstore.consume import ClaimLoop
from alkstore.errors import EngineError
from alkstore.tasks import encode_call
from alkstore.worker.cancels import _parse
from alkstore.worker.completer import Completer
from alkstore.worker.executor import Executor
from alkstore.worker.heartbeats import Heartbeats
from alkstore.worker.netwait import DbWaits
from alkstore.worker.outcome import Kind, Outcome
from alkstore.worker.producer import PREFETCH_WAIT_S, Producer
from alkstore.worker.runs import DONE, LOST, Run, StopFlag, beat_period, lapse_margin, task_name
from alkstore.worker.unknown import UnknownTasks

from .worker_runs import make_run


def test_beat_period_and_lapse_margin() -> None:
    assert beat_period(30.0, None) == 10.0
    assert beat_period(30.0, 1.0) == 1.0  # a poll-only store beats every poll at least
    assert lapse_margin(30.0) == 1.0 and lapse_margin(2.0) == 0.5


def test_a_run_names_its_task_and_says_whether_it_is_revoked() -> None:
    run = make_run(encode_call("shop.charge", {}))
    assert task_name(run) == "shop.charge" and run.revoked is None
    assert task_name(make_run(b"{not json")) == "?"
    run.state = LOST
    assert run.revoked == "lost"


async def test_a_call_failing_after_another_answered_does_not_count_the_database_away(
    caplog: Any,
) -> None:
    db = DbWaits("w", timeout_s=0.05)
    db.start()
    caplog.set_level(logging.WARNING, "alkstore.worker")
    hung = asyncio.ensure_future(db.call(asyncio.Event().wait(), "hung"))
    await asyncio.sleep(0)  # sent
    assert await db.call(asyncio.sleep(0, "ok"), "quick") == "ok"  # answered meanwhile
    with pytest.raises(EngineError, match=r"no answer from the database in 0\.05s"):
        await hung
    assert db.down_since is None and not caplog.records  # its own connection, not the database


async def test_a_call_whose_connection_the_server_ended_does_not_count_the_database_away(
    caplog: Any,
) -> None:
    """After a restart, the first statement on a connection opened before it reads the
    server's goodbye (57P01): the database answers, that connection is gone."""
    db = DbWaits("w")
    db.start()
    caplog.set_level(logging.WARNING, "alkstore.worker")

    async def ended() -> None:
        raise EngineError("terminating connection", connection_ended=True)

    with pytest.raises(EngineError):
        await db.call(ended(), "ack")
    assert db.down_since is None and not caplog.records

    async def refused() -> None:
        raise EngineError("connection refused")

    with pytest.raises(EngineError):
        await db.call(refused(), "ack")  # the next call decides
    assert db.down_since is not None


async def test_a_pause_while_the_database_is_away_ends_when_a_call_gets_through(
    caplog: Any,
) -> None:
    db = DbWaits("w")
    db.start()
    caplog.set_level(logging.WARNING, "alkstore.worker")

    async def refused() -> None:
        raise EngineError("connection refused")

    async def hour(seconds: float) -> None:
        await asyncio.sleep(seconds)

    with pytest.raises(EngineError):
        await db.call(refused(), "claim")
    assert db.down_since is not None
    paused = asyncio.ensure_future(db.until_back(hour, 3600.0))
    await asyncio.sleep(0)
    assert not paused.done()
    await db.call(asyncio.sleep(0), "beat")  # the server is back: the pause ends
    await asyncio.wait_for(paused, 10)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "unreachable" in lines[0] and "reachable again" in lines[1]
    # while the database answers, a pause is slept out (a statement failing on its own)
    slept = asyncio.ensure_future(db.until_back(hour, 3600.0))
    await db.call(asyncio.sleep(0), "beat")
    await asyncio.sleep(0.01)
    assert not slept.done()
    slept.cancel()


def _producer(concurrency: int, prefetch: int) -> Producer:
    stop = StopFlag()
    app = alkstore.App("sqlite:///unused.db")
    executor = Executor(app, concurrency, stop, UnknownTasks("w", None))
    return Producer("w", concurrency, prefetch, 1.0, DbWaits("w"), stop, executor, None)


def test_the_claim_ahead_buffer_adapts_to_the_handlers_run_time() -> None:
    producer = _producer(concurrency=8, prefetch=128)
    assert producer.claim_ahead() == 8  # no handler finished yet: concurrency at most
    producer.duration_s = 0.0001  # millisecond jobs: the full buffer
    assert producer.claim_ahead() == 128
    producer.duration_s = PREFETCH_WAIT_S  # each slot finishes one job in the wait
    assert producer.claim_ahead() == 8
    producer.duration_s = 1.0  # long jobs are not hoarded
    assert producer.claim_ahead() == 0
    assert _producer(concurrency=8, prefetch=0).claim_ahead() == 0


def _completer(app: alkstore.App, held: set[Run], counts: Counter[str]) -> Completer:
    return Completer(
        None,  # type: ignore[arg-type]  # never written to in these tests
        app,
        "w",
        DbWaits("w"),
        StopFlag(),
        counts=counts,
        held=held,
        room=asyncio.Event(),
        presence=None,
        metrics=None,
    )


async def test_the_completer_records_a_revoked_run_and_writes_nothing(caplog: Any) -> None:
    counts: Counter[str] = Counter()
    run = make_run(encode_call("t", {}))
    completer = _completer(alkstore.App("sqlite:///unused.db"), {run}, counts)
    run.state = LOST
    caplog.set_level(logging.INFO, "alkstore.worker")
    assert completer.settle(run, Outcome(Kind.ACK, "t", "success"))  # no write, no batch
    assert counts == Counter({"lost": 1}) and completer.flushing is None
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith("job outcome=lost queue=q task=t id=7 attempt=1/5 ")
    assert line.endswith("error='the claim is no longer ours: the handler was stopped'")


async def test_the_completer_leaves_other_outcomes_to_write() -> None:
    run = make_run(encode_call("t", {}))
    run.state = DONE
    completer = _completer(alkstore.App("sqlite:///unused.db"), {run}, Counter())
    for kind in (Kind.RETRY, Kind.FAIL, Kind.SNOOZE, Kind.GIVE_BACK, Kind.ACK_RESULT):
        assert not completer.settle(run, Outcome(kind, "t", "x"))


def test_a_given_back_unknown_task_is_counted_but_not_logged_at_info(caplog: Any) -> None:
    counts: Counter[str] = Counter()
    run = make_run(encode_call("t", {}))
    completer = _completer(alkstore.App("sqlite:///unused.db"), set(), counts)
    caplog.set_level(logging.INFO, "alkstore.worker")
    completer.record(run, "t", "unknown", None)
    completer.record(run, "t", "retry", "boom")
    assert counts == Counter({"unknown": 1, "retry": 1})
    assert [r.alkstore["outcome"] for r in caplog.records] == ["retry"]  # type: ignore[attr-defined]


def test_successes_are_summarized_at_info_and_logged_one_by_one_at_debug(caplog: Any) -> None:
    counts: Counter[str] = Counter()
    run = make_run(encode_call("t", {}))
    completer = _completer(alkstore.App("sqlite:///unused.db"), set(), counts)
    caplog.set_level(logging.INFO, "alkstore.worker")
    completer.record(run, "t", "success", None)
    completer.record(run, "t", "success", None)
    completer.record(run, "t", "retry", "boom")
    assert [r.alkstore["outcome"] for r in caplog.records] == ["retry"]  # type: ignore[attr-defined]
    caplog.clear()
    completer.summarize()
    (summary,) = caplog.records
    assert summary.levelno == logging.INFO
    assert summary.getMessage().startswith("jobs done in ")
    assert ": 3 (" in summary.getMessage() and summary.getMessage().endswith(" retry=1 success=2")
    fields = summary.alkstore  # type: ignore[attr-defined]
    assert (fields["jobs"], fields["success"], fields["retry"]) == (3, 2, 1)
    caplog.clear()
    completer.summarize()  # nothing recorded since: no line
    assert caplog.records == []
    caplog.set_level(logging.DEBUG, "alkstore.worker")
    completer.record(run, "t", "success", None)
    (line,) = caplog.records
    assert line.levelno == logging.DEBUG and line.getMessage().startswith("job outcome=success ")
    caplog.clear()
    completer.summarize()
    assert [r.alkstore["jobs"] for r in caplog.records] == [1]  # type: ignore[attr-defined]


def test_a_claim_lapsing_by_the_worker_clock_is_revoked() -> None:
    revoked: list[tuple[int, str]] = []
    fresh = make_run(encode_call("t", {}), job_id=1, visibility_timeout_s=30.0)
    lapsing = make_run(
        encode_call("t", {}), job_id=2, visibility_timeout_s=30.0, sent=time.monotonic() - 29.5
    )
    done = make_run(encode_call("t", {}), job_id=3, sent=time.monotonic() - 60)
    done.state = DONE
    beats = Heartbeats(
        {fresh, lapsing, done},
        DbWaits("w"),
        None,
        lambda run, why: revoked.append((run.handle.job.id, why)),
    )
    beats._lapse(time.monotonic())
    assert revoked == [(2, "lost")]  # a second before its lapse; a done run is left alone


def test_a_new_claim_due_before_the_next_wake_wakes_the_heartbeats() -> None:
    beats = Heartbeats(set(), DbWaits("w"), None, lambda run, why: None)
    beats.beat_at = time.monotonic() + 3600
    run = make_run(encode_call("t", {}))
    beats.notice(run, time.monotonic())
    assert beats.changed.is_set()
    assert beats.horizon_s <= 10.0  # a third of its 30 s timeout: the longest sleep now
    beats.changed.clear()
    beats.beat_at = 0.0
    beats.notice(make_run(encode_call("t", {})), time.monotonic())
    assert not beats.changed.is_set()


async def test_the_heartbeats_sleep_while_claims_are_held_instead_of_spinning() -> None:
    """Held claims due in seconds: the service wakes once, plans its next wake at the
    earliest beat, and sleeps; later claims of the same timeout do not wake it (a
    drain of thousands of jobs a second once woke it for every batch, and a mistaken
    deadline made it spin while any claim was held)."""
    held: set[Run] = set()
    beats = Heartbeats(held, DbWaits("w"), None, lambda run, why: None)
    scans = 0
    lapse = beats._lapse

    def counted(now: float) -> None:
        nonlocal scans
        scans += 1
        lapse(now)

    beats._lapse = counted  # type: ignore[method-assign]
    service = asyncio.create_task(beats.run())
    try:
        for _ in range(50):
            run = make_run(encode_call("t", {}))
            held.add(run)
            beats.notice(run, time.monotonic())
            await asyncio.sleep(0)
        for _ in range(200):  # give a spinning loop every chance to show itself
            await asyncio.sleep(0)
        assert scans <= 2
        assert beats.beat_at > time.monotonic() + 5  # the next wake is the first beat's
    finally:
        service.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await service


def test_cancel_and_reclaim_notes_are_parsed_and_others_ignored() -> None:
    assert _parse("cancel:42") == ("cancelled", 42, None)
    assert _parse("reclaimed:42:3") == ("lost", 42, 3)
    for other in ("", "cancel:", "cancel:x", "reclaimed:1:2:3", "wake"):
        assert _parse(other) is None


async def test_a_job_revoked_before_its_task_began_runs_nothing_and_lets_go() -> None:
    ran: list[str] = []
    stop = StopFlag()
    app = alkstore.App("sqlite:///unused.db")

    @app.task(queue="q", name="t")
    async def t() -> None:
        ran.append("t")

    executor = Executor(app, 2, stop, UnknownTasks("w", None))
    producer = Producer("w", 2, 0, 1.0, DbWaits("w"), stop, executor, None)
    producer.open()
    counts: Counter[str] = Counter()
    producer.completer = _completer(app, producer.held, counts)
    run = make_run(encode_call("t", {}), running=False)
    producer.held.add(run)
    producer.ready.append(run)
    producer._fill()  # its task is created; its first step has not run yet
    assert run.task is not None and producer.active == 1
    executor.revoke(run, "cancelled")  # not a cancel of the task: it would skip its cleanup
    await run.task
    assert ran == [] and counts["cancelled"] == 1
    assert producer.active == 0 and not producer.held


def test_an_ack_batch_holds_one_run_per_job(caplog: Any) -> None:
    """Two runs of one job in a batch (two claims of it held at once) made the batch an
    error each retry met again until the claims lapsed: it now acks the job once and
    counts the other run lost."""
    first, again, other = (make_run(encode_call("t", {}), job_id=i) for i in (7, 7, 8))
    counts: Counter[str] = Counter()
    held = {first, again, other}
    completer = _completer(alkstore.App("sqlite:///unused.db"), held, counts)
    caplog.set_level(logging.WARNING, "alkstore.worker")
    assert completer._one_run_per_job([first, again, other]) == [first, other]
    assert held == {first, other} and counts == Counter({"lost": 1})
    assert "job 7: claimed twice at once (attempt 1); acked once" in caplog.text


async def test_a_claim_on_a_connection_the_server_ended_backs_off_from_the_start() -> None:
    """After an outage the claim loop's doubling stands at its 5-s cap; a claim that
    then fails because the server ended its connection (not because the database is
    away) starts the doubling over instead of sleeping 5 s."""
    db = DbWaits("w")
    db.start()
    pauses: list[float] = []

    async def pause(seconds: float) -> None:
        pauses.append(seconds)

    loop = ClaimLoop([], None, 1.0, pause=pause, own_fault=db.own_fault)  # type: ignore[arg-type]
    loop.failures = 10

    async def ended() -> None:
        raise EngineError("terminating connection", connection_ended=True)

    assert await loop.attempt(ended) is None
    assert loop.failures == 1 and pauses and pauses[0] <= 0.2
