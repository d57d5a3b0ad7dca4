"""Shared plumbing for the benchmarks: store targets, timing, medians, tables.

Benchmarks are scripts that print numbers; tests never import them.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

PG_ADMIN_URL = os.environ.get("ALKSTORE_BENCH_PG_URL", "postgresql://root@127.0.0.1:5432/test")


@dataclass(frozen=True)
class Target:
    """Where one benchmark run's store lives (picklable, for worker processes)."""

    engine: str
    url: str
    schema: str = "alkstore"

    def kwargs(self) -> dict[str, Any]:
        return {"schema": self.schema} if self.engine == "postgres" else {}


@contextlib.contextmanager
def engine_home(engine: str) -> Iterator[str]:
    """A base location for an engine: a temp dir (SQLite) or a fresh database (PostgreSQL)."""
    if engine == "sqlite":
        with tempfile.TemporaryDirectory(prefix="alkstore-bench-") as d:
            yield d
        return
    import psycopg

    name = f"alkstore_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def fresh_target(engine: str, home: str, query: str = "") -> Target:
    """A new empty store location under ``home``."""
    tag = uuid.uuid4().hex[:10]
    if engine == "sqlite":
        return Target("sqlite", f"sqlite:///{home}/{tag}.db{query}")
    return Target("postgres", f"{home}{query}", f"b_{tag}")


def postgres_available() -> bool:
    try:
        import psycopg

        with psycopg.connect(PG_ADMIN_URL, connect_timeout=3):
            return True
    except Exception:
        return False


def median(values: list[float]) -> float:
    return statistics.median(values)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def render_table(title: str, columns: list[str], rows: list[list[str]]) -> str:
    """A Markdown table (pastes into README as it is)."""
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]
    line = "| " + " | ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)) + " |"
    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = [
        "| " + " | ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)) + " |" for r in rows
    ]
    return "\n".join([f"### {title}", "", line, rule, *body, ""])
