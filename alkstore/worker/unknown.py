"""Jobs this worker cannot interpret: a task it does not know, or a payload that is
not a task call (docs/worker.md, "Unknown tasks").

In a rolling deploy an old worker meets jobs of tasks only the new code has.
It gives them back unrun, their attempt uncounted (a snooze of
``UNKNOWN_DELAY_S``, so it does not spin on them while a worker that knows
them can take them), with a warning per task at most once a minute. A job
this worker has kept giving back for ``max_age_s`` (default an hour: any
deploy is over by then, so the name is a typo or a removed task) is
dead-lettered with an error naming the task, where ``alkstore jobs`` and the
dashboard show it and ``alkstore jobs requeue`` revives it; ``None`` gives
such jobs back forever.
"""

from __future__ import annotations

import logging
import time

__all__ = ["UNKNOWN_DELAY_S", "UNKNOWN_MAX_AGE_S", "UnknownTasks"]

log = logging.getLogger("alkstore.worker")

UNKNOWN_DELAY_S = 5.0  # a job given back is claimable again after this long
UNKNOWN_MAX_AGE_S = 3600.0  # given back for this long by one worker: dead-lettered
WARN_EVERY_S = 60.0
_TRACKED_MAX = 10_000  # first sightings remembered, at most


class UnknownTasks:
    """Which jobs of unknown tasks this worker gives back, and which it dead-letters."""

    def __init__(self, worker_id: str, max_age_s: float | None) -> None:
        self.worker_id = worker_id
        self.max_age_s = max_age_s
        self._first_seen: dict[int, float] = {}  # job id -> first given back (monotonic)
        self._warned: dict[str, float] = {}  # task name -> last warning (monotonic)

    def give_back(self, job_id: int, name: str, queue: str, known: str) -> bool:
        """Whether to give the job back (else dead-letter it); warns, rate-limited."""
        now = time.monotonic()
        first = self._first_seen.setdefault(job_id, now)
        if self.max_age_s is not None and now - first >= self.max_age_s:
            self._first_seen.pop(job_id, None)
            return False
        if len(self._first_seen) > _TRACKED_MAX:  # forget the oldest sightings
            for old in sorted(self._first_seen, key=self._first_seen.__getitem__)[
                : _TRACKED_MAX // 2
            ]:
                del self._first_seen[old]
        last = self._warned.get(name)
        if last is None or now - last >= WARN_EVERY_S:
            self._warned[name] = now
            log.warning(
                "worker %s does not know task %s (queue %s; it knows: %s): its jobs are "
                "given back unrun, attempt uncounted, for a worker that knows it "
                "(warned at most once a minute per task)",
                self.worker_id,
                name,
                queue,
                known,
            )
        return True

    def error(self, name: str) -> str:
        """The dead letter's error of a job given back for ``max_age_s``."""
        return (
            f"unknown task {name}: no worker that knows it took the job while worker "
            f"{self.worker_id} gave it back for {self.max_age_s:g}s"
        )
