"""Reading a job's life and signalling it (#24): the store side of attempt history,
progress and signals. ``Queue.attempts`` / ``Queue.progress`` / ``Store.signal``
are thin doors to these functions; the handler side is ``worker/job_life.py``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from alkstore.core.life import Attempt, Progress, attempt_history, check_step_name, progress_of
from alkstore.core.payload import check_size
from alkstore.core.results import encode_result
from alkstore.enqueuing import check_job_id

if TYPE_CHECKING:
    from alkstore.engine import Engine

__all__ = ["read_attempts", "read_progress", "send_signal"]


async def read_attempts(engine: Engine, queue: str, job_id: int) -> list[Attempt]:
    """The finished attempts of a job of ``queue``, oldest first (see
    :func:`alkstore.core.life.attempt_history`); empty for an unknown job."""
    job_id = check_job_id(job_id)
    rows = await engine.attempts(queue, job_id)
    job = await engine.get_job(queue, job_id)
    if job is not None:
        state = str(job[3])
        end = ("dead", job[15], job[14]) if state == "dead" else None
        return attempt_history(rows, int(job[7]), state, end)  # type: ignore[arg-type]
    kept = await engine.outcomes(queue, [job_id])  # OUTCOME_FIELDS
    if kept:
        return attempt_history(rows, int(kept[0][5]), None, ("success", kept[0][6], None))
    return attempt_history(rows, max((int(r[0]) for r in rows), default=0), None)


async def read_progress(engine: Engine, queue: str, job_id: int) -> Progress | None:
    """The latest progress a job of ``queue`` reported, if any."""
    return progress_of(await engine.progress(queue, check_job_id(job_id)))


async def send_signal(
    engine: Engine, job_id: int, name: str, payload: Any, limit: int | None
) -> bool:
    """Store signal ``name`` (JSON ``payload``) for live job ``job_id`` and wake it if
    it waits for it; ``False`` if no live job has that id."""
    job_id = check_job_id(job_id)
    name = check_step_name(name, "signal name")
    text = encode_result(payload)
    if limit is not None:
        check_size("signal payload", len(text.encode()), limit)
    return await engine.put_signal(job_id, name, text) is not None


def decode(text: str) -> Any:
    """A stored JSON value back."""
    return json.loads(text)
