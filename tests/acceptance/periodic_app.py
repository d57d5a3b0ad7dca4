"""An App with a 1-second schedule, for the periodic acceptance test (its own module, so
the other tests' workers never schedule it). The task records each tick it ran."""

from __future__ import annotations

import os

from alkstore import App
from alkstore.worker import current_job, current_tick

app = App()

TICKS = "ticks"


@app.periodic(cron="* * * * * *", name="every-second", overlap=True)
@app.task(queue="periodic", name="every_second", visibility_timeout_s=2, retry_base_s=0)
async def every_second(label: str = "s") -> None:
    job, tick = current_job(), current_tick()
    assert job is not None and tick is not None
    entry = {"tick": tick.timestamp(), "job": job.id, "pid": os.getpid(), "label": label}
    await app.store.queue(TICKS).enqueue(entry)
