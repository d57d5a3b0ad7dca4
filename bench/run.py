"""Queue benchmarks on every engine, side by side: ``python bench/run.py``.

Measures, per engine (median of ``--runs`` runs, each on a fresh store):
- enqueue rate: single ``enqueue``, ``enqueue_many`` of 100 and of 1000;
- end-to-end drain: N jobs enqueued first, then worker processes claim and ack
  (``claim_one`` + ``ack``, and ``claim_batch`` + ``ack_batch`` of 100 and 1000);
- wake latency: enqueue commit → job in the hand of a consumer waiting in
  ``queue.jobs()``, in the same process and in another process, and
  ``defer()`` commit → handler start in an idle worker (``app.worker(concurrency=8)``)
  in another process (p50 / p99);
- on PostgreSQL, single-enqueue rate with wakes on, coalesced and off.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    Target,
    engine_home,
    fresh_target,
    median,
    percentile,
    postgres_available,
    render_table,
)

import alkstore

QUEUE = "bench"


async def _open(target: Target) -> alkstore.Store:
    return await alkstore.connect(target.url, **target.kwargs())


# -- enqueue ---------------------------------------------------------------------
async def enqueue_rate(target: Target, total: int, batch: int) -> float:
    async with await _open(target) as store:
        q = store.queue(QUEUE)
        payloads = [b'{"n":1}'] * batch
        start = time.perf_counter()
        if batch == 1:
            for _ in range(total):
                await q.enqueue(b'{"n":1}')
        else:
            for _ in range(total // batch):
                await q.enqueue_many(payloads)
        return total / (time.perf_counter() - start)


# -- drain -------------------------------------------------------------------------
def _drain_process(target: Target, batch: int, tasks: int, go: Any, out: Any) -> None:
    async def main() -> int:
        async with await _open(target) as store:
            q = store.queue(QUEUE)
            # warm the connection(s) before the clock starts
            await q.get_job(0)
            go.wait()

            async def one_task(i: int) -> int:
                done = 0
                worker = f"w{i}"
                if batch == 1:
                    while (h := await q.claim_one(worker)) is not None:
                        done += await h.ack()
                else:
                    while hs := await q.claim_batch(worker, batch):
                        done += await q.ack_batch([h.job.id for h in hs])
                return done

            return sum(await asyncio.gather(*(one_task(i) for i in range(tasks))))

    out.put(asyncio.run(main()))


async def _fill(target: Target, total: int) -> None:
    async with await _open(target) as store:
        q = store.queue(QUEUE)
        chunk = [b'{"n":1}'] * 1000
        for start in range(0, total, 1000):
            await q.enqueue_many(chunk[: min(1000, total - start)])


def drain_rate(target: Target, total: int, batch: int, procs: int, tasks: int) -> float:
    asyncio.run(_fill(target, total))
    ctx = mp.get_context("spawn")
    go, out = ctx.Event(), ctx.Queue()
    workers = [
        ctx.Process(target=_drain_process, args=(target, batch, tasks, go, out))
        for _ in range(procs)
    ]
    for w in workers:
        w.start()
    time.sleep(1.5)  # let every process connect and warm up
    start = time.perf_counter()
    go.set()
    done = sum(out.get(timeout=600) for _ in workers)
    elapsed = time.perf_counter() - start
    for w in workers:
        w.join()
    if done != total:
        raise RuntimeError(f"drained {done} of {total}")
    return total / elapsed


# -- wake latency ---------------------------------------------------------------------
async def _consume(target: Target, n: int, ready: Callable[[], None]) -> dict[int, float]:
    seen: dict[int, float] = {}
    async with await _open(target) as store:
        q = store.queue(QUEUE)
        agen = q.jobs("waiter", poll_interval_s=5.0)
        ready_sent = False
        # prime: the iterator starts listening on its first __anext__
        first = asyncio.ensure_future(agen.__anext__())
        await asyncio.sleep(0.3)
        ready()
        ready_sent = True
        handle = await first
        while True:
            seen[handle.job.id] = time.time()
            await handle.ack()
            if len(seen) >= n:
                break
            handle = await agen.__anext__()
        await agen.aclose()
    assert ready_sent
    return seen


def _consumer_process(target: Target, n: int, ready: Any, out: Any) -> None:
    out.put(asyncio.run(_consume(target, n, ready.set)))


async def _produce(target: Target, n: int, gap_s: float) -> dict[int, float]:
    sent: dict[int, float] = {}
    async with await _open(target) as store:
        q = store.queue(QUEUE)
        for _ in range(n):
            job_id = await q.enqueue(b"x")
            sent[job_id] = time.time()
            await asyncio.sleep(gap_s)
    return sent


def _latencies(sent: dict[int, float], seen: dict[int, float]) -> list[float]:
    return [(seen[i] - sent[i]) * 1000 for i in sent if i in seen]


def _wake_from_another_process(
    consumer_process: Callable[..., None],
    produce: Callable[[Target, int, float], Any],
    target: Target,
    n: int,
    gap_s: float,
) -> list[float]:
    """Latencies of ``n`` probes: ``produce`` here, ``consumer_process`` in a child."""
    ctx = mp.get_context("spawn")
    ready, out = ctx.Event(), ctx.Queue()
    consumer = ctx.Process(target=consumer_process, args=(target, n, ready, out))
    consumer.start()
    if not ready.wait(60):
        raise RuntimeError("consumer did not start")
    sent = asyncio.run(produce(target, n, gap_s))
    seen = out.get(timeout=120)
    consumer.join()
    return _latencies(sent, seen)


def wake_cross_process(target: Target, n: int, gap_s: float) -> list[float]:
    return _wake_from_another_process(_consumer_process, _produce, target, n, gap_s)


async def wake_in_process(target: Target, n: int, gap_s: float) -> list[float]:
    ready = asyncio.Event()
    consumer = asyncio.create_task(_consume(target, n, ready.set))
    await ready.wait()
    sent = await _produce(target, n, gap_s)
    seen = await consumer
    return _latencies(sent, seen)


def _probe_app(target: Target, on_run: Callable[[int], None]) -> tuple[alkstore.App, Any]:
    app = alkstore.App(target.url, **target.kwargs())

    @app.task(queue=QUEUE, name="wake_probe")
    async def probe(seq: int) -> None:
        on_run(seq)

    return app, probe


def _worker_consumer_process(target: Target, n: int, ready: Any, out: Any) -> None:
    async def main() -> dict[int, float]:
        seen: dict[int, float] = {}
        worker: list[Any] = []

        def on_run(seq: int) -> None:
            seen[seq] = time.time()
            if len(seen) >= n:
                worker[0].stop()

        app, _ = _probe_app(target, on_run)
        worker.append(app.worker(concurrency=8, handle_signals=False))
        run = asyncio.ensure_future(worker[0].run())
        await asyncio.sleep(0.5)  # connected, listening and idle
        ready.set()
        await run
        await app.close()
        return seen

    out.put(asyncio.run(main()))


async def _defer_probes(target: Target, n: int, gap_s: float) -> dict[int, float]:
    sent: dict[int, float] = {}
    app, probe = _probe_app(target, lambda seq: None)
    async with app:
        for seq in range(n):
            await probe.defer(seq=seq)
            sent[seq] = time.time()
            await asyncio.sleep(gap_s)
    return sent


def wake_worker(target: Target, n: int, gap_s: float) -> list[float]:
    """``defer()`` commit → handler start in an idle worker in another process."""
    return _wake_from_another_process(_worker_consumer_process, _defer_probes, target, n, gap_s)


# -- driver ------------------------------------------------------------------------------
def rate(value: float) -> str:
    return f"{value:,.0f}/s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--engines", default="sqlite,postgres")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="smaller N, for a smoke run")
    parser.add_argument("--procs", type=int, default=2, help="drain worker processes")
    args = parser.parse_args()
    engines = [e for e in args.engines.split(",") if e]
    if "postgres" in engines and not postgres_available():
        print("PostgreSQL unreachable: skipping it", file=sys.stderr)
        engines.remove("postgres")
    scale = 0.2 if args.quick else 1.0
    n_single, n_batch = int(2000 * scale), int(50_000 * scale)
    probes = int(200 * scale)

    metrics: list[tuple[str, Callable[[Target], float | list[float]]]] = [
        ("enqueue, single", lambda t: enqueue_rate_sync(t, n_single, 1)),
        ("enqueue_many ×100", lambda t: enqueue_rate_sync(t, n_batch, 100)),
        ("enqueue_many ×1000", lambda t: enqueue_rate_sync(t, n_batch, 1000)),
        (
            f"drain, claim_one+ack ({args.procs} procs × 4 tasks)",
            lambda t: drain_rate(t, n_single, 1, args.procs, 4),
        ),
        (
            f"drain, batch 100 ({args.procs} procs)",
            lambda t: drain_rate(t, n_batch, 100, args.procs, 1),
        ),
        (
            f"drain, batch 1000 ({args.procs} procs)",
            lambda t: drain_rate(t, n_batch, 1000, args.procs, 1),
        ),
        ("wake, in-process", lambda t: asyncio.run(wake_in_process(t, probes, 0.01))),
        ("wake, cross-process", lambda t: wake_cross_process(t, probes, 0.01)),
        ("wake, worker in another process", lambda t: wake_worker(t, probes, 0.01)),
    ]
    results: dict[str, dict[str, str]] = {}
    for engine in engines:
        results[engine] = {}
        with engine_home(engine) as home:
            for label, fn in metrics:
                samples = [fn(fresh_target(engine, home)) for _ in range(args.runs)]
                if isinstance(samples[0], list):
                    p50 = median([percentile(s, 50) for s in samples])  # type: ignore[arg-type]
                    p99 = median([percentile(s, 99) for s in samples])  # type: ignore[arg-type]
                    results[engine][label] = f"p50 {p50:.2f} ms · p99 {p99:.2f} ms"
                else:
                    results[engine][label] = rate(median(samples))  # type: ignore[arg-type]
                print(f"{engine:9} {label:40} {results[engine][label]}", file=sys.stderr)
            if engine == "postgres":
                for mode in ("on", "coalesce", "off"):
                    label = f"enqueue, single, wake={mode}"
                    samples = [
                        enqueue_rate_sync(fresh_target(engine, home, f"?wake={mode}"), n_single, 1)
                        for _ in range(args.runs)
                    ]
                    results[engine][label] = rate(median(samples))
                    print(f"{engine:9} {label:40} {results[engine][label]}", file=sys.stderr)
    labels = list(dict.fromkeys(label for r in results.values() for label in r))
    rows = [[label, *(results[e].get(label, "–") for e in engines)] for label in labels]
    note = f"median of {args.runs} runs" + (" (quick)" if args.quick else "")
    print(render_table(f"alkstore queue benchmarks ({note})", ["metric", *engines], rows))


def enqueue_rate_sync(target: Target, total: int, batch: int) -> float:
    return asyncio.run(enqueue_rate(target, total, batch))


if __name__ == "__main__":
    main()
