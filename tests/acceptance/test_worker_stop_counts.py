"""What a stopping worker says it holds is what it holds: handlers running apart
from jobs only claimed ahead (#21: "21 running job(s)" when 8 ran and 13 waited)."""

from __future__ import annotations

import re
import signal

import alkstore
from tests.acceptance import apps
from tests.acceptance.conftest import Workers, results, wait_until


async def test_the_stop_line_counts_running_handlers_apart_from_claims_held_ahead(
    app_store: alkstore.Store, workers: Workers
) -> None:
    for i in range(6):
        await apps.slow.defer(key=f"held{i}", seconds=2.0)
    # until a handler has finished, the buffer holds at most `concurrency` more
    proc = workers.start("--queue", "slow", "--concurrency", "2", grace=30)
    admin = app_store.admin()

    async def settled() -> bool:
        started = [r for r in await results(app_store) if r["phase"] == "start"]
        held = await admin.list_jobs("slow", "processing", 100)
        return len(started) == 2 and len(held) == 4

    await wait_until(settled, what="2 handlers running and 2 jobs claimed ahead")
    proc.send_signal(signal.SIGINT)
    assert proc.wait(60) == 0, workers.log(proc)
    line = next(x for x in workers.log(proc).splitlines() if "SIGINT: no more claims" in x)
    counts = re.search(r"(\d+) running job\(s\).*?(\d+) claimed ahead", line)
    assert counts is not None, line
    assert (int(counts[1]), int(counts[2])) == (2, 2), line
    # two ran; the two held ahead went back unrun (attempt uncounted) beside the two never claimed
    pending = await admin.list_jobs("slow", "pending", 100)
    assert len(pending) == 4 and all(j.attempts == 0 for j in pending)
