"""A bulk action's runner process for tests/contract/test_bulk_procs.py (run as a script).

bulkprocs.py URL SCHEMA ACTION_ID BATCH HALF   run the action in batches of BATCH;
                                               print "half" once HALF jobs are done,
                                               and "finished" at the end
"""

from __future__ import annotations

import asyncio
import sys

import alkstore
from alkstore.bulk import BulkAction


async def run(url: str, schema: str, action_id: int, batch: int, half: int) -> None:
    told = False

    def progress(a: BulkAction) -> None:
        nonlocal told
        if not told and a.done >= half:
            told = True
            print("half", a.done, flush=True)

    async with await alkstore.connect(url, schema=schema) as store:
        done = await store.admin().bulk().run(action_id, batch=batch, on_batch=progress)
    print("finished", done.done, flush=True)


if __name__ == "__main__":
    url, schema, action_id, batch, half = sys.argv[1:]
    asyncio.run(run(url, schema, int(action_id), int(batch), int(half)))
