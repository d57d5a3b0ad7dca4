"""The SQLite engine's storage operations: stdlib ``sqlite3``, one file per store.

Each operation is one write unit (group-committed with the other waiting
ones) or one read on the store's own thread; the thread, the connection, the
group commit and the fair busy retries are ``connections.py``'s,
``store.transaction()`` is ``transaction.py``'s. Wakes are rows of the notes
table, written in the operation's own transaction (``listener.py`` reads
them); a committed note also pokes this process's listeners at once.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import weakref
from collections.abc import Sequence
from typing import Any

from alkstore.core.dedupe import Enqueued, keyed_enqueue, run_flow_sync
from alkstore.core.flow import (
    CANDIDATE_WINDOW,
    RECLAIMED_NOTE,
    Claimed,
    QueueSettings,
    admit,
    charge,
    pick_partitions,
)
from alkstore.core.job import Row
from alkstore.core.options import Stamps, describe
from alkstore.core.results import RESULTS_CHANNEL
from alkstore.core.tables import COPIED_TABLES
from alkstore.core.tables import table as copied_table
from alkstore.engine import NoteSink
from alkstore.engines.queries import load_queries
from alkstore.engines.sqlite.connections import SqliteConnection, in_transaction
from alkstore.engines.sqlite.listener import NoteListener
from alkstore.engines.sqlite.transaction import SqliteTransaction
from alkstore.errors import EngineError, InvalidArgumentError, StoreClosedError

__all__ = ["SqliteEngine"]

log = logging.getLogger("alkstore.sqlite")

_PACKAGE = "alkstore.engines.sqlite"
Q = load_queries(_PACKAGE)

_NOTES_KEPT = 20_000  # notes kept for listeners; older ones are trimmed
_TRIM_EVERY = 1024

# Listeners of this process per database file: a local commit pokes them at once.
_local_listeners: dict[str, weakref.WeakSet[NoteListener]] = {}
_local_lock = threading.Lock()


class SqliteEngine(SqliteConnection):
    """Storage on one SQLite file, shared safely by many processes on one machine."""

    name = "sqlite"
    listens = True  # the notes table is always there

    def __init__(self, path: str, **settings: Any) -> None:
        super().__init__(path, **settings)
        self._notes_written = 0
        # queues whose claims came back limited: a slot freed there wakes their consumers
        self._limited: set[str] = set()

    def _poke_local(self) -> None:
        with _local_lock:
            listeners = list(_local_listeners.get(self.path, ()))
        for listener in listeners:
            listener.poke()

    # -- enqueue ----------------------------------------------------------------
    @staticmethod
    def _stamped(stamps: Stamps, now: float) -> tuple[Any, ...]:
        """The stamp columns of insert_job after the payload, resolved against ``now``."""
        run_at = stamps.run_at.timestamp() if stamps.run_at is not None else now + stamps.delay_s
        expires = None if stamps.expires_in_s is None else now + stamps.expires_in_s
        return (
            stamps.priority,
            run_at,
            now,
            stamps.max_attempts,
            stamps.visibility_timeout_s,
            stamps.retry_base_s,
            expires,
            stamps.partition_key,
        )

    def _insert(
        self, conn: sqlite3.Connection, queue: str, payloads: Sequence[bytes], stamps: Stamps
    ) -> list[int]:
        rest = self._stamped(stamps, self._clock())
        if len(payloads) == 1:
            ids = [conn.execute(Q["insert_job"], (queue, payloads[0], *rest)).lastrowid or 0]
        else:
            conn.executemany(Q["insert_job"], [(queue, p, *rest) for p in payloads])
            # One writer holds the lock and ids come from AUTOINCREMENT with no
            # triggers, so the rows of this executemany got consecutive ids.
            last = conn.execute(Q["last_id"]).fetchone()[0]
            ids = list(range(last - len(payloads) + 1, last + 1))
        self._insert_note(conn, queue, "")
        return ids

    def _insert_keyed(
        self,
        conn: sqlite3.Connection,
        queue: str,
        payloads: Sequence[bytes],
        keys: Sequence[str | None],
        window_s: float | None,
        stamps: Stamps,
    ) -> list[Enqueued]:
        now = self._clock()
        rest = self._stamped(stamps, now)

        def step(name: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
            rows: list[tuple[Any, ...]] = []
            keys = params.get("keys", ())
            if name == "insert":
                for payload, key in zip(params["payloads"], keys, strict=True):
                    if key is None:
                        cur = conn.execute(Q["insert_job"], (queue, payload, *rest))
                        rows.append((cur.lastrowid, None))
                    else:
                        row = conn.execute(Q["insert_keyed_job"], (queue, payload, *rest, key))
                        rows.extend(row.fetchall())
            elif name == "take_windows":
                until = now + params["window_s"]
                for key in keys:
                    rows.extend(conn.execute(Q["take_window"], (queue, key, until, now)))
            elif name in ("window_jobs", "live_keys"):
                query = Q["window_job" if name == "window_jobs" else "live_key"]
                for key in keys:
                    rows.extend(conn.execute(query, (queue, key)))
            elif name == "set_window_jobs":
                conn.executemany(
                    Q["set_window_job"],
                    [(job_id, queue, key) for key, job_id in zip(keys, params["ids"], strict=True)],
                )
            else:
                raise AssertionError(f"unknown dedupe step {name!r}")
            return rows

        result = run_flow_sync(keyed_enqueue(payloads, keys, window_s), step)
        self._insert_note(conn, queue, "")
        return result

    async def enqueue_keyed(
        self,
        queue: str,
        payloads: Sequence[bytes],
        keys: Sequence[str | None],
        window_s: float | None,
        stamps: Stamps,
    ) -> list[Enqueued]:
        return await self._write_call(self._insert_keyed, queue, payloads, keys, window_s, stamps)

    def _insert_note(self, conn: sqlite3.Connection, channel: str, payload: str) -> None:
        try:
            note_id = conn.execute(Q["insert_note"], (channel, payload)).lastrowid or 0
        except sqlite3.Error as e:  # a wake is best-effort; the row is the truth
            if not conn.in_transaction:  # SQLite rolled the transaction back: not best-effort
                raise
            log.warning("alkstore: wake on %r not recorded: %s", channel, e)
            return
        self._on_commit(self._poke_local)
        self._notes_written += 1
        if self._notes_written % _TRIM_EVERY == 0:
            conn.execute(Q["trim_notes"], {"below": note_id - _NOTES_KEPT})

    async def enqueue(self, queue: str, payloads: Sequence[bytes], stamps: Stamps) -> list[int]:
        return await self._write_call(self._insert, queue, payloads, stamps)

    # -- claim and handle operations ---------------------------------------------
    @staticmethod
    def _claim_rows(
        conn: sqlite3.Connection, queue: str, worker: str, n: int, now: float
    ) -> list[Row]:
        rows = conn.execute(
            Q["claim"], {"queue": queue, "now": now, "worker": worker, "n": n}
        ).fetchall()
        return rows

    def _claim_unit(
        self, conn: sqlite3.Connection, queue: str, worker: str, n: int, exhausted_error: str
    ) -> Claimed:
        """The claim; the holders of lapsed claims it took over are told."""
        now = self._clock()
        params = {"queue": queue, "now": now, "exhausted_error": exhausted_error}
        if conn.execute(Q["sweep_exhausted_copy"], params).rowcount:
            conn.execute(Q["sweep_exhausted_delete"], params)
        lapsed = {row[0] for row in conn.execute(Q["lapsed_ids"], params)}
        claimed = self._claim_gated(conn, queue, worker, n, now)
        for row in claimed.rows:
            if row[0] in lapsed:
                self._insert_note(conn, queue, f"{RECLAIMED_NOTE}{row[0]}:{row[7]}")
        # Set here, not after the commit, so a later unit of the same group sees
        # it; a hint only (whether a freed slot writes a wake note).
        if claimed.limited:
            self._limited.add(queue)
        else:
            self._limited.discard(queue)
        return claimed

    @classmethod
    def _claim_gated(
        cls, conn: sqlite3.Connection, queue: str, worker: str, n: int, now: float
    ) -> Claimed:
        params = {"queue": queue, "now": now}
        gate = conn.execute(Q["queue_settings"], params).fetchone()
        if gate is None:
            return Claimed(cls._claim_rows(conn, queue, worker, n, now))
        # The single writer holds the database: the count and the claim are one unit.
        settings = QueueSettings.from_row(gate)
        if settings.paused:
            return Claimed([], settings.limited)
        if not settings.limited:
            return Claimed(cls._claim_rows(conn, queue, worker, n, now))
        running = 0
        if settings.concurrency is not None:
            running = conn.execute(Q["count_running"], params).fetchone()[0]
        admission = admit(settings, now, running, n)
        rows: list[Row] = []
        if admission.n and settings.partition_concurrency is not None:
            window = {**params, "window": admission.n + CANDIDATE_WINDOW}
            candidates = conn.execute(Q["claim_candidates"], window).fetchall()
            busy = dict(conn.execute(Q["running_partitions"], params).fetchall())
            ids = pick_partitions(candidates, busy, settings.partition_concurrency, admission.n)
            if ids:
                claim = {**params, "worker": worker, "ids": json.dumps(ids)}
                rows = conn.execute(Q["claim_ids"], claim).fetchall()
        elif admission.n:
            rows = cls._claim_rows(conn, queue, worker, admission.n, now)
        tat, wait = charge(settings, now, len(rows))
        if rows and tat != settings.tat:
            conn.execute(Q["set_tat"], {"queue": queue, "tat": tat})
        return Claimed(rows, True, wait if admission.rate_capped else None)

    async def claim(self, queue: str, worker_id: str, n: int, exhausted_error: str) -> Claimed:
        return await self._write_call(self._claim_unit, queue, worker_id, n, exhausted_error)

    def _fenced(self, queue: str, job_id: int, attempts: int) -> dict[str, Any]:
        return {"id": job_id, "queue": queue, "attempts": attempts, "now": self._clock()}

    @staticmethod
    def _exec_count(conn: sqlite3.Connection, name: str, params: dict[str, Any]) -> int:
        return conn.execute(Q[name], params).rowcount

    def _slots_freed(self, conn: sqlite3.Connection, queues: set[str]) -> None:
        """In the outcome's own transaction: wake the limited ones of ``queues``."""
        for queue in queues & self._limited:
            self._insert_note(conn, queue, "")

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
        await self._write_call(self._exec_count, "drop_ack_receipts", params)

    def _freeing_unit(self, conn: sqlite3.Connection, name: str, params: dict[str, Any]) -> bool:
        """A fenced outcome that frees the job's slot (retry, release)."""
        done = bool(conn.execute(Q[name], params).rowcount)
        if done:
            self._slots_freed(conn, {params["queue"]})
        return done

    def _ack_result_unit(self, conn: sqlite3.Connection, params: dict[str, Any]) -> bool:
        if not conn.execute(Q["ack"], params).rowcount:
            return False
        conn.execute(Q["insert_result"], params)
        self._insert_note(conn, RESULTS_CHANNEL, str(params["id"]))
        return True

    async def ack_result(
        self, queue: str, job_id: int, attempts: int, value: str, keep_s: float
    ) -> bool:
        params = self._fenced(queue, job_id, attempts)
        params.update(value=value, keep=keep_s)
        return await self._write_call(self._ack_result_unit, params)

    async def outcomes(self, queue: str | None, ids: Sequence[int]) -> list[Row]:
        params = {"queue": queue, "ids": json.dumps(list(ids))}
        return await self._call(self._read, self._fetch_all, "outcomes", params)

    async def list_outcomes(self, queue: str, limit: int) -> list[Row]:
        params = {"queue": queue, "limit": limit}
        return await self._call(self._read, self._fetch_all, "admin_outcomes", params)

    async def retry(
        self, queue: str, job_id: int, attempts: int, delay_s: float, error: str | None
    ) -> bool:
        params = self._fenced(queue, job_id, attempts)
        params["run_at"] = params["now"] + delay_s
        params["error"] = error
        return await self._write_call(self._freeing_unit, "retry", params)

    async def release(self, queue: str, job_id: int, attempts: int, delay_s: float | None) -> bool:
        params = self._fenced(queue, job_id, attempts)
        params["run_at"] = None if delay_s is None else params["now"] + delay_s
        return await self._write_call(self._freeing_unit, "release", params)

    def _dead_letter_unit(self, conn: sqlite3.Connection, params: dict[str, Any]) -> bool:
        if not conn.execute(Q["dead_letter_copy"], params).rowcount:
            return False
        conn.execute(Q["delete_by_id"], {"id": params["id"]})
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
        return bool(await self._write_call(self._exec_count, "heartbeat", params))

    async def ack_batch(self, queue: str, ids: Sequence[int]) -> int:
        params = {"queue": queue, "now": self._clock(), "ids": json.dumps(ids)}
        return await self._write_call(self._exec_count, "ack_batch", params)

    async def cancel(self, queue: str, job_id: int) -> bool:
        params = {"id": job_id, "queue": queue}
        return bool(await self._write_call(self._exec_count, "cancel", params))

    @staticmethod
    def _fetch_one(conn: sqlite3.Connection, name: str, params: dict[str, Any]) -> Row | None:
        row: Row | None = conn.execute(Q[name], params).fetchone()
        return row

    async def get_job(self, queue: str, job_id: int) -> Row | None:
        params = {"id": job_id, "queue": queue}
        return await self._call(self._read, self._fetch_one, "get_job", params)

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
        results = conn.execute(Q["purge_results"], params).rowcount
        windows = conn.execute(Q["purge_windows"], params).rowcount
        return expired, purged, results, windows

    async def sweep(
        self, queue: str, retention_s: float | None, expired_error: str
    ) -> tuple[int, int, int, int]:
        return await self._write_call(self._sweep_unit, queue, retention_s, expired_error)

    def _next_due(self, conn: sqlite3.Connection, queue: str) -> float | None:
        now = self._clock()
        due = conn.execute(Q["next_due"], {"queue": queue, "now": now}).fetchone()[0]
        return None if due is None else max(due - now, 0.0)

    async def next_wake_in(self, queue: str) -> float | None:
        return await self._call(self._read, self._next_due, queue)

    # -- schedules ------------------------------------------------------------------
    async def schedule_marks(self, names: Sequence[str]) -> list[tuple[str, float, int | None]]:
        params = {"names": json.dumps(list(names))}
        return await self._call(self._read, self._fetch_all, "schedule_marks", params)

    async def mark_schedule(self, name: str, tick: float, job_id: int | None) -> None:
        params = {"name": name, "tick": tick, "job": job_id, "now": self._clock()}
        await self._write_call(self._exec_count, "mark_schedule", params)

    # -- notify / listen ----------------------------------------------------------
    async def notify(self, channel: str, payload: str) -> None:
        await self._write_call(self._insert_note, channel, payload)

    async def wake(self, channel: str) -> None:
        try:
            await self.notify(channel, "")
        except EngineError as e:  # best-effort: the consumers' re-poll covers it
            log.warning("alkstore: wake on %r not sent: %s", channel, e)

    # -- queue settings: pause and limits --------------------------------------------
    async def queue_settings(self, queue: str | None) -> list[Row]:
        if queue is None:
            return await self._call(self._read, self._fetch_all, "all_queue_settings", {})
        return await self._call(self._read, self._fetch_all, "queue_settings", {"queue": queue})

    def _set_paused_unit(self, conn: sqlite3.Connection, queue: str, paused: bool) -> None:
        conn.execute(Q["set_paused"], {"queue": queue, "paused": int(paused)})
        if not paused:
            self._insert_note(conn, queue, "")

    async def set_paused(self, queue: str, paused: bool) -> None:
        await self._write_call(self._set_paused_unit, queue, paused)

    def _set_limits_unit(self, conn: sqlite3.Connection, params: dict[str, Any]) -> None:
        conn.execute(Q["set_limits"], params)
        self._insert_note(conn, params["queue"], "")

    async def set_limits(
        self,
        queue: str,
        concurrency: int | None,
        partition_concurrency: int | None,
        rate: tuple[int, float] | None,
        burst: int | None,
    ) -> None:
        params = {
            "queue": queue,
            "concurrency": concurrency,
            "partition_concurrency": partition_concurrency,
            "rate_count": None if rate is None else rate[0],
            "rate_period_s": None if rate is None else rate[1],
            "burst": burst,
        }
        await self._write_call(self._set_limits_unit, params)

    def _max_note(self) -> int:
        return int(self._read(lambda conn: conn.execute(Q["max_note"]).fetchone()[0]))

    async def subscribe(self, channels: Sequence[str], sink: NoteSink) -> None:
        # The newest note id is read before subscribe returns: every note committed
        # after this call is delivered, and none committed before it, even when the
        # listener (already running for other channels) has not read that far yet.
        cursor = await self._call(self._max_note)
        if self._listener is None:
            assert self._loop is not None
            listener = NoteListener(
                self._new_connection,
                Q,
                self._loop,
                sink,
                cursor,
                self.wake_poll_s,
                watch_path=self.path,
            )
            listener.add_channels(channels, cursor)
            with _local_lock:
                _local_listeners.setdefault(self.path, weakref.WeakSet()).add(listener)
            listener.start()
            self._listener = listener
        else:
            self._listener.add_channels(channels, cursor)

    async def unsubscribe(self, channels: Sequence[str]) -> None:
        listener = self._listener
        if listener is not None:
            listener.remove_channels(channels)

    # -- admin (alkstore/admin.py) --------------------------------------------------
    async def list_jobs(self, queue: str, state: str | None, limit: int) -> list[Row]:
        params = {"queue": queue, "state": state, "limit": limit}
        return await self._call(self._read, self._fetch_all, "admin_list_jobs", params)

    @staticmethod
    def _fetch_all(conn: sqlite3.Connection, name: str, params: dict[str, Any]) -> list[Row]:
        return conn.execute(Q[name], params).fetchall()

    async def find_job(self, job_id: int) -> Row | None:
        return await self._call(self._read, self._fetch_one, "admin_find_job", {"id": job_id})

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
        self._insert_note(conn, row[0], "")
        return True

    async def requeue_dead(
        self, job_id: int, attempts: int, delay_s: float, expiry_cutoff_s: float
    ) -> bool:
        return await self._write_call(
            self._requeue_unit, job_id, attempts, delay_s, expiry_cutoff_s
        )

    async def stats(self) -> list[tuple[str, int, int, int, int, float | None]]:
        def read(conn: sqlite3.Connection) -> list[tuple[str, int, int, int, int, float | None]]:
            now = self._clock()
            rows = conn.execute(Q["admin_stats"], {"now": now}).fetchall()
            return [
                (q, p, d, r, x, None if oldest is None else max(now - oldest, 0.0))
                for q, p, d, r, x, oldest in rows
            ]

        return await self._call(self._read, read)

    # -- store copy (alkstore/copy.py) ---------------------------------------------
    async def copy_counts(self) -> dict[str, int]:
        row = await self._call(self._read, lambda c: c.execute(Q["copy_counts"]).fetchone())
        return {spec.name: n for spec, n in zip(COPIED_TABLES, row, strict=True)}

    async def copy_read(self, table: str, after: Sequence[Any], limit: int) -> list[Row]:
        spec = copied_table(table)
        bools = [i for i, kind in enumerate(spec.kinds()) if kind == "bool"]

        def read(conn: sqlite3.Connection) -> list[Row]:
            rows = conn.execute(Q[f"copy_read_{table[4:]}"], (*after, limit)).fetchall()
            if not bools:
                return rows
            return [tuple(bool(v) if i in bools else v for i, v in enumerate(r)) for r in rows]

        return await self._call(self._read, read)

    async def copy_write(self, table: str, rows: Sequence[Row]) -> None:
        copied_table(table)  # only a copied table's own query
        query = Q[f"copy_write_{table[4:]}"]
        await self._write_call(lambda conn: conn.executemany(query, rows))

    async def last_job_id(self) -> int:
        row = await self._call(self._read, lambda c: c.execute(Q["copy_last_id"]).fetchone())
        return int(row[0])

    async def advance_job_ids(self, last: int) -> None:
        def advance(conn: sqlite3.Connection) -> None:
            conn.execute(Q["copy_advance_ids"], (last,))
            conn.execute(Q["copy_start_ids"], (last,))

        await self._write_call(advance)

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
        await self._write_call(self._exec_count, "worker_upsert", params)

    async def delete_worker(self, worker_id: str) -> bool:
        params = {"id": worker_id}
        return bool(await self._write_call(self._exec_count, "worker_delete", params))

    async def purge_workers(self, older_than_s: float) -> int:
        params = {"cutoff": self._clock() - older_than_s}
        return await self._write_call(self._exec_count, "worker_purge", params)

    async def list_workers(self) -> list[Row]:
        rows = await self._call(self._read, self._fetch_all, "worker_list", {"now": self._clock()})
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
        rows = await self._call(self._read, self._fetch_all, "outcome_history", {"since": since})
        return [(q, float(m), o, int(n)) for q, m, o, n in rows]

    # -- transactions -------------------------------------------------------------
    async def begin(self) -> SqliteTransaction:
        if self._closed:
            raise StoreClosedError(f"store on {describe(self.path)} is closed")
        if in_transaction.get() is self:
            raise InvalidArgumentError("this store's transaction is already open in this task")
        lock = self._lock
        assert lock is not None and self._loop is not None
        await lock.acquire()
        try:
            await self._loop.run_in_executor(
                self._executor,
                self._guarded,
                self._with_busy_retry,
                self._begin_sync,
            )
        except BaseException:
            lock.release()
            raise
        return SqliteTransaction(self, in_transaction.set(self))
