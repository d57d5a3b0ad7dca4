"""The CLI worker's log output: batched INFO lines, WARNING at once, nothing lost at exit."""

from __future__ import annotations

import io
import logging
import time

from hypothesis import given
from hypothesis import strategies as st

from alkstore.cli.logs import (
    FLUSH_LINES,
    TEXT_FORMAT,
    BatchingStreamHandler,
    PoolRetriesFilter,
    TextFormatter,
)


def _logger(stream: io.StringIO) -> tuple[logging.Logger, BatchingStreamHandler]:
    handler = BatchingStreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger = logging.getLogger(f"alkstore.test.logs.{id(stream)}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.handlers[:] = [handler]
    return logger, handler


def test_info_lines_wait_for_a_batch_and_a_warning_writes_them_first_in_order() -> None:
    stream = io.StringIO()
    logger, handler = _logger(stream)
    try:
        logger.info("one")
        logger.info("two")
        logger.warning("three")  # written at once, after the two waiting lines
        assert stream.getvalue() == "INFO one\nINFO two\nWARNING three\n"
    finally:
        handler.close()


def test_waiting_lines_are_written_by_the_timer_without_any_further_record() -> None:
    stream = io.StringIO()
    logger, handler = _logger(stream)
    try:
        logger.info("alone")
        deadline = time.monotonic() + 30
        while stream.getvalue() == "" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert stream.getvalue() == "INFO alone\n"
    finally:
        handler.close()


def test_a_full_batch_is_written_at_once() -> None:
    stream = io.StringIO()
    logger, handler = _logger(stream)
    try:
        for i in range(FLUSH_LINES):
            logger.info("line %d", i)
        assert stream.getvalue().splitlines() == [f"INFO line {i}" for i in range(FLUSH_LINES)]
    finally:
        handler.close()


def test_close_and_flush_write_what_waits() -> None:
    stream = io.StringIO()
    logger, handler = _logger(stream)
    logger.info("before flush")
    handler.flush()
    assert stream.getvalue() == "INFO before flush\n"
    logger.info("before close")
    handler.close()
    assert stream.getvalue() == "INFO before flush\nINFO before close\n"


@given(st.floats(min_value=0, max_value=4e9, allow_nan=False), st.integers(0, 3))
def test_the_text_formatters_cached_time_is_the_standard_one(created: float, repeat: int) -> None:
    standard, cached = logging.Formatter(TEXT_FORMAT), TextFormatter()
    for offset in range(repeat + 1):  # the cache is hit, then crosses seconds
        record = logging.makeLogRecord({"msg": "m", "levelname": "INFO", "name": "n"})
        record.created = created + offset * 0.4
        record.msecs = int((record.created - int(record.created)) * 1000) + 0.0
        assert cached.format(record) == standard.format(record)


def test_the_pools_reconnect_tries_are_shown_once_a_minute_and_everything_else_always() -> None:
    pool_filter = PoolRetriesFilter(window_s=60.0)

    def record(name: str, msg: str, at: float) -> logging.LogRecord:
        rec = logging.LogRecord(name, logging.WARNING, __file__, 1, msg, ("p", "e"), None)
        rec.created = at
        return rec

    shown = [
        pool_filter.filter(record("psycopg.pool", "error connecting in %r: %s", at))
        for at in (0.0, 1.0, 3.0, 59.0, 61.0)
    ]
    assert shown == [True, False, False, False, True]  # the first of each minute
    tried = record("psycopg.pool", "reconnection attempt in pool %r failed after %s sec", 62.0)
    assert not pool_filter.filter(tried)
    assert pool_filter.filter(record("psycopg.pool", "discarding broken connection: %s", 62.0))
    assert pool_filter.filter(record("alkstore.worker", "error connecting in %r: %s", 62.0))
