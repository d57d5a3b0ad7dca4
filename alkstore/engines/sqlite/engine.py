"""The SQLite engine's storage operations: stdlib ``sqlite3``, one file per store.

Each operation is one write unit (group-committed with the other waiting
ones) or one read on the store's own thread; the thread, the connection, the
group commit, the fair busy retries and the wake notes are
``connections.py``'s, the inserts ``inserts.py``'s and ``store.transaction()``
``transaction.py``'s. Wakes are rows of the notes table, written in the
operation's own transaction (``listener.py`` reads them); a committed note
also pokes this process's listeners at once. Every claim is
``core.limited_claim``'s flow, run in the claim's write unit with
``flowcontrol.py``'s steps; that module also holds the queue settings.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Sequence
from typing import Any

from alkstore.core.aging import aging_sweep
from alkstore.core.dedupe import Enqueued
from alkstore.core.flow import RECLAIMED_NOTE, Claimed
from alkstore.core.job import Row
from alkstore.core.limited_claim import limited_claim
from alkstore.core.options import Stamps
from alkstore.core.results import RESULTS_CHANNEL
from alkstore.core.steps import Rows, run_steps_sync
from alkstore.engine import NoteSink, StatsRow
from alkstore.engines.sqlite.bulk import SqliteBulk
from alkstore.engines.sqlite.copying import SqliteCopying
from alkstore.engines.sqlite.deps import SqliteDependencies, revive_children
from alkstore.engines.sqlite.flowcontrol import SqliteFlowControl, claim_steps
from alkstore.engines.sqlite.giveback import SqliteGiveBack
from alkstore.engines.sqlite.health import SqliteHealth
from alkstore.engines.sqlite.inserts import insert_debounced, insert_jobs, insert_keyed
from alkstore.engines.sqlite.life import SqliteLife
from alkstore.engines.sqlite.listener import Listener, listen_locally
from alkstore.engines.sqlite.migrator import QUERIES as Q
from alkstore.engines.sqlite.space import SqliteSpace
from alkstore.engines.sqlite.transaction import SqliteTransaction
from alkstore.errors import EngineError

__all__ = ["SqliteEngine"]

log = logging.getLogger("alkstore.sqlite")


class SqliteEngine(
    SqliteFlowControl,
    SqliteGiveBack,
    SqliteCopying,
    SqliteHealth,
    SqliteLife,
    SqliteDependencies,
    SqliteBulk,
    SqliteSpace,
):
    """Storage on one SQLite file, shared safely by many processes on one machine."""

    name = "sqlite"
    listens = True  # the notes table is always there

    def __init__(self, path: str, **settings: Any) -> None:
        super().__init__(path, **settings)
        # queues whose claims came back limited: a slot freed there wakes their consumers
        self._limited: set[str] = set()

    # -- enqueue ----------------------------------------------------------------
    def _enqueue_unit(
        self, conn: sqlite3.Connection, queue: str, payloads: Sequence[bytes], stamps: Stamps
    ) -> list[int]:
        ids = insert_jobs(conn, queue, payloads, stamps, self._clock())
        self.write_note(conn, queue, "")
        return ids

    async def enqueue(self, queue: str, payloads: Sequence[bytes], stamps: Stamps) -> list[int]:
        return await self._write_call(self._enqueue_unit, queue, payloads, stamps)

    def _debounced_unit(
        self,
        conn: sqlite3.Connection,
        queue: str,
        payload: bytes,
        key: str,
        push: bool,
        stamps: Stamps,
    ) -> Enqueued:
        result = insert_debounced(conn, queue, payload, key, push, stamps, self._clock())
        self.write_note(conn, queue, "")
        return result

    async def enqueue_debounced(
        self, queue: str, payload: bytes, key: str, push: bool, stamps: Stamps
    ) -> Enqueued:
        return await self._write_call(self._debounced_unit, queue, payload, key, push, stamps)

    def _enqueue_keyed_unit(
        self,
        conn: sqlite3.Connection,
        queue: str,
        payloads: Sequence[bytes],
        keys: Sequence[str | None],
        window_s: float | None,
        stamps: Stamps,
    ) -> list[Enqueued]:
        result = insert_keyed(conn, queue, payloads, keys, window_s, stamps, self._clock())
        self.write_note(conn, queue, "")
        return result

    async def enqueue_keyed(
        self,
        queue: str,
        payloads: Sequence[bytes],
        keys: Sequence[str | None],
        window_s: float | None,
        stamps: Stamps,
    ) -> list[Enqueued]:
        return await self._write_call(
            self._enqueue_keyed_unit, queue, payloads, keys, window_s, stamps
        )

    # -- claim and handle operations ---------------------------------------------
    def _claim_unit(
        self, conn: sqlite3.Connection, queue: str, worker: str, n: int, exhausted_error: str
    ) -> Claimed:
        """The claim; the holders of lapsed claims it took over are told."""
        now = self._clock()
        params = {"queue": queue, "now": now, "exhausted_error": exhausted_error}
        if conn.execute(Q["sweep_exhausted_copy"], params).rowcount:
            conn.execute(Q["sweep_exhausted_delete"], params)
        lapsed = {row[0] for row in conn.execute(Q["lapsed_ids"], params)}
        claimed = run_steps_sync(limited_claim(n), claim_steps(conn, queue, worker, now, lapsed))
        for row in claimed.rows:
            if row[0] in lapsed:
                self.write_note(conn, queue, f"{RECLAIMED_NOTE}{row[0]}:{row[7]}")
        # Set here, not after the commit, so a later unit of the same group sees
        # it; a hint only (whether a freed slot writes a wake note).
        if claimed.limited:
            self._limited.add(queue)
        else:
            self._limited.discard(queue)
        return claimed

    async def claim(self, queue: str, worker_id: str, n: int, exhausted_error: str) -> Claimed:
        return await self._write_call(
            self._claim_unit, queue, worker_id, n, exhausted_error, quick=True
        )

    def _ack_unit(
        self, conn: sqlite3.Connection, items: Sequence[tuple[str, int, int]]
    ) -> set[tuple[int, int]]:
        now = self._clock()
        acked = set()
        freed = set()
        if len(items) == 1:
            queue, job_id, attempts = items[0]
            params = {"id": job_id, "queue": queue, "attempts": attempts, "now": now}
            if conn.execute(Q["ack"], params).rowcount:
                acked.add((job_id, attempts))
                freed.add(queue)
        else:  # one statement, not one per row
            items_json = json.dumps(
                [[job_id, queue, attempts] for queue, job_id, attempts in items]
            )
            for job_id, attempts, queue in conn.execute(
                Q["ack_many"], {"items": items_json, "now": now}
            ):
                acked.add((job_id, attempts))
                freed.add(queue)
        self._slots_freed(conn, freed)
        return acked

    async def ack_many(self, items: Sequence[tuple[str, int, int]]) -> set[tuple[int, int]]:
        return await self._write_call(self._ack_unit, items)

    def _ack_receipted_unit(
        self,
        conn: sqlite3.Connection,
        items: Sequence[tuple[str, int, int]],
        owner: str,
        token: str,
    ) -> set[tuple[int, int]]:
        """``_ack_unit`` plus the receipt, in its transaction (see ``ack_receipted``
        in queries.sql): SQLite's single writer makes read-then-write race-free."""
        deleted = {job_id for job_id, _ in self._ack_unit(conn, items)}
        refused = {job_id for _, job_id, _ in items if job_id not in deleted}
        before = conn.execute(Q["ack_receipt"], {"owner": owner}).fetchone()
        if before is not None and before[0] == token:  # a retry: an earlier attempt committed
            refused &= set(json.loads(before[1]))
        params = {"owner": owner, "token": token, "refused": json.dumps(sorted(refused))}
        conn.execute(Q["put_ack_receipt"], {**params, "now": self._clock()})
        return {(job_id, attempts) for _, job_id, attempts in items if job_id not in refused}

    async def ack_receipted(
        self, items: Sequence[tuple[str, int, int]], owner: str, token: str
    ) -> set[tuple[int, int]]:
        return await self._write_call(self._ack_receipted_unit, items, owner, token)

    async def drop_ack_receipts(self, owner: str, older_s: float) -> None:
        params = {"owner": owner, "older_s": older_s, "now": self._clock()}
        await self._rowcount("drop_ack_receipts", params)

    def _ack_result_unit(self, conn: sqlite3.Connection, params: dict[str, Any]) -> bool:
        if not conn.execute(Q["ack"], params).rowcount:
            return False
        conn.execute(Q["insert_result"], params)
        self.write_note(conn, RESULTS_CHANNEL, str(params["id"]))
        return True

    async def ack_result(
        self, queue: str, job_id: int, attempts: int, value: str, keep_s: float
    ) -> bool:
        params = self._fenced(queue, job_id, attempts)
        params.update(value=value, keep=keep_s)
        return await self._write_call(self._ack_result_unit, params)

    async def outcomes(self, queue: str | None, ids: Sequence[int]) -> list[Row]:
        params = {"queue": queue, "ids": json.dumps(list(ids))}
        return await self._fetchall("outcomes", params)

    async def list_outcomes(self, queue: str, limit: int) -> list[Row]:
        params = {"queue": queue, "limit": limit}
        return await self._fetchall("admin_outcomes", params)

    async def retry(
        self, queue: str, job_id: int, attempts: int, delay_s: float, error: str | None
    ) -> bool:
        params = self._fenced(queue, job_id, attempts)
        params["run_at"] = params["now"] + delay_s
        params["error"] = error
        return await self._write_call(self._freeing_unit, "retry", params)

    def _dead_letter_unit(self, conn: sqlite3.Connection, params: dict[str, Any]) -> bool:
        if not conn.execute(Q["dead_letter_copy"], params).rowcount:
            return False
        conn.execute(Q["dead_letter_delete"], {"id": params["id"]})
        self._slots_freed(conn, {params["queue"]})
        return True

    async def dead_letter(self, queue: str, job_id: int, attempts: int, error: str) -> bool:
        params = self._fenced(queue, job_id, attempts)
        params["error"] = error
        return await self._write_call(self._dead_letter_unit, params)

    async def heartbeat(
        self, queue: str, job_id: int, attempts: int, extend_s: float | None
    ) -> bool:
        params = self._fenced(queue, job_id, attempts)
        params["extend"] = extend_s
        return bool(await self._rowcount("heartbeat", params))

    async def ack_batch(self, queue: str, ids: Sequence[int]) -> int:
        params = {"queue": queue, "now": self._clock(), "ids": json.dumps(ids)}
        return await self._rowcount("ack_batch", params)

    async def get_job(self, queue: str, job_id: int) -> Row | None:
        params = {"id": job_id, "queue": queue}
        return await self._fetchone("get_job", params)

    def _sweep_unit(
        self, conn: sqlite3.Connection, queue: str, retention_s: float | None, expired_error: str
    ) -> tuple[int, int, int, int]:
        now = self._clock()
        params = {"queue": queue, "now": now, "expired_error": expired_error}
        expired = conn.execute(Q["expire_copy"], params).rowcount
        if expired:
            conn.execute(Q["expire_delete"], params)
        purged = 0
        if retention_s is not None:
            cutoff = {"queue": queue, "cutoff": now - retention_s}
            purged = conn.execute(Q["purge_dead"], cutoff).rowcount
            if purged:  # the edges of purged children go with them
                conn.execute(Q["deps_purge_edges"])
        results = conn.execute(Q["purge_results"], params).rowcount
        windows = conn.execute(Q["purge_windows"], params).rowcount

        def step(name: str, extra: dict[str, Any]) -> Rows:
            cur = conn.execute(Q[name], {"queue": queue, "now": now, **extra})
            return cur.fetchall() if name == "aging_settings" else [(cur.rowcount,)]

        run_steps_sync(aging_sweep(), step)  # priority aging, if the queue has it
        self.purge_life_unit(conn, queue)  # the life rows of jobs that are gone (#24)
        return expired, purged, results, windows

    async def sweep(
        self, queue: str, retention_s: float | None, expired_error: str
    ) -> tuple[int, int, int, int]:
        swept = await self._write_call(self._sweep_unit, queue, retention_s, expired_error)
        await self.reclaim_space()  # the freed pages back to the file system (space.py)
        return swept

    def _next_due(self, conn: sqlite3.Connection, queue: str, within_s: float) -> float | None:
        now = self._clock()
        params = {"queue": queue, "now": now, "within": within_s}
        due = conn.execute(Q["next_due"], params).fetchone()[0]
        return None if due is None else max(due - now, 0.0)

    async def next_wake_in(self, queue: str, within_s: float) -> float | None:
        return await self._call(self._read, self._next_due, queue, within_s)

    # -- schedules ------------------------------------------------------------------
    async def schedule_marks(self, names: Sequence[str]) -> list[tuple[str, float, int | None]]:
        params = {"names": json.dumps(list(names))}
        return await self._fetchall("schedule_marks", params)

    async def mark_schedule(self, name: str, tick: float, job_id: int | None) -> None:
        params = {"name": name, "tick": tick, "job": job_id, "now": self._clock()}
        await self._rowcount("mark_schedule", params)

    # -- notify / listen ----------------------------------------------------------
    async def notify(self, channel: str, payload: str) -> None:
        await self._write_call(self.write_note, channel, payload)

    async def wake(self, channel: str) -> None:
        try:
            await self.notify(channel, "")
        except EngineError as e:  # best-effort: the consumers' re-poll covers it
            log.warning("alkstore: wake on %r not sent: %s", channel, e)

    def _max_note(self) -> int:
        return int(self._read(lambda conn: conn.execute(Q["max_note"]).fetchone()[0]))

    async def subscribe(self, channels: Sequence[str], sink: NoteSink) -> None:
        # The newest note id is read before subscribe returns: every note committed
        # after this call is delivered, and none committed before it, even when the
        # listener (already running for other channels) has not read that far yet.
        cursor = await self._call(self._max_note)
        if self._listener is None:
            assert self._loop is not None
            listener = Listener(
                self._new_connection,
                Q,
                self._loop,
                sink,
                cursor,
                self.wake_poll_s,
                watch_path=self.path,
            )
            listener.add_channels(channels, cursor)
            listen_locally(self.path, listener)
            listener.start()
            self._listener = listener
        else:
            self._listener.add_channels(channels, cursor)

    async def unsubscribe(self, channels: Sequence[str]) -> None:
        listener = self._listener
        if listener is not None:
            listener.remove_channels(channels)

    # -- admin (alkstore/admin.py) --------------------------------------------------
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

    def _requeue_unit(
        self,
        conn: sqlite3.Connection,
        job_id: int,
        attempts: int,
        delay_s: float,
        expiry_cutoff_s: float,
    ) -> bool:
        now = self._clock()
        params = {
            "id": job_id,
            "attempts": attempts,
            "run_at": now + delay_s,
            "expiry_cutoff": now + expiry_cutoff_s,
        }
        row = conn.execute(Q["admin_requeue_copy"], params).fetchone()
        if row is None:
            return False
        conn.execute(Q["admin_requeue_delete"], params)
        if row[1] is not None:  # back under its fair queue's key cursor
            conn.execute(Q["fair_touch"], {"queue": row[0], "key": row[1]})
        self.write_note(conn, row[0], "")
        for queue in set(revive_children(conn, job_id)):  # the children its death took down
            self.write_note(conn, queue, "")
        return True

    async def requeue_dead(
        self, job_id: int, attempts: int, delay_s: float, expiry_cutoff_s: float
    ) -> bool:
        return await self._write_call(
            self._requeue_unit, job_id, attempts, delay_s, expiry_cutoff_s
        )

    async def stats(self) -> list[StatsRow]:
        def read(conn: sqlite3.Connection) -> list[StatsRow]:
            now = self._clock()
            rows = conn.execute(Q["admin_stats"], {"now": now}).fetchall()
            return [
                (q, p, d, r, x, None if oldest is None else max(now - oldest, 0.0), b)
                for q, p, d, r, x, oldest, b in rows
            ]

        return await self._call(self._read, read)

    # -- live workers and outcome history -------------------------------------------
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
            "queues": json.dumps(list(queues)),
            "concurrency": concurrency,
            "running": running,
            "now": self._clock(),
        }
        await self._rowcount("worker_upsert", params)

    async def delete_worker(self, worker_id: str) -> bool:
        params = {"id": worker_id}
        return bool(await self._rowcount("worker_delete", params))

    async def purge_workers(self, older_than_s: float) -> int:
        params = {"cutoff": self._clock() - older_than_s}
        return await self._rowcount("worker_purge", params)

    async def list_workers(self) -> list[Row]:
        rows = await self._fetchall("worker_list", {"now": self._clock()})
        return [(*row[:3], json.loads(row[3]), *row[4:8], max(row[8], 0.0)) for row in rows]

    async def list_workers_page(
        self, after: str | None, before: str | None, limit: int
    ) -> list[Row]:
        name = "worker_page_after" if before is None else "worker_page_before"
        params = {"after": after or "", "before": before, "limit": limit, "now": self._clock()}
        rows = await self._fetchall(name, params)
        return [(*row[:3], json.loads(row[3]), *row[4:8], max(row[8], 0.0)) for row in rows]

    def _outcomes_unit(
        self, conn: sqlite3.Connection, counts: Sequence[tuple[str, str, int]], keep_s: float
    ) -> None:
        now = self._clock()
        minute = int(now // 60 * 60)
        conn.executemany(
            Q["outcome_add"],
            [{"queue": q, "minute": minute, "outcome": o, "count": n} for q, o, n in counts],
        )
        conn.execute(Q["outcome_purge"], {"cutoff": now - keep_s})

    async def add_outcomes(self, counts: Sequence[tuple[str, str, int]], keep_s: float) -> None:
        await self._write_call(self._outcomes_unit, counts, keep_s)

    async def outcome_history(self, seconds: float) -> list[tuple[str, float, str, int]]:
        since = int((self._clock() - seconds) // 60 * 60)
        rows = await self._fetchall("outcome_history", {"since": since})
        return [(q, float(m), o, int(n)) for q, m, o, n in rows]

    async def outcome_series(
        self, seconds: float, bucket_s: int, queue: str | None
    ) -> list[tuple[str, float, str, int]]:
        since = int((self._clock() - seconds) // 60 * 60)
        params = {"since": since, "bucket": bucket_s, "queue": queue}
        rows = await self._fetchall("outcome_series", params)
        return [(q, float(m), o, int(n)) for q, m, o, n in rows]

    # -- transactions -------------------------------------------------------------
    async def begin(self) -> SqliteTransaction:
        return SqliteTransaction(self, await self.begin_transaction())
