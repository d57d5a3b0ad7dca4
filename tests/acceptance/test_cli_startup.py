"""``alkstore worker`` imports what running tasks needs and nothing else: the other
commands (rich's tables, the admin commands), the dashboard, metrics, OpenTelemetry
and ``importlib.metadata`` stay unimported unless asked for (#28: the CLI's cost is
its start-up). A real worker process runs a job that records ``sys.modules``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

_APP = """
import json, os, signal, sys
import alkstore

app = alkstore.App(os.environ["T_URL"])


@app.task(queue="q", name="look")
async def look() -> None:
    with open(os.environ["T_OUT"], "w") as f:
        json.dump(sorted(sys.modules), f)
    os.kill(os.getpid(), signal.SIGTERM)
"""

_FILL = """
import asyncio, sys
sys.path.insert(0, sys.argv[1])
import lookapp

async def main():
    async with lookapp.app:
        await lookapp.look.defer()

asyncio.run(main())
"""

# never needed to run a plain app's tasks from the command line
_UNWANTED = (
    "rich",
    "starlette",
    "uvicorn",
    "prometheus_client",
    "opentelemetry",
    "django",
    "hypothesis",
    "psycopg",  # a SQLite store
    "importlib.metadata",
    "importlib.resources",
    "argparse",
    "ctypes.util",  # find_library runs ldconfig: inotify comes from the process's own libc
    "hashlib",  # the store copy's digests only
    "alkstore.dashboard",
    "alkstore.admin",  # store.admin() and queue.info() import it (and alkstore.bulk)
    "alkstore.bulk",
    "alkstore.core.filters",  # the job search's language: engines import it for types only
    "alkstore.core.bulk",
    "alkstore.metrics",
    "alkstore.core.health",  # the doctor's
    "alkstore.workflows",  # stage() imports it, or the app's own use
    "alkstore.schedules",  # an app with periodic tasks imports it
    "cronsim",
    "uvloop",  # --loop uvloop only
    "alkstore.cli.render",
    "alkstore.cli.jobs",
    "alkstore.cli.queues",
    "alkstore.cli.find",
    "alkstore.cli.doctor",
    "alkstore.cli.tools",
    "alkstore.cli.store_commands",
)


def test_the_worker_command_imports_nothing_it_does_not_use(tmp_path: Path) -> None:
    (tmp_path / "lookapp.py").write_text(_APP)
    out = tmp_path / "modules.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ALKSTORE_", "OTEL_"))}
    env.update(T_URL=f"sqlite:///{tmp_path}/jobs.db", T_OUT=str(out), PYTHONPATH=str(tmp_path))
    subprocess.run([sys.executable, "-c", _FILL, str(tmp_path)], env=env, check=True, timeout=60)
    done = subprocess.run(
        [sys.executable, "-m", "alkstore", "worker", "lookapp:app"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    modules = json.loads(out.read_text())
    assert "alkstore.worker.runtime" in modules and "alkstore.engines.sqlite.engine" in modules
    found = [
        m for m in modules if m.startswith(tuple(u + "." for u in _UNWANTED)) or m in _UNWANTED
    ]
    assert found == []
