"""``alkstore worker --loop``: asyncio's own loop by default, uvloop when asked for
(and installed); a missing uvloop is a one-line error, not a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.acceptance.conftest import _env

_APP = """
import asyncio, os, signal
import alkstore

app = alkstore.App(os.environ["T_URL"])


@app.task(queue="q", name="which")
async def which() -> None:
    with open(os.environ["T_OUT"], "w") as f:
        f.write(type(asyncio.get_running_loop()).__module__)
    os.kill(os.getpid(), signal.SIGTERM)
"""

_FILL = """
import asyncio, loopapp

async def main():
    async with loopapp.app:
        await loopapp.which.defer()

asyncio.run(main())
"""


def _worker(tmp_path: Path, *args: str, **env: str) -> tuple[subprocess.CompletedProcess[str], str]:
    """Run one job through ``alkstore worker loopapp:app ARGS``: the process, and the
    module of the loop its handler ran on ("" if none ran)."""
    (tmp_path / "loopapp.py").write_text(_APP)
    out = tmp_path / "loop.txt"
    full = {k: v for k, v in _env().items() if not k.startswith("ALKSTORE_")}
    full.update(T_URL=f"sqlite:///{tmp_path}/jobs.db", T_OUT=str(out), **env)
    full["PYTHONPATH"] = os.pathsep.join([str(tmp_path), full["PYTHONPATH"]])
    subprocess.run([sys.executable, "-c", _FILL], env=full, cwd=tmp_path, check=True, timeout=60)
    done = subprocess.run(
        [sys.executable, "-m", "alkstore", "worker", "loopapp:app", *args],
        env=full,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done, out.read_text() if out.exists() else ""


def test_the_worker_runs_on_asyncios_own_loop_by_default(tmp_path: Path) -> None:
    done, loop = _worker(tmp_path)
    assert done.returncode == 0, done.stderr
    assert loop.startswith("asyncio."), loop


def test_loop_uvloop_runs_the_worker_on_uvloop(tmp_path: Path) -> None:
    pytest.importorskip("uvloop")
    done, loop = _worker(tmp_path, "--loop", "uvloop")
    assert done.returncode == 0, done.stderr
    assert loop.startswith("uvloop"), loop
    done, loop = _worker(tmp_path, ALKSTORE_WORKER_LOOP="uvloop")  # the variable too
    assert done.returncode == 0, done.stderr
    assert loop.startswith("uvloop"), loop


def test_loop_uvloop_without_uvloop_is_one_line_naming_the_extra(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "uvloop.py").write_text("raise ImportError('no uvloop in this test')\n")
    done, loop = _worker(
        tmp_path,
        "--loop",
        "uvloop",
        PYTHONPATH=os.pathsep.join([str(shadow), _env()["PYTHONPATH"]]),
    )
    assert done.returncode == 2, done.stderr
    assert loop == ""  # no job ran
    assert "Traceback" not in done.stderr
    assert "pip install 'alkstore[uvloop]'" in done.stderr, done.stderr
