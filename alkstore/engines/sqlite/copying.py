"""The SQLite engine's side of ``alkstore copy`` (alkstore/copy.py): counts, keyset
reads and writes of the copied tables, and the id counter moved past the source's."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from alkstore.core.job import Row
from alkstore.core.tables import COPIED_TABLES
from alkstore.core.tables import table as copied_table
from alkstore.engines.sqlite.connections import SqliteConnections
from alkstore.engines.sqlite.migrator import QUERIES as Q

__all__ = ["SqliteCopying"]


class SqliteCopying(SqliteConnections):
    """The copy operations of the engine seam, on the store's own thread."""

    async def copy_counts(self) -> dict[str, int]:
        row = await self._fetchone("copy_counts", {})
        assert row is not None
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
        row = await self._fetchone("copy_last_id", {})
        assert row is not None
        return int(row[0])

    async def advance_job_ids(self, last: int) -> None:
        def advance(conn: sqlite3.Connection) -> None:
            conn.execute(Q["copy_advance_ids"], (last,))
            conn.execute(Q["copy_start_ids"], (last,))

        await self._write_call(advance)
