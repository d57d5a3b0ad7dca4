"""The PostgreSQL engine's storage operations: psycopg 3 (async), one schema per store.

Every operation is one statement on a pool connection in autocommit, so one
round trip and one transaction: the claim (with its pre-claim sweep), each
fenced handle operation and every dead-letter move are single statements
whose CTEs commit together (see ``sql/queries.sql``). The pool, the side
connections and the translation of driver errors are ``connections.py``'s;
``store.transaction()`` is ``transaction.py``'s, the enqueue on the caller's
own connection ``outbox.py``'s and the inserts ``inserts.py``'s. A limited
queue's claim is ``core.limited_claim``'s flow, run in one transaction by
``flowcontrol.py``, which also holds the queue settings and the one-statement
claim of a fair queue without limits (``fair_claim``).
Wakes go out after commit from the waker's own connection (``waker.py``), or
an idle waker's leading edge rides on the enqueue's own insert;
LISTEN lives on the listener's own connection (``listener.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import psycopg

from alkstore.core.aging import aging_sweep
from alkstore.core.dedupe import Enqueued
from alkstore.core.flow import Claimed
from alkstore.core.job import Row
from alkstore.core.options import Stamps
from alkstore.core.results import RESULTS_CHANNEL
from alkstore.core.steps import Rows, run_steps
from alkstore.core.tables import COPIED_TABLES
from alkstore.core.tables import table as copied_table
from alkstore.engine import NoteSink, StatsRow
from alkstore.engines.postgres.bulk import PostgresBulk
from alkstore.engines.postgres.connections import privilege_hint
from alkstore.engines.postgres.copying import from_stored, to_stored
from alkstore.engines.postgres.deps import PostgresDependencies
from alkstore.engines.postgres.flowcontrol import PostgresFlowControl
from alkstore.engines.postgres.giveback import PostgresGiveBack
from alkstore.engines.postgres.handoff import PostgresHandoff
from alkstore.engines.postgres.health import PostgresHealth
from alkstore.engines.postgres.inserts import (
    insert_keyed,
    insert_params,
)
from alkstore.engines.postgres.life import PostgresLife
from alkstore.engines.postgres.listener import Listener
from alkstore.engines.postgres.migrator import SCHEMA_VERSION, migrate_connection
from alkstore.engines.postgres.settings import PgSettings
from alkstore.engines.postgres.transaction import PostgresTransaction
from alkstore.errors import EngineError, InvalidArgumentError

__all__ = ["SCHEMA_VERSION", "PostgresEngine", "migrate"]

log = logging.getLogger("alkstore.postgres")


class PostgresEngine(
    PostgresFlowControl,
    PostgresGiveBack,
    PostgresHealth,
    PostgresLife,
    PostgresDependencies,
    PostgresBulk,
    PostgresHandoff,
):
    """Storage in one PostgreSQL schema, shared by any number of processes and machines."""

    name = "postgres"

    def __init__(self, settings: PgSettings, schema: str) -> None:
        super().__init__(settings, schema)
        # queues whose claims came back limited: a slot freed there wakes their consumers
        self._limited: set[str] = set()
        # queues last seen fair without limits: their claims go straight to fair_claim
        self._fair: set[str] = set()
        # queues whose settings row (paused, limits, fairness) stopped claim_lean:
        # claimed with `claim` until a claim of theirs goes through plainly again
        self._gated: set[str] = set()
        # whether the planner has statistics for fair_claim's tables, and when asked
        self._fair_stats: tuple[bool, float] | None = None

    # -- enqueue (``enqueue`` itself, with its hand-offs: handoff.py) --------------------
    async def enqueue_debounced(
        self, queue: str, payload: bytes, key: str, push: bool, stamps: Stamps
    ) -> Enqueued:
        params = self.timed(insert_params(queue, [payload], stamps))
        del params["payloads"]
        params.update(payload=payload, key=key, push=push)
        name = "insert_debounced" if stamps.partition_key is None else "insert_debounced_fair"
        row = await self._fetchone(name, params)
        assert row is not None
        self.send_wake(queue)
        return Enqueued(int(row[0]), bool(row[1]))

    async def enqueue_keyed(
        self,
        queue: str,
        payloads: Sequence[bytes],
        keys: Sequence[str | None],
        window_s: float | None,
        stamps: Stamps,
    ) -> list[Enqueued]:
        pool = self.check_open()
        try:
            async with pool.connection() as conn:
                if window_s is None:
                    # one autocommit statement per step: the insert alone decides (the
                    # unique index), and a holder gone before the lookup is retried
                    result = await insert_keyed(
                        self.q, self.timed, conn, queue, payloads, keys, None, stamps
                    )
                else:  # the window steps commit together with the insert
                    async with conn.transaction():
                        result = await insert_keyed(
                            self.q, self.timed, conn, queue, payloads, keys, window_s, stamps
                        )
        except psycopg.Error as e:
            raise await self.failure(e, "enqueue") from e
        if any(not item.duplicate for item in result):
            self.send_wake(queue)
        return result

    # -- claim and handle operations ---------------------------------------------------
    async def claim(self, queue: str, worker_id: str, n: int, exhausted_error: str) -> Claimed:
        if queue in self._fair:  # one statement, gate included (it says if that changed)
            fair = await self._claim_fair(queue, worker_id, n, exhausted_error)
            if fair is not None:
                return fair
            self._fair.discard(queue)
        params = {
            "queue": queue,
            "worker": worker_id,
            "n": n,
            "exhausted_error": exhausted_error,
            "gated": True,
        }
        if queue in self._gated:
            rows = await self._claim_rows("claim", params)
        else:  # nothing in its way: the pending arm alone (no marker); else `claim` decides
            rows = await self._claim_rows("claim_lean", params)
            if not rows or rows[-1][0] is not None:
                self._limited.discard(queue)
                return Claimed(rows)
            if rows[-1][3] == "gated":
                self._gated.add(queue)
            rows = await self._claim_rows("claim", params)
        if rows and rows[-1][0] is None:  # the marker row: a limited or fair queue
            if rows[-1][3] == "fair":  # fair, not paused, no limits: fair_claim from now on
                self._fair.add(queue)
                self._limited.discard(queue)
                return await self.claim(queue, worker_id, n, exhausted_error)
            claimed = await self._claim_locked(queue, worker_id, n, exhausted_error)
            if claimed.limited:
                self._limited.add(queue)
            return claimed
        self._limited.discard(queue)
        if rows:  # claimed with no gate in the way: claim_lean from now on
            self._gated.discard(queue)
        return Claimed(rows)

    async def ack_many(self, items: Sequence[tuple[str, int, int]]) -> set[tuple[int, int]]:
        if len(items) == 1:
            queue, job_id, attempts = items[0]
            params = {"id": job_id, "queue": queue, "attempts": attempts}
            if not await self._rowcount("ack", params):
                return set()
            self._slots_freed({queue})
            return {(job_id, attempts)}
        items = sorted(items, key=_by_id)  # lock order: see ack_receipted
        columns = {
            "queues": [item[0] for item in items],
            "ids": [item[1] for item in items],
            "attempts": [item[2] for item in items],
        }
        acked = {(row[0], row[1]) for row in await self._fetchall("ack_many", columns)}
        if acked and self._limited:
            self._slots_freed({q for q, i, a in items if (i, a) in acked})
        return acked

    async def ack_receipted(
        self, items: Sequence[tuple[str, int, int]], owner: str, token: str
    ) -> set[tuple[int, int]]:
        # in id order: the DELETE locks rows in the array's order, so two statements
        # that lock many of the same rows (a bulk action, a sweep) take them alike
        queues, ids, attempts = zip(*sorted(items, key=_by_id), strict=True)
        params = {  # array literals (see the query): queue names need no escaping
            "queues": '{"' + '","'.join(queues) + '"}',
            "ids": "{" + ",".join(map(str, ids)) + "}",
            "attempts": "{" + ",".join(map(str, attempts)) + "}",
            "owner": owner,
            "token": token,
        }
        rows = await self._ack_rows("ack_receipted", params)
        row = rows[0] if rows else None
        refused = set(row[0]) if row is not None else {item[1] for item in items}
        acked = {(i, a) for _, i, a in items if i not in refused}
        if acked and self._limited:
            self._slots_freed({q for q, i, a in items if (i, a) in acked})
        return acked

    async def drop_ack_receipts(self, owner: str, older_s: float) -> None:
        await self._rowcount_unflushed("drop_ack_receipts", {"owner": owner, "older_s": older_s})

    async def ack_result(
        self, queue: str, job_id: int, attempts: int, value: str, keep_s: float
    ) -> bool:
        params = {
            "id": job_id,
            "queue": queue,
            "attempts": attempts,
            "value": value,
            "keep": keep_s,
            "channel": RESULTS_CHANNEL,
        }
        return bool(await self._fetchall("ack_result", params))

    async def outcomes(self, queue: str | None, ids: Sequence[int]) -> list[Row]:
        return await self._fetchall("outcomes", {"queue": queue, "ids": list(ids)})

    async def list_outcomes(self, queue: str, limit: int) -> list[Row]:
        return await self._fetchall("admin_outcomes", {"queue": queue, "limit": limit})

    async def retry(
        self, queue: str, job_id: int, attempts: int, delay_s: float, error: str | None
    ) -> bool:
        params = {
            "id": job_id,
            "queue": queue,
            "attempts": attempts,
            "delay": delay_s,
            "error": error,
        }
        return self._freed(queue, await self._rowcount("retry", params) > 0)

    async def dead_letter(self, queue: str, job_id: int, attempts: int, error: str) -> bool:
        params = {"id": job_id, "queue": queue, "attempts": attempts, "error": error}
        return self._freed(queue, await self._rowcount("dead_letter", params) > 0)

    async def heartbeat(
        self, queue: str, job_id: int, attempts: int, extend_s: float | None
    ) -> bool:
        params = {"id": job_id, "queue": queue, "attempts": attempts, "extend": extend_s}
        return await self._rowcount("heartbeat", params) > 0

    async def ack_batch(self, queue: str, ids: Sequence[int]) -> int:
        id_list = ids if type(ids) is list else list(ids)
        return await self._rowcount("ack_batch", {"queue": queue, "ids": id_list})

    async def cancel(self, queue: str, job_id: int) -> bool:
        return await self._rowcount("cancel", {"id": job_id, "queue": queue}) > 0

    async def get_job(self, queue: str, job_id: int) -> Row | None:
        return await self._fetchone("get_job", {"id": job_id, "queue": queue})

    async def sweep(
        self, queue: str, retention_s: float | None, expired_error: str
    ) -> tuple[int, int, int, int]:
        params = {"queue": queue, "retention": retention_s, "expired_error": expired_error}
        row = await self._fetchone("sweep", params)
        assert row is not None

        async def step(name: str, extra: dict[str, Any]) -> Rows:
            return list(await self._fetchall(name, {"queue": queue, **extra}))

        await run_steps(aging_sweep(), step)  # priority aging, if the queue has it
        await self.purge_life(queue)  # the life rows of jobs that are gone (#24)
        return int(row[0]), int(row[1]), int(row[2]), int(row[3])

    async def next_wake_in(self, queue: str, within_s: float) -> float | None:
        row = await self._fetchone("next_due", {"queue": queue, "within": within_s})
        due = None if row is None else row[0]
        return None if due is None else max(float(due), 0.0)

    # -- schedules ---------------------------------------------------------------------
    async def schedule_marks(self, names: Sequence[str]) -> list[tuple[str, float, int | None]]:
        rows = await self._fetchall("schedule_marks", {"names": list(names)})
        return [(name, float(tick), job) for name, tick, job in rows]

    async def mark_schedule(self, name: str, tick: float, job_id: int | None) -> None:
        await self._rowcount("mark_schedule", {"name": name, "tick": tick, "job": job_id})

    # -- notify / listen ------------------------------------------------------------------
    async def notify(self, channel: str, payload: str) -> None:
        await self._rowcount("notify", {"channel": channel, "payload": payload})

    @property
    def listens(self) -> bool:
        return self.settings.listen

    async def wake(self, channel: str) -> None:
        self.check_open()
        self.send_wake(channel)

    async def subscribe(self, channels: Sequence[str], sink: NoteSink) -> None:
        self.check_open()
        if not self.settings.listen:
            raise InvalidArgumentError("this store is poll-only (listen=off): nothing to listen to")
        if self._listener is None:
            self._listener = Listener(lambda: self.connect(prepare=False), sink)
        await self._listener.listen(channels)

    async def unsubscribe(self, channels: Sequence[str]) -> None:
        if self._listener is not None and not self._closed:
            await self._listener.unlisten(channels)

    # -- admin (alkstore/admin.py) -----------------------------------------------------
    async def list_jobs(
        self, queue: str, state: str | None, limit: int, after: int = 0, before: int | None = None
    ) -> list[Row]:
        name = "admin_list_jobs" if before is None else "admin_list_jobs_before"
        params = {"queue": queue, "state": state, "limit": limit, "after": after, "before": before}
        return await self._fetchall(name, params)

    async def list_dead(self, after: int | None, before: int | None, limit: int) -> list[Row]:
        name = "admin_dead_after" if before is None else "admin_dead_before"
        params = {"after": after or 0, "before": before, "limit": limit}
        return await self._fetchall(name, params)

    async def find_job(self, job_id: int) -> Row | None:
        return await self._fetchone("admin_find_job", {"id": job_id})

    async def stats(self) -> list[StatsRow]:
        rows = await self._fetchall("admin_stats", {})
        return [
            (q, int(p), int(d), int(r), int(x), _age(age), int(b)) for q, p, d, r, x, age, b in rows
        ]

    # -- live workers and outcome history -----------------------------------------------
    async def upsert_worker(
        self,
        worker_id: str,
        host: str,
        pid: int,
        queues: Sequence[str],
        concurrency: int,
        running: int,
    ) -> None:
        params = {
            "id": worker_id,
            "host": host,
            "pid": pid,
            "queues": list(queues),
            "concurrency": concurrency,
            "running": running,
        }
        await self._rowcount("worker_upsert", params)

    async def delete_worker(self, worker_id: str) -> bool:
        return bool(await self._rowcount_unflushed("worker_delete", {"id": worker_id}))

    async def purge_workers(self, older_than_s: float) -> int:
        return await self._rowcount("worker_purge", {"older_than": older_than_s})

    async def list_workers(self) -> list[Row]:
        rows = await self._fetchall("worker_list", {})
        return [(*row[:8], max(float(row[8]), 0.0)) for row in rows]

    async def list_workers_page(
        self, after: str | None, before: str | None, limit: int
    ) -> list[Row]:
        name = "worker_page_after" if before is None else "worker_page_before"
        params = {"after": after or "", "before": before, "limit": limit}
        rows = await self._fetchall(name, params)
        return [(*row[:8], max(float(row[8]), 0.0)) for row in rows]

    async def add_outcomes(self, counts: Sequence[tuple[str, str, int]], keep_s: float) -> None:
        pool = self.check_open()
        params = {
            "queues": [q for q, _, _ in counts],
            "outcomes": [o for _, o, _ in counts],
            "counts": [n for _, _, n in counts],
        }
        try:
            async with pool.connection() as conn, conn.transaction():
                await conn.execute(self.q["outcome_add"], self.timed(params))
                await conn.execute(self.q["outcome_purge"], self.timed({"older_than": keep_s}))
        except psycopg.Error as e:
            raise await self.failure(e, "add_outcomes") from e

    async def outcome_history(self, seconds: float) -> list[tuple[str, float, str, int]]:
        rows = await self._fetchall("outcome_history", {"seconds": seconds})
        return [(q, float(m), o, int(n)) for q, m, o, n in rows]

    async def outcome_series(
        self, seconds: float, bucket_s: int, queue: str | None
    ) -> list[tuple[str, float, str, int]]:
        params = {"seconds": seconds, "bucket": bucket_s, "queue": queue}
        rows = await self._fetchall("outcome_series", params)
        return [(q, float(m), o, int(n)) for q, m, o, n in rows]

    # -- store copy (alkstore/copy.py) --------------------------------------------------
    async def copy_counts(self) -> dict[str, int]:
        row = await self._fetchone("copy_counts", {})
        assert row is not None
        return {spec.name: n for spec, n in zip(COPIED_TABLES, row, strict=True)}

    async def copy_read(self, table: str, after: Sequence[Any], limit: int) -> list[Row]:
        spec = copied_table(table)
        kinds = spec.kinds()
        name = f"copy_read_{table[4:]}"
        pool = self.check_open()
        try:
            async with pool.connection() as conn:
                params = [*to_stored(kinds, after), limit]
                cur = await conn.execute(self.q[name], params)
                rows = await cur.fetchall()
        except psycopg.Error as e:
            raise await self.failure(e, name) from e
        return [from_stored(kinds, row) for row in rows]

    async def copy_write(self, table: str, rows: Sequence[Row]) -> None:
        kinds = copied_table(table).kinds()
        name = f"copy_write_{table[4:]}"
        pool = self.check_open()
        try:
            async with pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
                await cur.executemany(self.q[name], [to_stored(kinds, r) for r in rows])
        except psycopg.Error as e:
            raise await self.failure(e, name) from e

    async def last_job_id(self) -> int:
        row = await self._fetchone("copy_last_id", {})
        assert row is not None
        return int(row[0])

    async def advance_job_ids(self, last: int) -> None:
        pool = self.check_open()
        try:
            async with pool.connection() as conn:
                await conn.execute(self.q["copy_advance_ids"], [last])
        except psycopg.Error as e:
            raise await self.failure(e, "copy_advance_ids") from e

    # -- transactions -------------------------------------------------------------------
    async def begin(self) -> PostgresTransaction:
        pool = self.check_open()
        try:
            conn = await pool.getconn()
            try:
                await conn.execute("BEGIN")
            except BaseException:
                await pool.putconn(conn)
                raise
        except psycopg.Error as e:
            raise await self.failure(e, "begin") from e
        return PostgresTransaction(self, pool, conn)


async def migrate(url: str, schema: str = "alkstore", **options: Any) -> int:
    """Run the migrations of ``schema`` alone (``alkstore migrate``); the version reached.

    >>> await migrate("postgresql://app@db/app", schema="jobs")
    1
    """
    from alkstore.core.names import check_schema

    engine = PostgresEngine.from_url(url, check_schema(schema), options)
    try:
        conn = await engine.connect(prepare=False)
        try:
            return await migrate_connection(conn, schema)
        finally:
            await conn.close()
    except psycopg.Error as e:
        raise EngineError(
            f"cannot migrate PostgreSQL schema {schema!r}: {e}{privilege_hint(e)}"
        ) from e


def _age(seconds: Any) -> float | None:
    """An age in seconds from the database, never negative (clocks of two hosts)."""
    return None if seconds is None else max(float(seconds), 0.0)


def _by_id(item: tuple[str, int, int]) -> int:
    return item[1]
