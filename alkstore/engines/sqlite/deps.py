"""Dependencies on SQLite: ``core.deps``'s flows run as statements on one connection.

The parent's end is the trigger ``alk_jobs_gone`` (migration 0008); what is
here runs inside a write unit (or the open ``store.transaction()``): the
graph enqueue, the revival of the children a requeued parent took down, and
the cancel's mark that tells a cancel from an ack.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from alkstore.core.deps import GraphNode, enqueue_graph, revive
from alkstore.core.followups import combined
from alkstore.core.job import Row
from alkstore.core.steps import Rows, run_steps_sync
from alkstore.engines.sqlite.connections import SqliteConnections
from alkstore.engines.sqlite.inserts import insert_jobs
from alkstore.engines.sqlite.migrator import QUERIES as Q

__all__ = ["SqliteDependencies", "revive_children", "run_graph"]

log = logging.getLogger("alkstore.sqlite")


def run_graph(
    conn: sqlite3.Connection,
    nodes: Sequence[GraphNode],
    now: float,
    note: Callable[[sqlite3.Connection, str, str], None],
) -> list[int]:
    """Insert the graph in the caller's transaction, in a savepoint of its own (a
    DependencyError leaves nothing); a wake note per queue."""

    def step(name: str, params: dict[str, Any]) -> Rows:
        if name == "insert":
            return [
                (
                    insert_jobs(conn, params["queue"], (params["payload"],), params["stamps"], now)[
                        0
                    ],
                )
            ]
        if name in ("mark_parents", "kept_results", "dead_rows"):
            cur = conn.execute(Q["deps_" + name], {"ids": json.dumps(params["ids"])})
            return cur.fetchall()
        if name == "block":
            conn.execute(Q["deps_block"], params)
        elif name == "edges":
            conn.executemany(
                Q["deps_edge"],
                [
                    (p, params["child"], params["policy"], int(p == params["killed"]))
                    for p in params["parents"]
                ],
            )
        elif name == "kill":
            conn.execute(Q["deps_kill_copy"], {**params, "now": now})
            conn.execute(Q["deps_kill_delete"], {"id": params["id"]})
        else:
            raise AssertionError(f"unknown graph step {name!r}")
        return []

    conn.execute("SAVEPOINT alkstore_graph")
    try:
        ids = run_steps_sync(enqueue_graph(nodes), step)
    except BaseException:
        conn.execute("ROLLBACK TO alkstore_graph")
        conn.execute("RELEASE alkstore_graph")
        raise
    conn.execute("RELEASE alkstore_graph")
    for queue in sorted({node.queue for node in nodes}):
        note(conn, queue, "")
    return ids


def revive_children(conn: sqlite3.Connection, root: int) -> list[str]:
    """After ``root`` was requeued (same transaction): the flow of ``core.deps.revive``;
    the queues of the revived children."""
    if not conn.execute(Q["deps_has_edges"], {"id": root}).fetchone()[0]:
        return []
    queues: list[str] = []

    def step(name: str, params: dict[str, Any]) -> Rows:
        if name == "revive":
            row = conn.execute(Q["deps_revive_copy"], params).fetchone()
            conn.execute(Q["deps_revive_delete"], params)
            conn.execute(Q["deps_revive_edges"], params)
            if row is not None and params["waiting"] == 0:
                queues.append(row[0])
            return []
        cur = conn.execute(Q["deps_" + name], params)
        return cur.fetchall()

    run_steps_sync(revive(root), step)
    return queues


class SqliteDependencies(SqliteConnections):
    """The engine's dependency operations (``alkstore.engine.Engine``)."""

    def _before_commit(self, conn: sqlite3.Connection) -> None:
        """Wake the queues where a parent's end made a child pending (the trigger
        lists them); best effort, like every wake."""
        try:
            queues = {row[0] for row in conn.execute(Q["deps_woken"])}
        except sqlite3.Error as e:
            if not conn.in_transaction:
                raise
            log.warning("alkstore: dependents' wake not read: %s", e)
            return
        for queue in sorted(queues):
            self.write_note(conn, queue, "")

    def _graph_unit(self, conn: sqlite3.Connection, nodes: Sequence[GraphNode]) -> list[int]:
        return run_graph(conn, nodes, self._clock(), self.write_note)

    async def enqueue_graph(self, nodes: Sequence[GraphNode]) -> list[int]:
        return await self._write_call(self._graph_unit, nodes)

    def _cancel_unit(self, conn: sqlite3.Connection, queue: str, job_id: int) -> bool:
        params = {"id": job_id, "queue": queue}
        conn.execute(Q["deps_mark_cancel"], params)  # the trigger tells a cancel by it
        return bool(conn.execute(Q["cancel"], params).rowcount)

    async def cancel(self, queue: str, job_id: int) -> bool:
        return await self._write_call(self._cancel_unit, queue, job_id)

    async def job_edges(self, job_id: int) -> list[Row]:
        return await self._fetchall("deps_edges_of", {"id": job_id})

    # the engine's own ack units (``engine.py``), run here with the follow-ups
    def _ack_unit(
        self, conn: sqlite3.Connection, items: Sequence[tuple[str, int, int]]
    ) -> set[tuple[int, int]]:
        raise NotImplementedError

    def _ack_result_unit(self, conn: sqlite3.Connection, params: dict[str, Any]) -> bool:
        raise NotImplementedError

    def _ack_staged_unit(
        self,
        conn: sqlite3.Connection,
        items: Sequence[tuple[str, int, int]],
        staged: Mapping[int, Sequence[GraphNode]],
        receipt: tuple[str, str] | None,
        result: tuple[str, float] | None,
    ) -> set[tuple[int, int]]:
        if result is not None:
            queue, job_id, attempts = items[0]
            params = {"id": job_id, "queue": queue, "attempts": attempts, "now": self._clock()}
            params.update(value=result[0], keep=result[1])
            acked = {(job_id, attempts)} if self._ack_result_unit(conn, params) else set()
        else:
            acked = self._ack_unit(conn, items)  # deleted by this call: only their follow-ups
        nodes = combined(staged, (job_id for job_id, _ in acked))
        if nodes:
            run_graph(conn, nodes, self._clock(), self.write_note)
        if receipt is None:
            return acked
        # the receipt, as ``_ack_receipted_unit`` writes it (docs/contract.md, "Ack receipts")
        owner, token = receipt
        deleted = {job_id for job_id, _ in acked}
        refused = {job_id for _, job_id, _ in items if job_id not in deleted}
        before = conn.execute(Q["ack_receipt"], {"owner": owner}).fetchone()
        if before is not None and before[0] == token:  # a retry: an earlier attempt committed
            refused &= set(json.loads(before[1]))
        params = {"owner": owner, "token": token, "refused": json.dumps(sorted(refused))}
        conn.execute(Q["put_ack_receipt"], {**params, "now": self._clock()})
        return {(job_id, attempts) for _, job_id, attempts in items if job_id not in refused}

    async def ack_staged(
        self,
        items: Sequence[tuple[str, int, int]],
        staged: Mapping[int, Sequence[GraphNode]],
        receipt: tuple[str, str] | None = None,
        result: tuple[str, float] | None = None,
    ) -> set[tuple[int, int]]:
        return await self._write_call(self._ack_staged_unit, items, staged, receipt, result)
