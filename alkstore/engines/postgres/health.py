"""The PostgreSQL engine's side of ``alkstore doctor``: the facts of ``core.health``.

Reads only (statistics views and the jobs table's processing rows), all on one
pool connection. Without ``pg_read_all_stats`` ``pg_stat_activity`` hides
other roles' sessions' state, transaction age and query (their xmin and pid
show): that is reported as a blind spot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import psycopg

from alkstore.engines.postgres.connections import PostgresConnections
from alkstore.engines.postgres.migrator import SCHEMA_VERSION

if TYPE_CHECKING:
    from alkstore.core.health import HealthFacts

__all__ = ["READ_ALL_STATS_FIX", "PostgresHealth"]

READ_ALL_STATS_FIX = "GRANT pg_read_all_stats TO {role} (as a superuser or CREATEROLE role)"


class PostgresHealth(PostgresConnections):
    """The doctor's read of the engine seam (``Engine.health_facts``)."""

    async def health_facts(self) -> HealthFacts:
        return await _facts(self)


async def _facts(engine: PostgresConnections) -> HealthFacts:
    # the doctor's types, imported when it asks: a worker's start need not build them
    from alkstore.core.health import HealthFacts, OverdueClaims, TableHealth, XminHolder, first_line

    pool = engine.check_open()
    q = engine.q
    try:
        async with pool.connection() as conn:
            cur = await conn.execute(q["health_clock"])
            clock = await cur.fetchone()
            assert clock is not None
            cur = await conn.execute(q["schema_version"])
            version = await cur.fetchone()
            assert version is not None
            cur = await conn.execute(q["health_tables"], {"schema": engine.schema})
            tables = await cur.fetchall()
            cur = await conn.execute(q["health_xmin"])
            holders = await cur.fetchall()
            cur = await conn.execute(q["health_overdue"], engine.timed({}))
            overdue = await cur.fetchall()
            role = conn.info.parameter_status("session_authorization") or "this role"
    except psycopg.Error as e:
        raise await engine.failure(e, "health_facts") from e
    db_now, sees_all = clock
    blind: tuple[tuple[str, str], ...] = ()
    if not sees_all:
        what = "other roles' sessions in pg_stat_activity (their state, transaction age and query)"
        blind = ((what, READ_ALL_STATS_FIX.format(role=role)),)
    return HealthFacts(
        engine="postgres",
        schema_version=int(version[0]),
        expected_version=SCHEMA_VERSION,
        db_now=float(db_now),
        tables=tuple(
            TableHealth(name, int(live), int(dead), vac, auto)
            for name, live, dead, vac, auto in tables
        ),
        xmin_holders=tuple(
            XminHolder(
                kind,
                pid,
                name,
                state,
                int(age),
                None if s is None else max(s, 0.0),
                first_line(query),
            )
            for kind, pid, name, state, age, s, query in holders
        ),
        overdue=tuple(OverdueClaims(qn, int(n), max(float(s), 0.0)) for qn, n, s in overdue),
        blind=blind,
    )
