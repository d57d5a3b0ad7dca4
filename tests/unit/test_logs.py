"""The CLI worker's log output: batched INFO lines, WARNING at once, nothing lost at exit."""

from __future__ import annotations

import io
import logging
import time

from hypothesis import given
from hypothesis import strategies as st

from alkstore.cli.logs import FLUSH_LINES, TEXT_FORMAT, BatchingStreamHandler, TextFormatter
from alkstore.engines.postgres.pool_log import PoolRetriesFilter


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

    def record(msg: str, pool: str, at: float, level: int = logging.WARNING) -> logging.LogRecord:
        rec = logging.LogRecord("psycopg.pool", level, __file__, 1, msg, (pool, "e"), None)
        rec.created = at
        return rec

    tried = "error connecting in %r: %s"
    shown = [pool_filter.filter(record(tried, "alkstore-s", at)) for at in (0, 1, 3, 59, 61)]
    assert shown == [True, False, False, False, True]  # the first of each minute
    given_up = "reconnection attempt in pool %r failed after %s sec"
    assert not pool_filter.filter(record(given_up, "alkstore-s", 62.0))
    assert pool_filter.filter(record(tried, "alkstore-other", 62.0))  # per pool
    assert pool_filter.filter(record(tried, "the-apps-own-pool", 62.0))  # not ours
    assert pool_filter.filter(record("discarding broken connection: %s", "x", 62.0))
    logger = logging.getLogger("psycopg.pool")
    before = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        assert pool_filter.filter(record(tried, "alkstore-s", 63.0))  # debugging: all of them
    finally:
        logger.setLevel(before)
