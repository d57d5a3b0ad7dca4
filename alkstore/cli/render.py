"""Rich renderings of jobs and queue counts for the command line."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import sys
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.table import Table

from alkstore.admin import QueueInfo, QueueStats, WorkerInfo, flow_json
from alkstore.core.display import age, describe_payload
from alkstore.core.job import ROW_FIELDS, Job
from alkstore.core.results import JobOutcome
from alkstore.schedules import Schedule

__all__ = [
    "flow",
    "job_detail",
    "job_json",
    "job_table",
    "outcome_detail",
    "outcome_json",
    "outcomes_table",
    "queue_json",
    "queues_table",
    "schedules_table",
    "stats_json",
    "stats_table",
    "when",
    "worker_json",
    "workers_table",
]

_STATE_STYLE = {"pending": "cyan", "processing": "yellow", "dead": "red"}


def when(moment: datetime | None, now: datetime | None = None) -> str:
    """``2026-12-02 16:30:01Z (3s ago)``."""
    if moment is None:
        return "-"
    now = now or datetime.now(UTC)
    delta = (moment - now).total_seconds()
    rel = f"in {age(delta)}" if delta > 0.5 else f"{age(-delta)} ago" if delta < -0.5 else "now"
    return f"{moment:%Y-%m-%d %H:%M:%S}Z ({rel})"


def _relative(moment: datetime, now: datetime) -> str:
    delta = (moment - now).total_seconds()
    return f"in {age(delta)}" if delta > 0.5 else f"{age(-delta)} ago" if delta < -0.5 else "now"


def _state(job: Job) -> str:
    return f"[{_STATE_STYLE.get(job.state, '')}]{job.state}[/]"


def job_table(jobs: list[Job], title: str) -> Table:
    """One row per job."""
    table = Table(title=title, title_justify="left")
    for column in ("id", "state", "call / payload", "attempts", "priority", "run at", "error"):
        table.add_column(column, no_wrap=column in ("id", "state", "attempts"))
    now = datetime.now(UTC)
    for job in jobs:
        error = (job.last_error or "").splitlines()[0] if job.last_error else ""
        table.add_row(
            str(job.id),
            _state(job),
            describe_payload(job),
            f"{job.attempts}/{job.max_attempts}",
            str(job.priority),
            _relative(job.run_at, now),
            error[:60],
        )
    return table


SHOWN_CHARS = 4000  # `jobs show` cuts a payload or result past this (--full: all of it)


def _cut(text: str, full: bool) -> str:
    if full or len(text) <= SHOWN_CHARS:
        return text
    return f"{text[:SHOWN_CHARS]}… [dim]({len(text):,} characters; --full shows all)[/]"


def _pretty(raw: str, full: bool) -> str:
    """JSON text indented (when it is not too large to show whole anyway), then cut."""
    if full or len(raw) <= SHOWN_CHARS:
        with contextlib.suppress(ValueError):
            raw = json.dumps(json.loads(raw), indent=2, ensure_ascii=False)
    return _cut(raw, full)


def job_detail(job: Job, full: bool = False) -> Table:
    """Every field of one job; a payload past ``SHOWN_CHARS`` is cut unless ``full``."""
    table = Table(show_header=False, title=f"job {job.id}", title_justify="left")
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")  # long unbroken text shown whole
    now = datetime.now(UTC)
    try:
        payload = _pretty(job.payload.decode(), full)
    except UnicodeDecodeError:
        payload = _cut(repr(job.payload), full)
    rows = [
        ("id", str(job.id)),
        ("queue", job.queue),
        ("state", _state(job)),
        ("call", describe_payload(job, 200)),
        ("payload", payload),
        ("attempts", f"{job.attempts}/{job.max_attempts}"),
        ("priority", str(job.priority)),
        ("created at", when(job.created_at, now)),
        ("run at", when(job.run_at, now)),
        ("expires at", when(job.expires_at, now)),
        ("visibility timeout", f"{job.visibility_timeout_s:g}s"),
        ("retry base", f"{job.retry_base_s:g}s"),
        ("worker", job.worker_id or "-"),
        ("claim expires at", when(job.claim_expires_at, now)),
        ("died at", when(job.died_at, now)),
        ("last error", job.last_error or "-"),
        ("dedupe key", job.dedupe_key or "-"),
        ("partition key", job.partition_key or "-"),
    ]
    for field, value in rows:
        table.add_row(field, value)
    return table


def outcome_detail(outcome: JobOutcome, full: bool = False) -> Table:
    """A finished job: its outcome, kept result or last error, attempts and finish time
    (a result past ``SHOWN_CHARS`` is cut unless ``full``)."""
    table = Table(show_header=False, title=f"job {outcome.id}", title_justify="left")
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")  # long unbroken text shown whole
    style = "green" if outcome.outcome == "success" else "red"
    rows = [
        ("id", str(outcome.id)),
        ("queue", outcome.queue),
        ("outcome", f"[{style}]{outcome.outcome}[/]"),
        ("attempts", str(outcome.attempts)),
        ("finished at", when(outcome.finished_at, datetime.now(UTC))),
    ]
    if outcome.value_json is not None:
        rows.append(("result", _pretty(outcome.value_json, full)))
    if outcome.error is not None:
        rows.append(("last error", outcome.error))
    for field, value in rows:
        table.add_row(field, value)
    return table


def outcomes_table(outcomes: list[JobOutcome], title: str) -> Table:
    """One row per finished job, newest first."""
    table = Table(title=title, title_justify="left")
    for column in ("id", "outcome", "attempts", "finished", "result / error"):
        table.add_column(column, no_wrap=column != "result / error")
    now = datetime.now(UTC)
    for o in outcomes:
        style = "green" if o.outcome == "success" else "red"
        detail = o.value_json if o.value_json is not None else (o.error or "").split("\n")[0]
        table.add_row(
            str(o.id),
            f"[{style}]{o.outcome}[/]",
            str(o.attempts),
            _relative(o.finished_at, now) if o.finished_at else "-",
            (detail or "")[:80],
        )
    return table


def schedules_table(
    schedules: list[Schedule], marks: dict[str, tuple[float, int | None]], now: float
) -> Table:
    """One row per schedule: its cron, zone, last tick handled (and job) and next tick."""
    table = Table(title="schedules", title_justify="left")
    for column in ("schedule", "task", "cron", "timezone", "missed", "last run", "job", "next"):
        table.add_column(column)
    moment = datetime.fromtimestamp(now, UTC)
    for s in schedules:
        mark = marks.get(s.name)
        last = "never" if mark is None else when(datetime.fromtimestamp(mark[0], UTC), moment)
        job = "-" if mark is None or mark[1] is None else str(mark[1])
        upcoming = when(s.next_after(now).astimezone(UTC), moment)
        table.add_row(s.name, s.task.name, s.cron, s.timezone, s.missed, last, job, upcoming)
    return table


def flow(info: QueueInfo | None) -> str:
    """A queue's pause flag and limits in a few words: ``paused, concurrency 5, 100/s``."""
    if info is None:
        return "-"
    parts = ["[yellow]paused[/]"] if info.paused else []
    if info.concurrency is not None:
        parts.append(f"concurrency {info.concurrency}")
    if info.partition_concurrency is not None:
        parts.append(f"{info.partition_concurrency} per partition")
    if info.rate is not None:
        burst = f" burst {info.burst}" if info.burst else ""
        parts.append(f"rate {info.rate}{burst}")
    if info.fair:
        parts.append(fair_text(info))
    if info.aging_s is not None:
        parts.append(f"aging {info.aging_s:g}s")
    return ", ".join(parts) or "-"


def fair_text(info: QueueInfo) -> str:
    """``fair``, or ``fair, 3 weights`` when some partition keys have a stored weight."""
    if not info.fair:
        return "-"
    return (
        f"fair, {info.weights} weight{'s' if info.weights != 1 else ''}" if info.weights else "fair"
    )


def stats_table(stats: list[QueueStats], infos: dict[str, QueueInfo] | None = None) -> Table:
    """One row per queue."""
    table = Table(title="queues", title_justify="left")
    table.add_column("queue")
    for column in ("pending", "delayed", "blocked", "processing", "dead", "oldest pending"):
        table.add_column(column, justify="right")
    table.add_column("flow control")
    for s in stats:
        table.add_row(
            s.queue,
            str(s.pending),
            str(s.delayed),
            str(s.blocked),
            str(s.processing),
            f"[red]{s.dead}[/]" if s.dead else "0",
            age(s.oldest_pending_age_s),
            flow((infos or {}).get(s.queue)),
        )
    return table


def queues_table(infos: list[QueueInfo]) -> Table:
    """``alkstore queues list``: state, limits and counts per queue."""
    table = Table(title="queues", title_justify="left")
    table.add_column("queue")
    table.add_column("state")
    columns = ("concurrency", "per partition", "rate")
    for column in columns:
        table.add_column(column, justify="right")
    table.add_column("fair")
    table.add_column("aging", justify="right")
    for column in ("pending", "delayed", "blocked", "processing", "dead"):
        table.add_column(column, justify="right")
    for i in infos:
        rate = "-" if i.rate is None else str(i.rate) + (f" burst {i.burst}" if i.burst else "")
        table.add_row(
            i.queue,
            "[yellow]paused[/]" if i.paused else "active",
            "-" if i.concurrency is None else str(i.concurrency),
            "-" if i.partition_concurrency is None else str(i.partition_concurrency),
            rate,
            fair_text(i),
            "-" if i.aging_s is None else f"{i.aging_s:g}s",
            str(i.pending),
            str(i.delayed),
            str(i.blocked),
            str(i.processing),
            f"[red]{i.dead}[/]" if i.dead else "0",
        )
    return table


def console(stderr: bool = False) -> Console:
    """A console that keeps tables readable when piped (160 columns, not 80)."""
    stream = sys.stderr if stderr else sys.stdout
    piped = not stream.isatty() and "COLUMNS" not in os.environ
    return Console(stderr=stderr, highlight=False, width=160 if piped else None)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")


def job_json(job: Job) -> dict[str, Any]:
    """Every field of a job for ``--json``: times ISO 8601 UTC; the payload as its JSON
    value when it is JSON, else as text, else base64 (``payload_encoding`` says which)."""
    out: dict[str, Any] = {}
    for name in ROW_FIELDS:
        value = getattr(job, name)
        out[name] = _iso(value) if isinstance(value, datetime) else value
    raw = job.payload
    try:
        out["payload"], out["payload_encoding"] = json.loads(raw), "json"
    except (ValueError, UnicodeDecodeError):
        try:
            out["payload"], out["payload_encoding"] = raw.decode(), "text"
        except UnicodeDecodeError:
            out["payload"], out["payload_encoding"] = base64.b64encode(raw).decode(), "base64"
    return out


def outcome_json(o: JobOutcome) -> dict[str, Any]:
    """A finished job for ``--json``: the kept result as its JSON value."""
    return {
        "id": o.id,
        "queue": o.queue,
        "outcome": o.outcome,
        "result": o.value,
        "error": o.error,
        "attempts": o.attempts,
        "finished_at": _iso(o.finished_at) if o.finished_at is not None else None,
    }


def stats_json(s: QueueStats, info: QueueInfo | None = None) -> dict[str, Any]:
    """One queue's counts and flow control for ``--json``."""
    return s._asdict() | flow_json(info)


def queue_json(info: QueueInfo) -> dict[str, Any]:
    """``alkstore queues list --json``: one queue's flow control and counts."""
    out = info._asdict()
    out.update(flow_json(info))
    return out


def worker_json(w: WorkerInfo) -> dict[str, Any]:
    """One worker for ``--json``."""
    out = w._asdict()
    out["queues"] = list(w.queues)
    out["started_at"] = _iso(w.started_at)
    out["last_seen"] = _iso(w.last_seen)
    return out


def workers_table(workers: list[WorkerInfo]) -> Table:
    """One row per registered worker."""
    table = Table(title="workers", title_justify="left")
    for column in ("id", "state", "host", "pid", "queues", "running", "started", "last seen"):
        table.add_column(column, no_wrap=column in ("id", "state", "pid"))
    now = datetime.now(UTC)
    for w in workers:
        table.add_row(
            w.id,
            "[green]alive[/]" if w.alive else "[red]gone[/]",
            w.host,
            str(w.pid),
            ", ".join(w.queues),
            f"{w.running}/{w.concurrency}",
            _relative(w.started_at, now),
            f"{age(w.seen_ago_s)} ago",
        )
    return table


def print_json(data: Any) -> None:
    """``data`` as indented JSON on stdout."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
