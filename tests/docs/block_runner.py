"""Run one docs block in a named context (``<!-- docs-test: context NAME -->``).

``python block_runner.py BLOCK.py CONTEXT PG_URL SCHEMA``: top-level ``await``
is allowed (the docs write fragments as if inside ``async def``), the context's
prelude first makes what the text around the block has already made (a store,
a connection, the ``orders`` table it writes to), and everything the block
opened (stores, apps, connections) is closed at the end, so the process exits
cleanly or fails with the block's own traceback.
"""

from __future__ import annotations

import ast
import asyncio
import sys
from typing import Any

import psycopg

import alkstore

PRELUDES = {
    # a PostgreSQL block on its own (its URLs point at the test database)
    "pg": "",
    # a fragment inside an open PostgreSQL store, with the caller's own connection
    "pg-store": """
store = await alkstore.connect(PG_URL, schema=SCHEMA)
conn = await psycopg.AsyncConnection.connect(PG_URL)
await conn.execute("CREATE TABLE IF NOT EXISTS orders (id int PRIMARY KEY)")
await conn.commit()
""",
    # an app on SQLite whose transaction also writes the application's orders
    "sqlite-orders": """
import sqlite3
db = sqlite3.connect("jobs.db")
db.execute("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, state TEXT)")
db.execute("INSERT INTO orders (id, state) VALUES (42, 'new')")
db.commit()
db.close()
order_id = 42
""",
    # a fragment inside an open SQLite store
    "sqlite-store": 'store = await alkstore.connect("sqlite:///jobs.db")',
}


async def _close(namespace: dict[str, Any]) -> None:
    for value in list(namespace.values()):
        if isinstance(value, alkstore.App):
            await value.close()
            value.close_sync()
        elif isinstance(value, alkstore.Store | psycopg.AsyncConnection):
            await value.close()


async def main(path: str, context: str, pg_url: str, schema: str) -> None:
    namespace: dict[str, Any] = {
        "__name__": "__main__",
        "alkstore": alkstore,
        "psycopg": psycopg,
        "PG_URL": pg_url,
        "SCHEMA": schema,
    }
    with open(path, encoding="utf-8") as f:
        block = f.read()
    try:
        for where, source in ((f"<prelude {context}>", PRELUDES[context]), (path, block)):
            code = compile(source, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            result = eval(code, namespace)  # the repo's own docs
            if asyncio.iscoroutine(result):
                await result
    finally:
        await _close(namespace)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
