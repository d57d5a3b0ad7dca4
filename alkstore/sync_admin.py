"""The blocking twin of :class:`alkstore.admin.Admin` (``sync.Store.admin()``)."""

from __future__ import annotations

from collections.abc import Iterable

from alkstore import admin as _admin
from alkstore import bulk as _bulk
from alkstore.admin import QueueInfo
from alkstore.bulk import BATCH_DEFAULT, SAMPLE_SIZE, BatchDone, BulkAction, BulkPreview, JobPage
from alkstore.core.filters import JobFilter
from alkstore.core.health import Health, Thresholds
from alkstore.core.job import Job
from alkstore.core.results import JobOutcome
from alkstore.sync_runner import Runner

__all__ = ["Admin", "BulkActions"]


class Admin:
    """The blocking twin of :class:`alkstore.admin.Admin`."""

    def __init__(self, aadmin: _admin.Admin, runner: Runner) -> None:
        self._async = aadmin
        self._runner = runner

    def list_jobs(
        self,
        queue: str,
        state: str | None = None,
        limit: int = 100,
        *,
        after: int | None = None,
        before: int | None = None,
        partition_key: str | None = None,
    ) -> list[Job]:
        """Jobs of ``queue`` (live and dead, or one ``state``) in id order, at most ``limit``:
        the first page, or the one after id ``after`` or before id ``before``; with
        ``partition_key``, that key's pending and processing jobs (``Admin.list_jobs``)."""
        return self._runner.run(
            self._async.list_jobs(
                queue, state, limit, after=after, before=before, partition_key=partition_key
            )
        )

    def list_dead(
        self, *, after: int | None = None, before: int | None = None, limit: int = 100
    ) -> list[Job]:
        """Dead jobs of every queue in id order, a keyset page (``after`` / ``before`` an id)."""
        return self._runner.run(self._async.list_dead(after=after, before=before, limit=limit))

    def find_job(self, job_id: int) -> Job | None:
        """The job with this id in any queue, live or dead."""
        return self._runner.run(self._async.find_job(job_id))

    def requeue(self, job_id: int) -> bool:
        """Move a dead job back to pending with ``attempts`` 0; ``False`` if it is not dead."""
        return self._runner.run(self._async.requeue(job_id))

    def stats(self) -> list[_admin.QueueStats]:
        """Counts per queue that has any live or dead job, by queue name."""
        return self._runner.run(self._async.stats())

    def outcomes(self, queue: str, limit: int = 20) -> list[JobOutcome]:
        """The latest finished jobs of ``queue``, newest first (kept results, dead jobs)."""
        return self._runner.run(self._async.outcomes(queue, limit))

    def outcome(self, job_id: int, queue: str | None = None) -> JobOutcome | None:
        """What became of one job (kept result, dead, live), if anything."""
        return self._runner.run(self._async.outcome(job_id, queue))

    def schedule_marks(self, names: list[str]) -> list[tuple[str, float, int | None]]:
        """``(name, last tick as POSIX seconds, last job id)`` of the named schedules."""
        return self._runner.run(self._async.schedule_marks(names))

    def cancel(self, job_id: int) -> bool:
        """Delete the live job with this id in any queue; ``False`` if none is live."""
        return self._runner.run(self._async.cancel(job_id))

    def requeue_many(self, job_ids: Iterable[int]) -> int:
        """Requeue each dead job listed; count those requeued."""
        return self._runner.run(self._async.requeue_many(job_ids))

    def workers(self, gone_after_s: float = _admin.GONE_AFTER_S) -> list[_admin.WorkerInfo]:
        """Registered workers by start time; ``alive`` unless unseen for ``gone_after_s``."""
        return self._runner.run(self._async.workers(gone_after_s))

    def workers_page(
        self,
        *,
        after: str | None = None,
        before: str | None = None,
        limit: int = 100,
        gone_after_s: float = _admin.GONE_AFTER_S,
    ) -> list[_admin.WorkerInfo]:
        """Registered workers by id, a keyset page (``after`` / ``before`` a worker id)."""
        return self._runner.run(
            self._async.workers_page(
                after=after, before=before, limit=limit, gone_after_s=gone_after_s
            )
        )

    def outcome_history(
        self, minutes: int = 60, *, queue: str | None = None, bucket_minutes: int = 1
    ) -> list[_admin.OutcomeCount]:
        """Finished-job counts per queue, minute (or bucket) and outcome over the last
        ``minutes``, of one ``queue`` or all."""
        return self._runner.run(
            self._async.outcome_history(minutes, queue=queue, bucket_minutes=bucket_minutes)
        )

    def queues(self) -> list[QueueInfo]:
        """Every queue with jobs or stored settings: paused, limits, counts."""
        return self._runner.run(self._async.queues())

    def queues_page(
        self, *, after: str | None = None, before: str | None = None, limit: int = 100
    ) -> list[QueueInfo]:
        """The queues by name, a keyset page (``after`` / ``before`` a queue name)."""
        return self._runner.run(self._async.queues_page(after=after, before=before, limit=limit))

    def queue_info(self, queue: str) -> QueueInfo:
        """Paused, limits and counts of one queue."""
        return self._runner.run(self._async.queue_info(queue))

    def health(self, limits: Thresholds | None = None) -> Health:
        """The doctor's look at the store (``alkstore doctor``): findings with verdicts."""
        return self._runner.run(self._async.health(limits))

    def find(
        self, where: JobFilter | str, *, after: int | None = None, limit: int = 100
    ) -> JobPage:
        """Jobs matching a filter, live and dead, in id order (a keyset page)."""
        return self._runner.run(self._async.find(where, after=after, limit=limit))

    def bulk(self) -> BulkActions:
        """Bulk actions by filter: preview, start, run (resumable), history."""
        return BulkActions(self._async.bulk(), self._runner)


class BulkActions:
    """The blocking twin of :class:`alkstore.bulk.BulkActions`."""

    def __init__(self, abulk: _bulk.BulkActions, runner: Runner) -> None:
        self._async = abulk
        self._runner = runner

    def preview(
        self,
        action: str,
        f: JobFilter | str,
        *,
        priority: int | None = None,
        to_queue: str | None = None,
        sample: int = SAMPLE_SIZE,
    ) -> BulkPreview:
        """The dry run: how many jobs ``action`` would touch now and the first ``sample``."""
        return self._runner.run(
            self._async.preview(action, f, priority=priority, to_queue=to_queue, sample=sample)
        )

    def start(
        self,
        action: str,
        f: JobFilter | str,
        *,
        actor: str,
        priority: int | None = None,
        to_queue: str | None = None,
    ) -> BulkAction:
        """Write the action's audit row and cursor; nothing changes until :meth:`run`."""
        return self._runner.run(
            self._async.start(action, f, actor=actor, priority=priority, to_queue=to_queue)
        )

    def run(
        self,
        action_id: int,
        *,
        batch: int = BATCH_DEFAULT,
        on_batch: BatchDone | None = None,
        max_batches: int | None = None,
    ) -> BulkAction:
        """Run (or resume) the action in batches until it is done."""
        return self._runner.run(
            self._async.run(action_id, batch=batch, on_batch=on_batch, max_batches=max_batches)
        )

    def apply(
        self,
        action: str,
        f: JobFilter | str,
        *,
        actor: str,
        priority: int | None = None,
        to_queue: str | None = None,
        batch: int = BATCH_DEFAULT,
    ) -> BulkAction:
        """:meth:`start` then :meth:`run` to the end."""
        return self._runner.run(
            self._async.apply(
                action, f, actor=actor, priority=priority, to_queue=to_queue, batch=batch
            )
        )

    def get(self, action_id: int) -> BulkAction | None:
        """One action's audit row and progress."""
        return self._runner.run(self._async.get(action_id))

    def history(self, *, before: int | None = None, limit: int = 50) -> list[BulkAction]:
        """The audit: actions newest first."""
        return self._runner.run(self._async.history(before=before, limit=limit))
