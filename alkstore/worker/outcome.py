"""One job's outcome as a value: what the executor decided (``Outcome``, of one
``Kind``), the error text it stores, and the per-outcome log record.

The executor (``executor.py``) makes one ``Outcome`` per run; the completer
(``completer.py``) is the only part that writes it, through the handle's fenced
operation of its kind, and counts and logs it under its ``label``.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import os
import threading
import time
import traceback
from typing import Any

__all__ = [
    "ERROR_MAX_CHARS",
    "Kind",
    "Outcome",
    "OutcomeRecords",
    "error_text",
    "outcome_records",
]

log = logging.getLogger("alkstore.worker")

ERROR_MAX_CHARS = 8000


class Kind(enum.Enum):
    """Which fenced handle operation writes an outcome."""

    ACK = "ack"  # success: in the completer's receipted ack batch
    ACK_RESULT = "ack_result"  # success whose JSON return value is kept: its own fenced ack
    RETRY = "retry"  # an exception: the backoff curve, or dead at the budget
    FAIL = "fail"  # Fail, a fail_on type, unusable arguments: dead at once
    SNOOZE = "snooze"  # Snooze: pending after ``seconds``, the attempt not spent
    GIVE_BACK = "give_back"  # an unknown task: a snooze, logged ``unknown``
    REVOKED = "revoked"  # the job is no longer ours: nothing is written


class Outcome:
    """One run's outcome: its ``kind``, the task ``name``, the ``label`` it is counted
    and logged under (``success``, ``retry``, ``dead``, ``snoozed``, ``unknown``), the
    ``error`` stored as ``last_error``, the kept ``value`` and ``seconds`` (the
    result's keep time, or the snooze's delay). Never changed once made (the
    executor shares one success per task)."""

    __slots__ = ("error", "kind", "label", "name", "seconds", "value")

    def __init__(
        self,
        kind: Kind,
        name: str,
        label: str,
        error: str | None = None,
        value: Any = None,
        seconds: float = 0.0,
    ) -> None:
        self.kind = kind
        self.name = name
        self.label = label
        self.error = error
        self.value = value
        self.seconds = seconds

    def __repr__(self) -> str:
        return f"<Outcome {self.kind.value} {self.name} {self.label} error={self.error!r}>"


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
