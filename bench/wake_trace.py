"""Where one wake spends its time: ``defer()`` in this process -> handler in a worker process.

    .venv/bin/python bench/wake_trace.py [--samples 200] [--url postgresql://...|sqlite:///...]
                                         [--loop asyncio|uvloop]

An idle worker (``app.worker(concurrency=8)``) runs in a forked process; this
process defers one job at a time (20-50 ms apart, the next only after the
handler ran) and both sides stamp CLOCK_MONOTONIC (system-wide) at each step
of the wake by wrapping alkstore's own functions (no change to the library):

  producer: call start, insert returned (commit ack), defer returned,
            wake statement sent / returned (PostgreSQL's waker)
  worker:   notification read (a listener reading in a task), handed to the
            subscription (flush), wait_for_work returned, claim round started,
            claim called, pool connection in hand, statement returned, rows
            fetched, claim returned, rows taken (buffered), handler's first line

It prints, per step, the median and p99 of the time since the previous step
and since the commit ack, then the worker's own part: the handler from the ack
(and from the note handed over; from the ack or the read, whichever came first)
less the claim statement's round trip. Runs against a scratch schema (PostgreSQL) or a
temp file (SQLite), removed afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import random
import statistics
import tempfile
import time
import uuid
from typing import Any

FORK = multiprocessing.get_context("fork")
ns = time.monotonic_ns


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


def make_app(url: str, schema: str | None, on_job: Any) -> Any:
    import alkstore

    app = alkstore.App(url, schema=schema) if schema else alkstore.App(url)

    @app.task(queue="wake", name="noop")
    async def noop(seq: int) -> None:
        on_job(seq)

    return app, noop


def _trace_claim_statement(mark: Any) -> None:
    """Stamp the pool checkout and the round trip of the PostgreSQL claim statement."""
    from alkstore.engines.postgres import connections

    cls = connections.PostgresConnections
    orig = cls._fetchall

    async def _fetchall(self: Any, name: str, params: dict[str, Any]) -> Any:
        if name != "claim":
            return await orig(self, name, params)
        pool = self.check_open()
        t0 = ns()
        async with pool.connection() as conn:
            t1 = ns()
            cur = await conn.execute(self.q[name], self.timed(params), binary=True)
            t2 = ns()
            rows = await cur.fetchall()
            t3 = ns()
        if rows:
            stamps["call"], stamps["conn"], stamps["executed"], stamps["fetched"] = t0, t1, t2, t3
            stamps["returned_conn"] = ns()
        return rows

    stamps: dict[str, int] = {}
    mark.stamps = stamps  # type: ignore[attr-defined]
    cls._fetchall = _fetchall  # type: ignore[method-assign]
    if hasattr(cls, "_claim_rows"):  # the claim connection: call and return only
        orig_rows = cls._claim_rows

        async def _claim_rows(self: Any, name: str, params: dict[str, Any]) -> Any:
            t0 = ns()
            rows = await orig_rows(self, name, params)
            if rows:
                stamps.clear()
                stamps["call"], stamps["returned_conn"] = t0, ns()
            return rows

        cls._claim_rows = _claim_rows  # type: ignore[method-assign]


def worker_proc(url: str, schema: str | None, out_q: Any, ready: Any, stop: Any) -> None:
    from alkstore.consume import ClaimLoop
    from alkstore.queue import Queue

    marks: dict[str, int] = {}

    def mark(name: str, first: bool = True) -> None:
        if not first or name not in marks:
            marks[name] = ns()

    try:  # the PostgreSQL listener's read of a notification
        from alkstore.engines.postgres.listener import Listener

        def notes(conn: Any) -> Any:
            class Notes:  # the connection's notifies(), stamped as each note is read
                def __aiter__(self) -> Any:
                    self.it = conn.__class__.notifies(conn).__aiter__()
                    return self

                async def __anext__(self) -> Any:
                    note = await self.it.__anext__()
                    mark("note")
                    return note

            return Notes()

        if hasattr(Listener, "_pump"):  # read in a task (else a reader callback: no stamp)
            orig_pump = Listener._pump

            async def _pump(self: Any, conn: Any) -> None:
                conn.notifies = lambda: notes(conn)
                await orig_pump(self, conn)

            Listener._pump = _pump
        orig_sink = Listener.__init__

        def __init__(self: Any, connect: Any, sink: Any, **k: Any) -> None:
            def stamped(batch: Any) -> None:
                mark("flush")
                sink(batch)

            orig_sink(self, connect, sink=stamped, **k)

        Listener.__init__ = __init__  # type: ignore[method-assign]
        _trace_claim_statement(mark)
    except ImportError:
        pass
    try:
        from alkstore.worker.producer import Producer

        orig_round = Producer._claim_round

        async def _claim_round(self: Any, *a: Any) -> Any:
            mark("round", first=False)
            return await orig_round(self, *a)

        Producer._claim_round = _claim_round  # type: ignore[method-assign]
        orig_take = Producer._take

        def _take(self: Any, handles: Any, sent: float) -> None:
            if handles:
                marks["taken"] = ns()
            orig_take(self, handles, sent)

        Producer._take = _take  # type: ignore[method-assign]
    except ImportError:
        pass

    waits = "wait_idle" if hasattr(ClaimLoop, "wait_idle") else "wait_for_work"
    orig_wait = getattr(ClaimLoop, waits)

    async def wait_for_work(self: ClaimLoop, *a: Any) -> None:
        await orig_wait(self, *a)
        mark("woke", first=False)

    setattr(ClaimLoop, waits, wait_for_work)
    orig_claim = Queue.claim_held

    async def claim_held(self: Queue, worker_id: str, n: int) -> Any:
        sent = ns()
        out = await orig_claim(self, worker_id, n)
        if out[0]:
            marks["claim_sent"] = sent
            marks["claimed"] = ns()
        return out

    Queue.claim_held = claim_held  # type: ignore[method-assign]

    def on_job(seq: int) -> None:
        marks["handler"] = ns()
        marks.update(getattr(mark, "stamps", {}))
        out_q.put((seq, dict(marks)))
        marks.clear()

    async def main() -> None:
        app, _ = make_app(url, schema, on_job)
        worker = app.worker(concurrency=8, handle_signals=False)

        async def stopper() -> None:
            while not stop.is_set():
                await asyncio.sleep(0.1)
            worker.stop()

        task = asyncio.get_running_loop().create_task(stopper())
        ready.set()
        await worker.run()
        await app.close()
        del task

    run_loop(main())


def run_loop(coro: Any) -> Any:
    if LOOP == "uvloop":
        import uvloop

        return uvloop.run(coro)
    return asyncio.run(coro)


LOOP = "asyncio"


async def producer(url: str, schema: str | None, samples: int, out_q: Any) -> list[dict[str, int]]:
    app, noop = make_app(url, schema, lambda seq: None)
    store = await app.connect()
    marks: dict[str, int] = {}
    engine = store._engine
    orig_enqueue = type(engine).enqueue

    async def enqueue(self: Any, *a: Any, **k: Any) -> Any:
        out = await orig_enqueue(self, *a, **k)
        marks["ack"] = ns()
        return out

    type(engine).enqueue = enqueue
    waker_cls = None
    try:
        from alkstore.engines.postgres.waker import Waker

        waker_cls = Waker
        orig_send = Waker._send

        async def _send(self: Any, channels: list[str]) -> None:
            marks.setdefault("wake_sent", ns())
            await orig_send(self, channels)
            marks.setdefault("wake_done", ns())

        Waker._send = _send  # type: ignore[method-assign]
    except ImportError:
        pass
    del waker_cls
    loop = asyncio.get_running_loop()
    rows = []
    for seq in range(samples + 5):
        await asyncio.sleep(random.uniform(0.02, 0.05))
        marks.clear()
        marks["start"] = ns()
        await noop.defer(seq=seq)
        marks["returned"] = ns()
        got, theirs = await loop.run_in_executor(None, out_q.get, True, 30)
        assert got == seq, (got, seq)
        if seq >= 5:
            rows.append({**marks, **theirs})
    await app.close()
    return rows


ORDER = [
    "start",
    "ack",
    "returned",
    "wake_sent",
    "wake_done",
    "note",
    "flush",
    "woke",
    "round",
    "claim_sent",
    "call",
    "conn",
    "executed",
    "fetched",
    "returned_conn",
    "claimed",
    "taken",
    "handler",
]


def report(rows: list[dict[str, int]]) -> None:
    print(f"{'step':<12} {'from prev p50':>14} {'p99':>8} {'from ack p50':>13} {'p99':>8}  (ms)")
    for name in ORDER:
        have = [r for r in rows if name in r]
        if not have:
            continue
        prev = [
            max(
                (r[p] for p in ORDER[: ORDER.index(name)] if p in r and r[p] <= r[name]),
                default=r[name],
            )
            for r in have
        ]
        step = [(r[name] - p) / 1e6 for r, p in zip(have, prev, strict=True)]
        since = [(r[name] - r["ack"]) / 1e6 for r in have]
        print(
            f"{name:<12} {statistics.median(step):>14.3f} {pct(step, 99):>8.3f} "
            f"{statistics.median(since):>13.3f} {pct(since, 99):>8.3f}"
        )
    # the worker's own part: from the ack less the claim's round trip (the server's
    # share, and most of the run-to-run noise on a shared machine)
    own = [
        (r["handler"] - r["ack"] - (r["returned_conn"] - r["call"])) / 1e6
        for r in rows
        if "call" in r and "returned_conn" in r
    ]
    if own:
        print(f"handler from ack less the claim round trip: p50 {statistics.median(own):.3f}")
    # the same from the note handed to the subscription: both stamps in the worker (the
    # ack is the producer's, late now and then on a loaded machine), the read left out
    own = [
        (r["handler"] - r["flush"] - (r["returned_conn"] - r["call"])) / 1e6
        for r in rows
        if "call" in r and "returned_conn" in r and "flush" in r
    ]
    if own:
        print(f"handler from flush less the claim round trip: p50 {statistics.median(own):.3f}")
    # from the ack or the note's read, whichever came first (a producer descheduled
    # on a loaded machine sees its ack after the handler ran); the read is stamped
    # after psycopg's task resumed where the listener reads in a task ("note"), in the
    # reader callback otherwise ("flush"), so this anchor favours the former
    own = [
        (r["handler"] - min(r["ack"], r.get("note", r["flush"])) - (r["returned_conn"] - r["call"]))
        / 1e6
        for r in rows
        if "call" in r and "returned_conn" in r and "flush" in r
    ]
    if own:
        print(
            f"handler from ack or read less the claim round trip: p50 {statistics.median(own):.3f}"
        )
    total = [(r["handler"] - r["start"]) / 1e6 for r in rows]
    print(f"handler from call start: p50 {statistics.median(total):.3f} p99 {pct(total, 99):.3f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="postgresql://root@127.0.0.1:5432/test")
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    args = ap.parse_args()
    global LOOP
    LOOP = args.loop
    tmp = None
    schema = None
    url = args.url
    if url.startswith("postgres"):
        schema = "wake_trace_" + uuid.uuid4().hex[:8]
    else:
        tmp = tempfile.mkdtemp()
        url = f"sqlite:///{os.path.join(tmp, 'wake.db')}"
    try:
        out_q, ready, stop = FORK.Queue(), FORK.Event(), FORK.Event()
        # migrate first (the worker connects to a ready schema)
        app, _ = make_app(url, schema, lambda seq: None)

        async def migrate() -> None:
            await app.connect()
            await app.close()

        run_loop(migrate())
        proc = FORK.Process(target=worker_proc, args=(url, schema, out_q, ready, stop))
        proc.start()
        ready.wait(20)
        time.sleep(0.5)
        rows = run_loop(producer(url, schema, args.samples, out_q))
        stop.set()
        proc.join(10)
        if proc.is_alive():
            proc.terminate()
        report(rows)
    finally:
        if schema is not None:
            import psycopg

            with psycopg.connect(args.url, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        if tmp is not None:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
