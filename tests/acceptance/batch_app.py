"""The App of the batch handler acceptance tests (``tests.acceptance.batch_app:app``).

``bulk`` records each batch's items as jobs of the ``results`` queue (``phase``
``start``, then ``end``); with ``BATCH_HANG=1`` in the worker's environment a
batch holding an item ``n >= 20`` on its first attempt hangs after ``start``
(the test SIGKILLs the worker there).
"""

from __future__ import annotations

import asyncio
import os

from alkstore import App
from alkstore.worker import BatchItem

app = App()

RESULTS = "results"


async def _record(items: list[BatchItem], phase: str) -> None:
    entries = [
        {"key": "bulk", "phase": phase, "job": i.id, "attempt": i.attempts, "pid": os.getpid()}
        for i in items
    ]
    await app.store.queue(RESULTS).enqueue_many(entries)


@app.task(queue="bulk", name="bulk", batch_size=10, batch_wait_s=0.1, visibility_timeout_s=3)
async def bulk(items: list[BatchItem]) -> None:
    await _record(items, "start")
    hang = os.environ.get("BATCH_HANG") == "1"
    if hang and any(i.args["n"] >= 20 and i.attempts == 1 for i in items):
        await asyncio.sleep(3600)
    for item in items:
        if item.args["n"] % 7 == 3 and item.attempts == 1:
            item.retry("the seventh")  # one batch, items finishing differently
    await _record(items, "end")
