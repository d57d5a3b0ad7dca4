"""PostgreSQL only: the hot statements' plans when the job table's statistics say it
is empty. A queue is usually near-empty when autoanalyze looks at it; filled since,
its table looks like one row to the planner, which then walked the whole table once
per claimed row (a claim of 500 took 1.2 s at 20,000 queued). Each statement that
updates or deletes rows picked by a CTE names them by id (``= ANY``), so every scan
of ``alk_jobs`` stays within the rows it acts on, whatever the statistics say."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

import alkstore
from alkstore.engines.postgres import PostgresEngine

QUEUED = 3000
CLAIM = 200


@pytest.fixture
async def stale(pg_url: str) -> AsyncIterator[tuple[alkstore.Store, PostgresEngine, str]]:
    """A store whose ``alk_jobs`` was analyzed empty, then filled with ``QUEUED`` jobs."""
    schema = f"alk_{uuid.uuid4().hex[:12]}"
    store = await alkstore.connect(pg_url, schema=schema)
    try:
        q = store.queue("q")
        await q.enqueue_many([b"x"] * 10)
        await q.ack_batch([h.job.id for h in await q.claim_batch("w", 10)])
        engine = store._engine
        assert isinstance(engine, PostgresEngine)
        with psycopg.connect(pg_url, autocommit=True) as admin:
            table = sql.Identifier(schema, "alk_jobs")
            admin.execute(sql.SQL("ANALYZE {}").format(table))
            row = admin.execute(
                "SELECT reltuples FROM pg_class WHERE oid = %s::regclass", [f"{schema}.alk_jobs"]
            ).fetchone()
            assert row is not None and row[0] == 0  # the planner's view: an empty table
        for _ in range(QUEUED // 1000):
            await q.enqueue_many([b"x"] * 1000)
        yield store, engine, pg_url
    finally:
        await store.close()
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
            )


def _nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


def _explain(engine: PostgresEngine, url: str, name: str, params: dict[str, Any]) -> list[Any]:
    """Every node of ``name``'s plan, run and rolled back (a custom plan, statistics as
    they are)."""
    with psycopg.connect(url) as conn:  # a transaction: rolled back at the end
        cur = conn.execute(b"EXPLAIN (ANALYZE, FORMAT JSON) " + engine.q[name], params)
        row = cur.fetchone()
        conn.rollback()
    assert row is not None
    plan = row[0] if isinstance(row[0], list) else json.loads(row[0])
    return list(_nodes(plan[0]["Plan"]))


def _read(node: dict[str, Any]) -> int:
    """Rows a node produced or threw away, over all its loops."""
    loops = int(node.get("Actual Loops", 1))
    removed = sum(int(v) for k, v in node.items() if k.startswith("Rows Removed by"))
    return (int(node["Actual Rows"]) + removed) * max(loops, 1)


def _assert_bounded(nodes: list[Any], bound: int, what: str) -> None:
    scans = [n for n in nodes if n.get("Relation Name") == "alk_jobs"]
    assert scans, what
    for node in nodes:
        assert _read(node) <= bound, (what, node.get("Node Type"), _read(node), bound)


async def test_claims_acks_and_fenced_writes_stay_on_their_rows_under_stale_statistics(
    stale: tuple[alkstore.Store, PostgresEngine, str],
) -> None:
    store, engine, url = stale
    claim = {"queue": "q", "worker": "w", "n": CLAIM, "exhausted_error": "x", "gated": True}
    for name in ("claim_lean", "claim"):
        nodes = _explain(engine, url, name, claim)
        _assert_bounded(nodes, 2 * CLAIM, name)  # a walk of the table would read 3,000
    handles = await store.queue("q").claim_batch("w", CLAIM)
    assert len(handles) == CLAIM
    ids = [h.job.id for h in handles]
    literal = "{" + ",".join(map(str, ids)) + "}"
    acks = {
        "ids": literal,
        "attempts": "{" + ",".join("1" for _ in ids) + "}",
        "queues": "{" + ",".join('"q"' for _ in ids) + "}",
        "owner": "w",
        "token": "t",
    }
    # the acks join the ids to the table: at most one pass over it (a primary-key
    # probe per id on a fresh store; naming the ids as an array there too made the
    # planner loop over the batch once per row, 0.5 ms a job)
    _assert_bounded(_explain(engine, url, "ack_receipted", acks), QUEUED + CLAIM, "ack_receipted")
    many = {"ids": ids, "attempts": [1] * len(ids), "queues": ["q"] * len(ids)}
    _assert_bounded(_explain(engine, url, "ack_many", many), QUEUED + CLAIM, "ack_many")
    _assert_bounded(
        _explain(engine, url, "release_many", {"queue": "q", "ids": ids, "attempts": [1] * CLAIM}),
        QUEUED + CLAIM,
        "release_many",
    )
    one = {"id": ids[0], "queue": "q", "attempts": 1}
    for name, extra in (
        ("heartbeat", {"extend": None}),
        ("release", {"delay": None}),
        ("retry", {"delay": 1.0, "error": "e"}),
    ):
        _assert_bounded(_explain(engine, url, name, {**one, **extra}), 2, name)


async def test_a_fair_claim_locks_its_chosen_rows_by_id_under_stale_statistics(
    pg_url: str,
) -> None:
    """The fair claim's chosen heads are locked by id: on a table analyzed empty, the
    join of the chosen ids to ``alk_jobs`` walked the whole table once per chosen
    row (a claim of 50 over 20,000 queued: a million rows thrown away, 150 ms)."""
    schema = f"alk_{uuid.uuid4().hex[:12]}"
    store = await alkstore.connect(pg_url, schema=schema)
    try:
        q = store.queue("f")
        await q.set_fair(True)
        await q.enqueue_many([b"x"] * 10, alkstore.EnqueueOpts(partition_key="k0"))
        await q.ack_batch([h.job.id for h in await q.claim_batch("w", 10)])
        with psycopg.connect(pg_url, autocommit=True) as admin:
            for table in ("alk_jobs", "alk_fair"):
                admin.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(schema, table)))
        for key in range(30):
            await q.enqueue_many(
                [b"x"] * (QUEUED // 30), alkstore.EnqueueOpts(partition_key=f"k{key}")
            )
        engine = store._engine
        assert isinstance(engine, PostgresEngine)
        params = engine.timed(
            {
                "queue": "f",
                "worker": "w",
                "n": 20,
                "window": 28,
                "spare": 2,
                "exhausted_error": "x",
                "waited": False,
            }
        )
        nodes = _explain(engine, pg_url, "fair_claim", params)
        joins = [n for n in nodes if "Rows Removed by Join Filter" in n]
        for node in joins:
            thrown = int(node["Rows Removed by Join Filter"]) * max(
                int(node.get("Actual Loops", 1)), 1
            )
            assert thrown <= QUEUED, (node["Node Type"], thrown)
    finally:
        await store.close()
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
            )
