"""A claimed job's bookkeeping in the worker (``Run``: heartbeat schedule, the
claim's deadline by the worker's own clock), and the per-outcome log records."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import traceback
from typing import TYPE_CHECKING, Any

from alkstore.worker.context import RunningJob

if TYPE_CHECKING:
    from alkstore.store import JobHandle

__all__ = [
    "ERROR_MAX_CHARS",
    "HEARTBEAT_FRACTION",
    "LAPSE_MARGIN_S",
    "OutcomeRecords",
    "Run",
    "beat_period",
    "error_text",
    "lapse_margin",
    "outcome_records",
]

log = logging.getLogger("alkstore.worker")

ERROR_MAX_CHARS = 8000
HEARTBEAT_FRACTION = 1 / 3  # beat when a third of the visibility timeout has passed
LAPSE_MARGIN_S = 1.0  # a handler stops this long before its claim lapses by our clock


def error_text(exc: BaseException) -> str:
    """``Type: message`` then the traceback, capped (stored as the job's last_error)."""
    head = f"{type(exc).__name__}: {exc}".rstrip(": ")
    tb = "".join(traceback.format_exception(exc)).rstrip()
    text = f"{head}\n{tb}"
    return text if len(text) <= ERROR_MAX_CHARS else text[: ERROR_MAX_CHARS - 3] + "..."


class OutcomeRecords:
    """The per-job outcome line, made cheaply: a copy of one template record with
    the time, level, message and fields set, handed to ``log.handle``.

    ``log.log`` builds each record from scratch (finding the caller by walking
    frames, reading the thread, process and time); the worker logs every outcome
    from the same line of the same thread, so those are the same every time.
    Handlers, filters and formatters see a record like any other. Under a custom
    record factory (which may stamp each record, e.g. with a trace id) records
    are made the ordinary way.
    """

    __slots__ = ("_templates",)

    def __init__(self) -> None:
        # one per (process, thread): a record carries both
        self._templates: dict[tuple[int, int], logging.LogRecord] = {}

    def emit(self, level: int, line: str, fields: dict[str, Any]) -> None:
        where = (_pid, threading.get_ident())
        template = self._templates.get(where)
        plain = logging.getLogRecordFactory() is logging.LogRecord
        if template is None or not plain:
            log.log(level, line, extra={"alkstore": fields}, stacklevel=2)
            if template is None and plain:
                fn, lno, func, _ = log.findCaller(stacklevel=2)
                record = log.makeRecord(log.name, level, fn, lno, "", (), None, func)
                self._templates[where] = record
            return
        if log.disabled:
            return
        state = template.__dict__.copy()  # item stores: cheaper than setattr
        created = time.time()
        state["created"] = created
        state["msecs"] = int((created - int(created)) * 1000) + 0.0
        state["relativeCreated"] = (created - _LOG_START) * 1000
        state["levelno"] = level
        state["levelname"] = logging.getLevelName(level)
        state["msg"] = line
        state["alkstore"] = fields
        if "taskName" in state:  # Python 3.12+
            task = asyncio.current_task()
            state["taskName"] = None if task is None else task.get_name()
        record = logging.LogRecord.__new__(logging.LogRecord)
        record.__dict__ = state
        log.handle(record)


_LOG_START: float = getattr(logging, "_startTime", time.time())
_pid = os.getpid()  # a record carries the process id; a forked child gets its own templates


def _forked() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_forked)
outcome_records = OutcomeRecords()


class Run:
    """One claimed job in this worker: its handle, task and heartbeat schedule."""

    __slots__ = (
        "acking",
        "beating",
        "done",
        "expires",
        "finished",
        "freed",
        "handle",
        "job",
        "lost",
        "name",
        "next_beat",
        "revoked",
        "started",
        "task",
    )

    def __init__(
        self, handle: JobHandle, now: float, sent: float, poll_beat_s: float | None
    ) -> None:
        self.handle = handle
        self.job = RunningJob(handle.job._row)  # what current_job() gives the handler
        self.started = now  # claimed; reset when the handler starts
        self.finished = 0.0  # when the handler returned
        vt = handle.job.visibility_timeout_s
        self.next_beat = now + beat_period(vt, poll_beat_s)
        # when the claim lapses at the latest, by this worker's clock: the database set
        # its deadline after the request was sent (monotonic)
        self.expires = sent + vt
        self.beating = False  # a heartbeat of it is in flight
        self.done = False  # the handler finished; its outcome is being written
        self.freed = False  # its slot is free again
        self.lost = False  # a heartbeat was refused: the claim is no longer ours
        self.acking = False  # a success waiting for the ack batcher
        # "cancelled" or "lost": the job is no longer ours; its outcome is never written
        self.revoked: str | None = None
        self.name = "?"  # the task's name, once decoded
        self.task: asyncio.Task[None] | None = None  # None while buffered


def lapse_margin(visibility_timeout_s: float) -> float:
    """How long before its claim's lapse (by this worker's clock) a handler is stopped:
    ``LAPSE_MARGIN_S``, at most a quarter of the timeout. It covers the rate drift of
    the two clocks and a late timer; the deadline itself is already early (counted
    from before the claim or heartbeat was sent)."""
    return min(LAPSE_MARGIN_S, visibility_timeout_s / 4)


def beat_period(visibility_timeout_s: float, poll_beat_s: float | None) -> float:
    """Seconds between a held job's heartbeats: a third of its visibility timeout;
    on a poll-only store (no cancel or reclaim announcements) at most
    ``poll_beat_s``, so a refused beat stops a cancelled or reclaimed handler soon."""
    period = visibility_timeout_s * HEARTBEAT_FRACTION
    return period if poll_beat_s is None else min(period, poll_beat_s)
