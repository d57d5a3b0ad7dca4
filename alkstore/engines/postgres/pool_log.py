"""psycopg_pool's warnings of failed reconnect tries, for the store's own pools.

psycopg_pool logs a WARNING for each failed connection try and each given-up
series of tries. The store gives a series up after a few seconds
(``connections.POOL_RECONNECT_S``), so an outage of 30 s gave ~40 such lines
while the worker itself says once that the database is away and once that it is
back. This filter, on the ``psycopg.pool`` logger, lets through the first of them
per pool and per ``window_s`` (the first still shows libpq's reason: a refused
password reads differently from a stopped server); other pools' records and
every other record pass untouched. With that logger at DEBUG, all pass.
"""

from __future__ import annotations

import logging

__all__ = ["PoolRetriesFilter", "install"]

POOL_LOGGER = "psycopg.pool"
RETRY_PREFIXES = ("error connecting in", "reconnection attempt in pool")
OURS = "alkstore-"  # the store's pools are named alkstore-<schema>


class PoolRetriesFilter(logging.Filter):
    """At most one reconnect-try warning per store pool per ``window_s``."""

    def __init__(self, window_s: float = 60.0) -> None:
        super().__init__()
        self.window_s = window_s
        self._shown_at: dict[str, float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or not isinstance(record.msg, str):
            return True
        if not record.msg.startswith(RETRY_PREFIXES) or not record.args:
            return True
        args = record.args if isinstance(record.args, tuple) else (record.args,)
        pool = args[0]
        if not isinstance(pool, str) or not pool.startswith(OURS):
            return True
        if logging.getLogger(POOL_LOGGER).isEnabledFor(logging.DEBUG):
            return True
        shown = self._shown_at.get(pool)
        if shown is not None and record.created - shown < self.window_s:
            return False
        self._shown_at[pool] = record.created
        return True


def install() -> None:
    """Put the filter on the ``psycopg.pool`` logger once per process."""
    logger = logging.getLogger(POOL_LOGGER)
    if not any(isinstance(f, PoolRetriesFilter) for f in logger.filters):
        logger.addFilter(PoolRetriesFilter())
