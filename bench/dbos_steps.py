"""DBOS Transact's step checkpoint, for ``bench/steps.py --dbos PYTHON`` (run in an
interpreter that has ``dbos``; alkstore does not depend on it).

    PYTHON bench/dbos_steps.py sqlite|postgres PG_BASE_URL STEPS RUNS

A workflow of STEPS steps (each returns a small dict, as alkstore's bench does),
wall and this process's CPU time per step, median of RUNS runs, each on a fresh
system database. Prints one JSON line.
"""

from __future__ import annotations

import importlib.metadata
import json
import statistics
import sys
import tempfile
import time
import uuid

from dbos import DBOS, DBOSConfig


@DBOS.step()
def small(i: int) -> dict[str, object]:
    return {"i": i, "ok": True}


@DBOS.workflow()
def chain(n: int) -> float:
    small(-1)  # warm
    return 0.0


@DBOS.workflow()
def timed(n: int) -> list[float]:
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(n):
        small(i)
    return [(time.perf_counter() - wall) / n, (time.process_time() - cpu) / n]


def one_run(engine: str, base: str, steps: int, home: str) -> list[float]:
    # SQLite: a fresh file per run; PostgreSQL: the bench run's database, a schema per run
    url = f"sqlite:///{home}/dbos_{uuid.uuid4().hex[:8]}.sqlite" if engine == "sqlite" else base
    config: DBOSConfig = {"name": "bench", "system_database_url": url}
    if engine == "postgres":
        config["dbos_system_schema"] = f"dbos_{uuid.uuid4().hex[:8]}"
    DBOS(config=config)
    DBOS.launch()
    try:
        chain(1)
        result: list[float] = timed(steps)
        return result
    finally:
        DBOS.destroy(destroy_registry=False)


def main() -> None:
    engine, base, steps, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    walls, cpus = [], []
    with tempfile.TemporaryDirectory(prefix="dbos-bench-") as home:
        for _ in range(runs):
            wall, cpu = one_run(engine, base, steps, home)
            walls.append(wall)
            cpus.append(cpu)
    print(
        json.dumps(
            {
                "version": importlib.metadata.version("dbos"),
                "wall_ms": statistics.median(walls) * 1e3,
                "cpu_ms": statistics.median(cpus) * 1e3,
            }
        )
    )


if __name__ == "__main__":
    main()
