"""Prometheus metrics (``prometheus_client``) of workers and queues.

One :class:`Metrics` holds its own registry (never the process-global one), so
a worker, a dashboard and a test can each have theirs. Labels are bounded:
queue, task (a registered task's name, else ``unknown``), outcome and state;
never a job id.

>>> metrics = Metrics()
>>> worker = app.worker(["emails"], metrics=metrics)
>>> metrics.serve(9100)          # http://127.0.0.1:9100/metrics
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST, start_http_server

from alkstore.admin import JOB_STATES, QueueStats, WorkerInfo
from alkstore.core.health import HealthFacts

__all__ = ["CONTENT_TYPE", "Metrics"]

CONTENT_TYPE = CONTENT_TYPE_LATEST
_DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60)
_DEPTH_STATES = ("pending", "delayed", "blocked", "processing", "dead")
assert set(JOB_STATES) <= set(_DEPTH_STATES)


class Metrics:
    """The alkstore metric families on one registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        reg = self.registry
        self.jobs_finished = Counter(
            "alkstore_jobs_finished",
            "Jobs whose run ended, by queue, task and outcome "
            "(success, retry, dead, lost, interrupted, snoozed, cancelled).",
            ["queue", "task", "outcome"],
            registry=reg,
        )
        self.job_duration = Histogram(
            "alkstore_job_duration_seconds",
            "Handler run time, by queue and task.",
            ["queue", "task"],
            buckets=_DURATION_BUCKETS,
            registry=reg,
        )
        self.claim_batch = Histogram(
            "alkstore_claim_batch_size",
            "Jobs handed out per claim that returned any, by queue.",
            ["queue"],
            buckets=_BATCH_BUCKETS,
            registry=reg,
        )
        self.wake_latency = Histogram(
            "alkstore_wake_latency_seconds",
            "Seconds from a job becoming due (its run_at) to its claim, by queue.",
            ["queue"],
            buckets=_LATENCY_BUCKETS,
            registry=reg,
        )
        self.queue_jobs = Gauge(
            "alkstore_queue_jobs",
            "Jobs per queue and state (pending = due now, delayed, blocked on parents, "
            "processing, dead).",
            ["queue", "state"],
            registry=reg,
        )
        self.oldest_pending_age = Gauge(
            "alkstore_queue_oldest_pending_age_seconds",
            "Age of the oldest due pending job per queue (0 when none is due).",
            ["queue"],
            registry=reg,
        )
        self.workers = Gauge(
            "alkstore_workers",
            "Registered workers, alive or gone (not seen lately).",
            ["state"],
            registry=reg,
        )
        self.dead_rows = Gauge(
            "alkstore_table_dead_rows",
            "Dead rows per alkstore table (PostgreSQL statistics; alkstore doctor).",
            ["table"],
            registry=reg,
        )
        self.oldest_xmin_age = Gauge(
            "alkstore_oldest_xmin_age_seconds",
            "Age of the oldest transaction holding back the xmin horizon (0: none, or "
            "its age is hidden from this role).",
            registry=reg,
        )
        self.oldest_xmin_xids = Gauge(
            "alkstore_oldest_xmin_age_transactions",
            "Transactions the xmin horizon is held back by its oldest holder (0: none).",
            registry=reg,
        )
        self.claims_past_deadline = Gauge(
            "alkstore_claims_past_deadline",
            "Claims still processing past their deadline, per queue.",
            ["queue"],
            registry=reg,
        )
        self._lock = threading.Lock()

    def finished(self, queue: str, task: str, outcome: str, duration_s: float) -> None:
        """Count one finished run and observe its duration."""
        self.jobs_finished.labels(queue, task, outcome).inc()
        self.job_duration.labels(queue, task).observe(duration_s)

    def claimed(self, queue: str, n: int, latencies_s: Iterable[float]) -> None:
        """One claim that returned ``n`` jobs, with each job's due-to-claim latency."""
        self.claim_batch.labels(queue).observe(n)
        hist = self.wake_latency.labels(queue)
        for latency in latencies_s:
            hist.observe(max(latency, 0.0))

    def set_queue_stats(self, stats: Iterable[QueueStats]) -> None:
        """Replace the depth gauges with these counts (queues no longer listed disappear)."""
        with self._lock:
            self.queue_jobs.clear()
            self.oldest_pending_age.clear()
            for s in stats:
                for state in _DEPTH_STATES:
                    self.queue_jobs.labels(s.queue, state).set(getattr(s, state))
                self.oldest_pending_age.labels(s.queue).set(s.oldest_pending_age_s or 0.0)

    def set_workers(self, workers: Iterable[WorkerInfo]) -> None:
        """Count registered workers by alive/gone."""
        found = list(workers)
        alive = sum(w.alive for w in found)
        self.workers.labels("alive").set(alive)
        self.workers.labels("gone").set(len(found) - alive)

    def set_health(self, facts: HealthFacts) -> None:
        """Replace the health gauges with one look's facts (``Admin.health``)."""
        with self._lock:
            self.dead_rows.clear()
            self.claims_past_deadline.clear()
            for t in facts.tables:
                self.dead_rows.labels(t.table).set(t.dead_rows)
            for c in facts.overdue:
                self.claims_past_deadline.labels(c.queue).set(c.jobs)
            ages = [h.age_s for h in facts.xmin_holders if h.age_s is not None]
            self.oldest_xmin_age.set(max(ages, default=0.0))
            self.oldest_xmin_xids.set(max((h.xid_age for h in facts.xmin_holders), default=0))

    def render(self) -> bytes:
        """The text exposition format (``CONTENT_TYPE``)."""
        return generate_latest(self.registry)

    def serve(self, port: int, host: str = "127.0.0.1") -> Any:
        """Serve ``/metrics`` on ``host:port`` from a daemon thread; returns the server
        (``server.shutdown()`` stops it)."""
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        return server
