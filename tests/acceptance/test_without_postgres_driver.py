"""``pip install alkstore`` (no psycopg) is enough for SQLite; a PostgreSQL URL names the extra."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# Run in a fresh interpreter where psycopg and psycopg_pool cannot be imported.
_NO_DRIVER = """
import sys
sys.modules["psycopg"] = None
sys.modules["psycopg_pool"] = None
import alkstore, alkstore.sync, alkstore.cli, alkstore.worker
from alkstore.errors import EngineError
with alkstore.sync.connect(sys.argv[1]) as store:
    q = store.queue("q")
    job = q.enqueue({"n": 1})
    handle = q.claim_one("w")
    assert handle is not None and handle.job.id == job and handle.ack()
try:
    alkstore.sync.connect("postgresql://nobody@127.0.0.1:1/none")
except EngineError as e:
    print("refused:", e)
"""


def test_sqlite_works_without_psycopg_and_postgres_names_the_extra(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/jobs.db"
    done = subprocess.run(
        [sys.executable, "-c", _NO_DRIVER, url], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "refused:" in done.stdout and "alkstore[postgres]" in done.stdout, done.stdout
