"""The pipelined worker: claim-ahead buffer, slots freed before outcomes are written,
cheap outcome records, and exactly-once across real worker processes."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import Any

import alkstore
from tests.acceptance import apps
from tests.acceptance.conftest import Workers, results, wait_until
from tests.conftest import Target


def _app(target: Target) -> alkstore.App:
    return alkstore.App(target.url, schema=target.schema)


async def test_stop_releases_buffered_jobs_unrun_with_their_attempt_uncounted(
    target: Target,
) -> None:
    app = _app(target)
    gate = asyncio.Event()
    started: list[int] = []

    @app.task(queue="p", name="slow", max_attempts=1)
    async def slow(n: int) -> None:
        started.append(n)
        await gate.wait()

    async with app:
        ids = await slow.defer_many([{"n": i} for i in range(6)])
        worker = app.worker(concurrency=2, prefetch=2, handle_signals=False, grace_s=30)
        run = asyncio.create_task(worker.run())
        # the handler tasks are created with the claim but start on a later loop turn
        await wait_until(
            lambda: _true(worker.running == 4 and len(started) == 2),
            what="2 running + 2 buffered",
        )
        assert sorted(started) == [0, 1]
        worker.stop()
        gate.set()
        assert await run == 0
        queue = app.store.queue("p")
        jobs = {i: await queue.get_job(i) for i in ids}
        assert jobs[ids[0]] is None and jobs[ids[1]] is None  # they ran and were acked
        for job_id in ids[2:]:  # released or never claimed: pending, no attempt used
            job = jobs[job_id]
            assert job is not None and (job.state, job.attempts) == ("pending", 0)
        assert sorted(started) == [0, 1]
        assert worker.counts == Counter({"success": 2})


async def test_stop_gives_a_full_buffer_back_in_one_statement_per_queue(
    target: Target,
) -> None:
    """A full claim-ahead buffer of two queues goes back at the stop with one
    release_batch per queue (the database underneath real): every buffered job
    pending again at its place in line, its attempt uncounted."""
    app = _app(target)
    gate = asyncio.Event()
    started: list[int] = []

    async def hold(n: int) -> None:
        started.append(n)
        await gate.wait()

    hold_a = app.task(queue="a", name="hold_a", max_attempts=1)(hold)
    hold_b = app.task(queue="b", name="hold_b", max_attempts=1)(hold)
    async with app:
        store = await app.connect()
        # 8 slots and a buffer of 8: the first claim takes 12 of a (8 start, 4 wait),
        # the next 4 of b; the last 8 of b stay unclaimed
        ids = await hold_a.defer_many([{"n": i} for i in range(12)])
        ids += await hold_b.defer_many([{"n": i} for i in range(12, 24)])
        before = {
            i: await store.queue("ab"[i >= 12]).get_job(job_id) for i, job_id in enumerate(ids)
        }
        engine: Any = store._engine
        calls: list[tuple[str, int]] = []
        singles: list[int] = []
        release_batch, release = engine.release_batch, engine.release

        async def batch_spy(queue: str, items: Any) -> set[int]:
            calls.append((queue, len(items)))
            return await release_batch(queue, items)  # type: ignore[no-any-return]

        async def single_spy(*args: Any) -> bool:
            singles.append(args[1])
            return await release(*args)  # type: ignore[no-any-return]

        engine.release_batch, engine.release = batch_spy, single_spy
        worker = app.worker(["a", "b"], concurrency=8, prefetch=8, handle_signals=False)
        run = asyncio.create_task(worker.run())
        await wait_until(
            lambda: _true(len(started) == 8 and worker._producer.held_counts()[1] == 8),
            what="8 running + 8 buffered",
        )
        worker.stop()
        gate.set()
        assert await run == 0
        assert sorted(calls) == [("a", 4), ("b", 4)]  # one statement per queue
        assert singles == []
        ran = set(started)
        for i, job_id in enumerate(ids):
            job = await store.queue("ab"[i >= 12]).get_job(job_id)
            if i in ran:
                assert job is None  # ran and was acked
                continue
            old = before[i]
            assert job is not None and old is not None
            assert (job.state, job.attempts, job.worker_id) == ("pending", 0, None)
            assert job.run_at == old.run_at
        assert len(ran) == 8
        assert worker.counts == Counter({"success": 8})


async def test_a_freed_slot_starts_the_next_job_while_outcomes_are_written(
    target: Target,
) -> None:
    """Handlers of the second wave start before the first wave's acks returned."""
    app = _app(target)
    events: list[str] = []
    done = 0

    @app.task(queue="p", name="mark")
    async def mark(n: int) -> None:
        nonlocal done
        events.append(f"run{n}")
        done += 1
        if done == 8:
            worker.stop()

    async with app:
        await mark.defer_many([{"n": i} for i in range(8)])
        worker = app.worker(concurrency=2, prefetch=6, handle_signals=False)
        store = await app.connect()
        original = store._ack_receipted

        async def traced(handles: Any, owner: str, token: str) -> list[bool]:
            events.append("ack-sent")
            answers = await original(handles, owner, token)
            events.append("ack-done")
            return answers

        store._ack_receipted = traced  # type: ignore[method-assign]
        assert await worker.run() == 0
        assert worker.counts == Counter({"success": 8})
        first_ack_done = events.index("ack-done")
        # with 2 slots, at least a third handler ran before any ack came back
        assert sum(1 for e in events[:first_ack_done] if e.startswith("run")) >= 3


async def test_an_ack_whose_reply_was_lost_counts_as_success_not_lost(target: Target) -> None:
    """The first ack batch commits, then its reply is lost (the connection died on
    the way back): the retry's receipt proves the rows were acked by that attempt."""
    app = _app(target)
    done = 0

    @app.task(queue="p", name="once")
    async def once(n: int) -> None:
        nonlocal done
        done += 1
        if done == 4:
            worker.stop()

    async with app:
        ids = await once.defer_many([{"n": i} for i in range(4)])
        worker = app.worker(concurrency=4, prefetch=0, handle_signals=False)
        store = await app.connect()
        original = store._ack_receipted
        calls = 0

        async def reply_lost_once(handles: Any, owner: str, token: str) -> list[bool]:
            nonlocal calls
            calls += 1
            answers = await original(handles, owner, token)  # committed for real
            if calls == 1:
                raise alkstore.EngineError("connection lost after commit")
            return answers

        store._ack_receipted = reply_lost_once  # type: ignore[method-assign]
        assert await worker.run() == 0
        assert calls >= 2
        assert worker.counts["lost"] == 0 and worker.counts["success"] == 4
        queue = app.store.queue("p")
        assert [await queue.get_job(i) for i in ids] == [None] * 4
        assert done == 4  # each ran once


async def test_a_gone_row_after_a_failed_ack_is_never_counted_as_success(
    target: Target,
) -> None:
    """The first ack batch fails without committing; meanwhile the rows disappear by
    another hand (here a cancel; in production another host that reclaimed and acked
    them). The retry finds them gone: unproven, so ``lost``, never ``success``."""
    app = _app(target)
    done = 0

    @app.task(queue="p", name="once")
    async def once(n: int) -> None:
        nonlocal done
        done += 1
        if done == 3:
            worker.stop()

    async with app:
        await once.defer_many([{"n": i} for i in range(3)])
        worker = app.worker(concurrency=3, prefetch=0, handle_signals=False)
        store = await app.connect()
        original = store._ack_receipted
        calls = 0

        async def taken_meanwhile(handles: Any, owner: str, token: str) -> list[bool]:
            nonlocal calls
            calls += 1
            if calls == 1:
                for handle in handles:  # gone, but not by this worker's ack
                    await store.queue("p").cancel(handle.job.id)
                raise alkstore.EngineError("connection lost before commit")
            return await original(handles, owner, token)

        store._ack_receipted = taken_meanwhile  # type: ignore[method-assign]
        assert await worker.run() == 0
        assert calls >= 2 and done == 3
        assert worker.counts["success"] == 0 and worker.counts["lost"] == 3


async def test_outcome_lines_are_ordinary_records(target: Target) -> None:
    app = _app(target)
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    @app.task(queue="p", name="ok")
    async def ok(n: int) -> None:
        if n == 3:
            worker.stop()

    logger = logging.getLogger("alkstore.worker")
    handler = Keep(logging.DEBUG)
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.DEBUG)  # a success's own line is DEBUG
    try:
        async with app:
            ids = await ok.defer_many([{"n": i} for i in range(4)])
            worker = app.worker(concurrency=1, prefetch=0, handle_signals=False)
            await worker.run()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    lines = [r for r in records if r.getMessage().startswith("job outcome=")]
    assert [r.alkstore["id"] for r in lines] == ids  # type: ignore[attr-defined]
    for record, job_id in zip(lines, ids, strict=True):
        assert record.levelname == "DEBUG" and record.name == "alkstore.worker"
        assert record.funcName == "_log" and record.pathname.endswith("completer.py")
        assert f"id={job_id} " in record.getMessage()
        assert record.alkstore["outcome"] == "success"  # type: ignore[attr-defined]
        assert record.exc_info is None and record.args == ()
    created = [r.created for r in lines]
    assert created == sorted(created) and len({id(r) for r in lines}) == len(lines)


async def test_three_pipelined_worker_processes_run_each_job_exactly_once(
    app_store: alkstore.Store, workers: Workers
) -> None:
    keys = [f"k{i}" for i in range(300)]
    ids = await apps.echo.defer_many([{"key": k} for k in keys])
    for _ in range(3):
        workers.start("--concurrency", "8", "--prefetch", "8")

    async def all_ran() -> bool:
        return len(await results(app_store)) >= len(keys)

    await wait_until(all_ran, timeout=60, what="every job to run")
    for proc in workers.procs:
        proc.terminate()
    for proc in workers.procs:
        assert proc.wait(30) == 0
    seen = Counter(r["key"] for r in await results(app_store))
    assert seen == Counter(keys)  # each ran once, none twice
    queue = app_store.queue("work")
    assert [await queue.get_job(i) for i in ids] == [None] * len(ids)  # every one acked


async def test_long_handlers_shrink_the_claim_ahead_buffer(target: Target) -> None:
    """Handlers far slower than PREFETCH_WAIT_S: nothing is claimed ahead of them."""
    app = _app(target)
    gate = asyncio.Event()
    ran = 0

    @app.task(queue="p", name="slowish")
    async def slowish(n: int) -> None:
        nonlocal ran
        ran += 1
        if ran > 2:  # the first two measure the run time; the rest wait
            await gate.wait()
        else:
            await asyncio.sleep(0.2)

    async with app:
        await slowish.defer_many([{"n": i} for i in range(20)])
        worker = app.worker(concurrency=2, prefetch=8, handle_signals=False)
        run = asyncio.create_task(worker.run())
        await wait_until(lambda: _true(ran >= 4), what="two measured runs, two waiting")
        await asyncio.sleep(0.3)  # the claim loop has had its chance to over-claim
        assert worker._producer.claim_ahead() == 0
        assert worker.running <= 2 + 2  # the running two, and at most the first buffer
        worker.stop()
        gate.set()
        assert await run == 0


async def _true(value: Any) -> bool:
    return bool(value)
