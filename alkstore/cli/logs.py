"""Log output of the ``alkstore worker`` command: text lines, or one JSON object a line."""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from datetime import UTC, datetime
from typing import TextIO

__all__ = [
    "LOG_FORMATS",
    "BatchingStreamHandler",
    "JsonFormatter",
    "TextFormatter",
    "setup_logging",
]

LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
FLUSH_AFTER_S = 0.05  # an INFO line reaches the stream at most this late
FLUSH_LINES = 256  # or once this many are waiting


class TextFormatter(logging.Formatter):
    """``TEXT_FORMAT`` with the ``asctime`` text made once per second, not per record
    (``time.strftime`` of every job's outcome line is a tenth of its cost)."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)
        self._second = -1
        self._stamp = ""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        second = int(record.created)
        if second != self._second:
            self._stamp = time.strftime("%Y-%m-%d %H:%M:%S", self.converter(second))
            self._second = second
        return f"{self._stamp},{int(record.msecs):03d}"


class BatchingStreamHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A ``StreamHandler`` that writes lines below WARNING in batches: at most
    ``FLUSH_AFTER_S`` late or ``FLUSH_LINES`` at once, so a worker's per-job
    outcome lines cost one write per batch, not a write and a flush each.

    A WARNING or worse is written at once, with every line before it, in order.
    ``flush()`` and ``close()`` (``logging.shutdown`` at exit) write what waits;
    only a SIGKILL can lose the last ``FLUSH_AFTER_S`` of INFO lines."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self._waiting: list[str] = []
        self._timer: threading.Timer | None = None

    def emit(self, record: logging.LogRecord) -> None:  # called under self.lock
        try:
            self._waiting.append(self.format(record))
            if record.levelno >= logging.WARNING or len(self._waiting) >= FLUSH_LINES:
                self._write()
            elif self._timer is None:
                timer = self._timer = threading.Timer(FLUSH_AFTER_S, self._on_timer)
                timer.daemon = True
                timer.start()
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)

    def _on_timer(self) -> None:
        with self.lock:  # type: ignore[union-attr]  # created by Handler.__init__
            self._timer = None
            self._write()

    def _write(self) -> None:
        waiting = self._waiting
        if not waiting:
            return
        self._waiting = []
        self.stream.write("\n".join(waiting) + self.terminator)
        self.stream.flush()

    def flush(self) -> None:
        with self.lock:  # type: ignore[union-attr]
            try:
                self._write()
            except Exception:
                self._waiting = []
                raise
            super().flush()

    def close(self) -> None:
        try:
            self.flush()
        finally:
            timer = self._timer
            if timer is not None:
                timer.cancel()
            super().close()


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, and a job outcome's
    fields (``record.alkstore``: queue, task, id, attempt, …) at the top level."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "alkstore", None)
        if isinstance(fields, dict):
            entry.update(fields)
        if record.exc_info:
            entry["traceback"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


def setup_logging(level: str, log_format: str) -> None:
    """Send every record to stderr in ``log_format`` at ``level``."""
    handler = BatchingStreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
