"""Fan-in exactly once across real processes (docs/contract.md, "Dependencies")."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

import alkstore
from alkstore import EnqueueOpts, QueueOpts

from .together import start_together

PROCS = Path(__file__).with_name("depprocs.py")
WORKERS = 8
PARENTS = 2000
ROUNDS = 3
WAIT = 600.0  # generous: a whole round on a loaded 2-core machine


@pytest.mark.slow
async def test_eight_processes_acking_2000_parents_release_the_child_once_after_the_last(
    store: alkstore.Store,
    target,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    parentq = store.queue(qname, QueueOpts(visibility_timeout_s=900))
    childq = store.queue(qname + "c", QueueOpts(visibility_timeout_s=900))
    for round_ in range(ROUNDS):
        parents = await parentq.enqueue_many([f"p{i}" for i in range(PARENTS)])
        child = await childq.enqueue("fan-in", EnqueueOpts(after=tuple(parents)))
        procs = [
            await asyncio.create_subprocess_exec(
                sys.executable,
                str(PROCS),
                "fanin",
                target.url,
                target.schema,
                parentq.name,
                childq.name,
                f"w{round_}-{n}",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
            )
            for n in range(WORKERS)
        ]
        try:
            await start_together(procs, WAIT)
            outputs = await asyncio.wait_for(
                asyncio.gather(*(p.communicate() for p in procs)), WAIT
            )
        finally:
            for p in procs:
                if p.returncode is None:
                    p.kill()
                    await p.wait()
        assert [p.returncode for p in procs] == [0] * WORKERS
        logs = [json.loads(out) for out, _ in outputs]
        acks = [a for log in logs for a in log["acks"]]
        claims = [c for log in logs for c in log["children"]]
        assert sorted(a[0] for a in acks) == sorted(parents), "every parent acked once"
        assert sum(1 for log in logs if log["acks"]) >= 2, "more than one process acked"
        assert [c[0] for c in claims] == [child], f"round {round_}: child claims {claims}"
        last_ack_start = max(a[1] for a in acks)
        _, _claim_start, claim_end, db_time = claims[0]
        # the child was handed out only once the last parent's ack had begun (its
        # commit lies between its start and its end) ...
        assert db_time >= last_ack_start and claim_end >= last_ack_start
        # ... and it was claimable no earlier: every process tried after each of its
        # acks, so a premature release would have been claimed before the last ack
        assert await childq.get_job(child) is None and await parentq.claim_one("x") is None
