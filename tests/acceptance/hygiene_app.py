"""The App of the worker-hygiene tests (recycling, job hooks), run in real worker
processes. Every handler and hook appends one line to the file its job names
(``path``), so the test reads what ran, in which process and thread, in order."""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

from alkstore import App
from alkstore.tasks import decode_envelope
from alkstore.worker import current_job
from tests.acceptance.apps import log_line

app = App()
_hog: list[bytes] = []


def _where() -> str:
    return f"{os.getpid()}:{threading.get_ident()}"


@app.task(queue="hygiene", name="note")
async def note(path: str) -> None:
    log_line(path, "run", current_job().id, _where())  # type: ignore[union-attr]


@app.task(queue="hygiene", name="note_sync")
def note_sync(path: str) -> None:
    log_line(path, "run", current_job().id, _where())  # type: ignore[union-attr]


@app.task(queue="hygiene", name="breaks", max_attempts=2, retry_base_s=0)
async def breaks(path: str) -> None:
    log_line(path, "run", current_job().id, _where())  # type: ignore[union-attr]
    raise ValueError("broken on purpose")


@app.task(queue="hygiene", name="hog")
async def hog(path: str, megabytes: int) -> None:
    _hog.append(os.urandom(megabytes * 1_000_000))  # kept: the process grows
    log_line(path, "run", current_job().id, _where())  # type: ignore[union-attr]


def _path(job: Any) -> str:
    """The ``path`` argument of the job's call (hooks see the job, not the call)."""
    return str(decode_envelope(job.payload)[1]["path"])


if os.environ.get("HYGIENE_HOOKS"):

    @app.before_job
    async def before_async(job: Any) -> None:
        await asyncio.sleep(0)
        log_line(_path(job), "before_async", job.id, _where())

    @app.before_job
    def before_sync(job: Any) -> None:
        path = _path(job)
        log_line(path, "before_sync", job.id, _where())
        if "refuse" in path:
            raise PermissionError("no session for you")

    @app.after_job
    def after_sync(job: Any, error: BaseException | None) -> None:
        log_line(_path(job), "after_sync", job.id, _where(), type(error).__name__)

    @app.after_job
    async def after_async(job: Any, error: BaseException | None) -> None:
        log_line(_path(job), "after_async", job.id, _where(), type(error).__name__)
        if "after-raises" in _path(job):
            raise RuntimeError("after hook broke")

    @app.on_failure
    async def failure(job: Any, error: BaseException) -> None:
        log_line(_path(job), "on_failure", job.id, job.attempts, f"{type(error).__name__}:{error}")


@app.task(queue="hygiene", name="nap")
async def nap(path: str, seconds: float) -> None:
    log_line(path, "start", current_job().id, _where())  # type: ignore[union-attr]
    await asyncio.sleep(seconds)
    log_line(path, "end", current_job().id, _where())  # type: ignore[union-attr]
