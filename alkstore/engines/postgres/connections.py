"""The PostgreSQL engine's connections: the pool, the side connections, the errors.

:class:`PostgresConnections` is what the storage operations of ``engine.py`` stand
on: ``_fetchall`` / ``_fetchone`` / ``_rowcount`` run one named statement on a
pool connection in autocommit (one round trip, one transaction); ``connect``
opens the listener's, the waker's and the migrations' own connections;
``_claim_rows`` runs the plain claim on a connection kept for claims (a wake's
claim then takes no pool checkout); and every driver error becomes
:class:`EngineError` in one place,
:meth:`PostgresConnections.failure`. It is the ``protocols.TransactionHost`` a
``store.transaction()`` (``transaction.py``) stands on. All SQL is formatted once, at construction,
with the schema as a quoted identifier.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Self

import psycopg
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from alkstore.engines.postgres import pool_log
from alkstore.engines.postgres.kept import KeptConnection
from alkstore.engines.postgres.listener import Listener
from alkstore.engines.postgres.migrator import (
    CLOCKED_NOW,
    FormattedQueries,
    check_schema_ready,
    migrate_if_needed,
)
from alkstore.engines.postgres.settings import PgSettings, parse_settings
from alkstore.engines.postgres.waker import Waker
from alkstore.errors import EngineError, StoreClosedError

__all__ = ["Conn", "PostgresConnections", "privilege_hint"]

log = logging.getLogger("alkstore.postgres")

Conn = psycopg.AsyncConnection[TupleRow]
POOL_CLOSE_WAIT_S = 1.0
# the server's goodbye on a connection it ends (SQLSTATE 57P01: a shutdown or
# pg_terminate_backend; 57P02: another backend crashed): read by the next statement
# sent on it, which after a restart can be the first one after the server is back
ENDED_BY_SERVER = (psycopg.errors.AdminShutdown, psycopg.errors.CrashShutdown)
# psycopg_pool retries a lost connection on a doubling backoff (1, 2, 4 … s) for
# its reconnect_timeout (5 min by default), and while those tries are scheduled no
# request opens another: after an outage the pool came back up to an outage later
# (a 40-s outage: its next try ~23 s after the server was back), and with it the
# heartbeats. Tries given up after this long let the next request start a new one
# at once, so the pool is back within a try's gap (≤ 2 s) of the server.
POOL_RECONNECT_S = 5.0
SPARE_S = 5.0  # the open's own connection waits this long for a kept connection to adopt it


def privilege_hint(error: psycopg.Error) -> str:
    """What to do about a missing privilege (docs/postgres.md, "Roles and privileges")."""
    if not isinstance(error, psycopg.errors.InsufficientPrivilege):
        return ""
    return (
        " (the connecting role lacks this privilege: see docs/postgres.md, "
        '"Roles and privileges"; DDL needs the owner, via `alkstore migrate`)'
    )


class PostgresConnections:
    """The pool and connections of one store's schema (what ``PostgresEngine`` stands on)."""

    def __init__(self, settings: PgSettings, schema: str) -> None:
        self.settings = settings
        self.schema = schema
        self.q: dict[str, bytes] = FormattedQueries(schema)  # each formatted on first use
        self._clock: Callable[[], float] | None = None
        self._prepare = 0 if settings.prepare else None
        self._pool: AsyncConnectionPool[Conn] | None = None
        self._waker: Waker | None = None
        self._listener: Listener | None = None
        self._closed = False
        # the connection the open checked the schema on, kept (configured) for the
        # first kept connection to adopt instead of connecting: a worker's claim
        # connection then costs no connect, and its backend no start and exit
        # (~10 ms of server CPU each, docs/benchmarks.md); closed after SPARE_S
        self._spare: Conn | None = None
        self._spare_timer: asyncio.TimerHandle | None = None
        self._spare_closing: asyncio.Task[None] | None = None
        closed = lambda: self._closed  # noqa: E731
        # connections kept beside the pool (``kept.py``): the plain claim's, the
        # worker's receipted acks' (planned with enable_seqscan off for the session:
        # only that statement runs on it; see ``index_plan_here``), and a fair queue's
        # claims' (generic plans for the session, see ``generic_plan_here``; opened
        # by the first fair claim only)
        self._claims = KeptConnection("claim", self._open_kept, closed, ready=self._take_spare)
        self._acks = KeptConnection(
            "ack", functools.partial(self._open_kept, "SET enable_seqscan TO off"), closed
        )
        self._fair_claims = KeptConnection(
            "fair claim",
            functools.partial(self._open_kept, "SET plan_cache_mode TO force_generic_plan"),
            closed,
        )

    @classmethod
    def from_url(cls, url: str, schema: str, options: dict[str, Any]) -> Self:
        """Build from a ``postgresql://`` URL (its query may carry alkstore options)."""
        return cls(parse_settings(url, options), schema)

    def set_clock(self, clock: Callable[[], float]) -> None:
        """TESTS ONLY: read "now" (POSIX seconds) from ``clock`` instead of the server.

        Every query then takes the time as a parameter; call before use (the
        queries are formatted again).
        """
        self._clock = clock
        self.q = FormattedQueries(self.schema, CLOCKED_NOW)

    def timed(self, params: dict[str, Any]) -> dict[str, Any]:
        """``params`` with the test clock's "now", if one is set."""
        clock = self._clock
        if clock is None:
            return params
        return {**params, "now": datetime.fromtimestamp(clock(), UTC)}

    def send_wake(self, queue: str) -> None:
        """Wake ``queue``'s consumers from the waker's connection (coalesced; best-effort;
        call only after the enqueue committed)."""
        waker = self._waker
        if waker is not None and self.settings.wake != "off":
            waker.wake(queue)

    def lead_wake(self) -> bool:
        """Whether the next enqueue's insert should carry its queue's wake itself (the
        waker is idle: ``Waker.lead``); it then sends none after the commit."""
        waker = self._waker
        return waker is not None and waker.lead()

    # -- plumbing ---------------------------------------------------------------------
    async def connect(self, *, prepare: bool = True) -> Conn:
        """A new autocommit connection outside the pool (listener, waker, migrations)."""
        conn = await psycopg.AsyncConnection.connect(
            self.settings.conninfo,
            autocommit=True,
            prepare_threshold=self._prepare if prepare else None,
        )
        return conn

    async def _wake_connection(self) -> Conn:
        conn = await self.connect()
        # A wake is best-effort and carries no data, so its commit need not wait
        # for the WAL flush (a NOTIFY transaction writes a commit record): the
        # notification goes out at commit either way, ~1 ms sooner.
        await conn.execute("SET synchronous_commit TO off")
        return conn

    @staticmethod
    async def _configure(conn: Conn) -> None:
        # Times come back as UTC; binary timestamptz is an absolute instant, so
        # this only spares a conversion (it is not needed for correctness).
        await conn.execute("SET TIME ZONE 'UTC'")

    def check_open(self) -> AsyncConnectionPool[Conn]:
        """The pool; :class:`StoreClosedError` once the store is closed."""
        if self._closed or self._pool is None:
            raise StoreClosedError(f"store on schema {self.schema!r} is closed")
        return self._pool

    async def failure(self, error: psycopg.Error, what: str) -> Exception:
        """The one translation point of driver errors.

        After a lost connection the pool's idle connections are checked before
        the error reaches the caller: they died with it if the server restarted
        or the backends were terminated, and a check started in the background
        would race the caller's next operation onto another dead connection. The
        check takes them out of the pool at once and returns only those that
        answer, so the next operation gets a working (or a new) connection.
        """
        if self._closed:
            return StoreClosedError(f"store on schema {self.schema!r} is closed")
        if (
            isinstance(error, psycopg.OperationalError)
            and not isinstance(error, PoolTimeout)  # a busy pool, not a dead connection
            and self._pool is not None
        ):
            await self._check_pool()
        return EngineError(
            f"PostgreSQL error in {what} (schema {self.schema!r}): {error}{privilege_hint(error)}",
            connection_ended=isinstance(error, ENDED_BY_SERVER),
        )

    async def _check_pool(self) -> None:
        pool = self._pool
        if pool is not None and not self._closed:
            try:
                await pool.check()
            except psycopg.Error as e:
                log.debug("alkstore: pool check failed: %s", e)

    async def _fetchall(self, name: str, params: dict[str, Any]) -> list[TupleRow]:
        pool = self.check_open()
        try:
            async with pool.connection() as conn:
                cur = await conn.execute(self.q[name], self.timed(params), binary=True)
                return await cur.fetchall()
        except psycopg.Error as e:
            raise await self.failure(e, name) from e

    async def _fetchone(self, name: str, params: dict[str, Any]) -> TupleRow | None:
        """The first row of ``name`` (each caller's statement returns at most one)."""
        rows = await self._fetchall(name, params)
        return rows[0] if rows else None

    async def _fetchall_planned(
        self, setting: str, name: str, params: dict[str, Any]
    ) -> list[TupleRow]:
        """``name`` after the planner setting ``setting`` (a ``set_config(..., true)``)
        in one pipeline with no Sync between: one implicit transaction, so the
        setting ends with it and costs no round trip; the rows are read inside the
        pipeline, whose exit reports a failed commit."""
        pool = self.check_open()
        try:
            async with pool.connection() as conn:
                async with conn.pipeline():
                    await conn.execute(self.q[setting])
                    cur = await conn.execute(self.q[name], self.timed(params), binary=True)
                    rows = await cur.fetchall()
                return rows
        except psycopg.Error as e:
            raise await self.failure(e, name) from e

    async def _rowcount(self, name: str, params: dict[str, Any]) -> int:
        pool = self.check_open()
        try:
            async with pool.connection() as conn:
                cur = await conn.execute(self.q[name], self.timed(params))
                return cur.rowcount
        except psycopg.Error as e:
            raise await self.failure(e, name) from e

    async def _rowcount_unflushed(self, name: str, params: dict[str, Any]) -> int:
        """``_rowcount`` of a bookkeeping delete whose commit does not wait for the WAL
        flush (``unflushed_here``): visible to every session at once, only not yet
        durable, so a worker's stop waits ~1 ms less per such delete here."""
        pool = self.check_open()
        try:
            async with pool.connection() as conn:
                async with conn.pipeline():
                    await conn.execute(self.q["unflushed_here"])
                    cur = await conn.execute(self.q[name], self.timed(params))
                return cur.rowcount
        except psycopg.Error as e:
            raise await self.failure(e, name) from e

    async def _claim_rows(self, name: str, params: dict[str, Any]) -> list[TupleRow]:
        """``_fetchall`` for a claim, on the store's claim connection when it is free:
        no pool checkout and return around the statement (~0.1 ms of a wake's claim
        here), and the claim's prepared statement stays planned on one connection.
        A claim that finds it taken (or not open yet: it opens in the background)
        runs on the pool. The same statement in the same autocommit transaction, so
        the claim still waits for its WAL flush; a failed or cancelled one drops the
        connection (its state is unknown) and the next claim opens another."""
        self.check_open()
        conn = self._claims.take()
        if conn is None:
            return await self._fetchall(name, params)
        return await self._kept_rows(self._claims, conn, name, params)

    async def _ack_rows(self, name: str, params: dict[str, Any]) -> list[TupleRow]:
        """The receipted ack ``name``: on the store's ack connection when it is free
        (its session plans with ``enable_seqscan`` off: primary-key probes, see
        ``index_plan_here``), else on the pool after ``index_plan_here`` in one
        pipeline. The kept connection spares the pipeline and the pool checkout:
        ~0.2 ms of client CPU per ack batch measured here. The worker's first ack
        waits for that connection to open rather than grow the pool."""
        self.check_open()
        conn = self._acks.take() or await self._acks.take_opening()
        if conn is None:
            return await self._fetchall_planned("index_plan_here", name, params)
        return await self._kept_rows(self._acks, conn, name, params)

    async def _fair_rows(self, name: str, params: dict[str, Any]) -> list[TupleRow]:
        """A fair claim ``name`` on its generic plan: on the store's fair-claim
        connection when it is free (its session plans generically: only fair claims
        run on it), else on the pool after ``generic_plan_here`` in one pipeline.
        The kept connection spares the pipeline's extra statement and the pool
        checkout, as the plain claim's does (docs/benchmarks.md). Without
        prepared statements (``prepare=off``, PgBouncer) there is no plan to keep,
        and a session setting could outlive this client's use of a pooled server
        connection: the pool path then, as before."""
        self.check_open()
        conn = self._fair_claims.take() if self._prepare is not None else None
        if conn is None:
            return await self._fetchall_planned("generic_plan_here", name, params)
        return await self._kept_rows(self._fair_claims, conn, name, params)

    async def _kept_rows(
        self, kept: KeptConnection, conn: Conn, name: str, params: dict[str, Any]
    ) -> list[TupleRow]:
        try:
            cur = await conn.execute(self.q[name], self.timed(params), binary=True)
            return await cur.fetchall()
        except psycopg.Error as e:
            await kept.drop(conn)
            raise await self.failure(e, name) from e
        except BaseException:
            await asyncio.shield(kept.drop(conn))
            raise
        finally:
            kept.busy = False

    async def _open_kept(self, *session: str) -> Conn:
        """A connection for a :class:`KeptConnection`: the spare if there is one, else
        a new one configured as the pool's; then the ``session`` statements (settings
        for that connection's whole life)."""
        conn = self._take_spare() or await self._open_configured()
        try:
            for statement in session:
                await conn.execute(statement.encode())
        except BaseException:
            await self._drop(conn)
            raise
        return conn

    async def _open_configured(self) -> Conn:
        conn = await self.connect()
        try:
            await self._configure(conn)
        except BaseException:
            await self._drop(conn)
            raise
        return conn

    def _keep_spare(self, conn: Conn) -> None:
        self._spare = conn
        self._spare_timer = asyncio.get_running_loop().call_later(SPARE_S, self._expire_spare)

    def _take_spare(self) -> Conn | None:
        """The spare connection, now the caller's (``None``: none is left)."""
        conn, self._spare = self._spare, None
        if self._spare_timer is not None:
            self._spare_timer.cancel()
            self._spare_timer = None
        if conn is not None and conn.closed:
            return None
        return conn

    def _expire_spare(self) -> None:
        self._spare_timer = None
        conn = self._take_spare()
        if conn is not None:
            self._spare_closing = asyncio.get_running_loop().create_task(self._drop(conn))

    @staticmethod
    async def _drop(conn: Conn) -> None:
        with contextlib.suppress(psycopg.Error, OSError):
            await conn.close()

    # -- lifecycle ----------------------------------------------------------------------
    async def open(self) -> None:
        # Migrate on a connection of our own first: a bad URL or a missing
        # server fails here at once, with libpq's own message, instead of
        # after the pool's timeout. Once that connection is up the server answers,
        # so the pool opens its first connection meanwhile (a worker's first claim
        # then finds it ready: one connection set-up less of its start); a failed
        # check or migration closes the pool again.
        # With migrate=off nothing but reads runs here: a role with row privileges
        # alone can open the store, and a misspelt schema is an error, not a new store.
        # When that connection was only read (the schema was current), it is
        # configured as the pool's and kept as the spare (``_take_spare``).
        pool: AsyncConnectionPool[Conn] | None = None
        try:
            conn = await self.connect(prepare=False)
            spare = False
            try:
                pool = self._new_pool()
                await pool.open(wait=False)
                if self.settings.migrate:
                    spare = not (await migrate_if_needed(conn, self.schema))[1]
                else:
                    await check_schema_ready(conn, self.schema)
                    spare = True
                if spare:
                    await self._configure(conn)
                    conn.prepare_threshold = self._prepare
            except BaseException:
                spare = False
                raise
            finally:
                if not spare:
                    await conn.close()
        except psycopg.Error as e:
            self._closed = True
            await self._discard(pool)
            raise EngineError(
                f"cannot open the PostgreSQL store (schema {self.schema!r}): {e}{privilege_hint(e)}"
            ) from e
        except BaseException:
            self._closed = True
            await self._discard(pool)
            raise
        self._pool = pool
        if spare:
            self._keep_spare(conn)
        self._waker = Waker(self._wake_connection, self.q["wake"], self.settings.wake_coalesce_s)

    def _new_pool(self) -> AsyncConnectionPool[Conn]:
        pool_log.install()  # its reconnect tries' warnings at most once a minute
        settings = self.settings
        return AsyncConnectionPool(
            settings.conninfo,
            kwargs={"autocommit": True, "prepare_threshold": self._prepare},
            min_size=settings.pool_min,
            max_size=settings.pool_max,
            timeout=settings.pool_timeout_s,
            reconnect_timeout=POOL_RECONNECT_S,
            configure=self._configure,
            open=False,
            name=f"alkstore-{self.schema}",
        )

    @staticmethod
    async def _discard(pool: AsyncConnectionPool[Conn] | None) -> None:
        """Close the pool of a store that did not open (its error is the one raised)."""
        if pool is not None:
            with contextlib.suppress(Exception):
                await pool.close(timeout=POOL_CLOSE_WAIT_S)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._waker is not None:
                await self._waker.close()
            if self._listener is not None:
                await self._listener.stop()
            spare = self._take_spare()
            if spare is not None:
                await self._drop(spare)
            await self._claims.close()
            await self._acks.close()
            await self._fair_claims.close()
        finally:
            if self._pool is not None:
                # its workers may be trying to connect over a dead network: wait less
                # than a connection attempt for them (they are stopped either way)
                await self._pool.close(timeout=POOL_CLOSE_WAIT_S)
