"""The one engine-specific corner of the contract suite: raw SQL for test set-up.

The tests themselves stay engine-neutral; when they must reach under the API
(to count rows, or to move a row's ``run_at`` without sending a wake) they
call these helpers, which know each engine's tables and parameter style:

- SQLite: tables ``alk_jobs`` / ``alk_dead``, times REAL POSIX seconds, ``?`` params.
- PostgreSQL: the same tables in schema ``target.schema``, times timestamptz,
  ``%s`` params.
"""

from __future__ import annotations

import time
from typing import Protocol

import alkstore


class Target(Protocol):
    engine: str
    schema: str


def _tables(target: Target) -> tuple[str, str]:
    if target.engine == "sqlite":
        return "alk_jobs", "alk_dead"
    schema = '"' + target.schema.replace('"', '""') + '"'
    return f"{schema}.alk_jobs", f"{schema}.alk_dead"


def _param(target: Target) -> str:
    return "?" if target.engine == "sqlite" else "%s"


async def count_rows(store: alkstore.Store, target: Target) -> tuple[int, int]:
    """``(live, dead)`` row counts over every queue of the store."""
    live, dead = _tables(target)
    async with store.transaction() as tx:
        rows = await tx.execute(
            f"SELECT (SELECT count(*) FROM {live}), (SELECT count(*) FROM {dead})"
        )
    return int(rows[0][0]), int(rows[0][1])


async def make_due_now(store: alkstore.Store, target: Target, job_id: int) -> None:
    """Set a pending job's ``run_at`` to one second ago, with no wake."""
    live, _ = _tables(target)
    p = _param(target)
    async with store.transaction() as tx:
        if target.engine == "sqlite":
            await tx.execute(
                f"UPDATE {live} SET run_at = {p} WHERE id = {p}", (time.time() - 1, job_id)
            )
        else:
            await tx.execute(
                f"UPDATE {live} SET run_at = now() - interval '1 second' WHERE id = {p}", (job_id,)
            )
