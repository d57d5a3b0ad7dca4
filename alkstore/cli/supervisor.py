"""The worker's supervisor: with ``--max-jobs``, ``--max-memory`` or ``--reload``
the command becomes a small parent process that runs the real worker as a child
(the same command line) and starts a fresh one when it should:

- the child recycled (it stopped gracefully and exited :data:`RECYCLE_EXIT`,
  75): a fresh process at once, as Celery replaces its pool children;
- ``--reload`` and a ``.py`` file changed under the watched directories: the
  child gets SIGTERM (the graceful stop), then a fresh one starts; if the
  child fails (an import error while editing), the next change restarts it.

SIGTERM/SIGINT to the supervisor are passed to the child (a second one forces
it, as for a lone worker) and the supervisor exits with the child's status.
The child runs in its own process group, so a terminal's Ctrl-C reaches it
once, through the supervisor. Files are watched by polling their mtimes every
``WATCH_S`` (the standard library only).

Under an external supervisor (systemd, Kubernetes) that should do the restart
itself, set ``ALKSTORE_WORKER_SUPERVISED=1``: the command then is the worker,
and exits 75 when recycled (restart it on that status, e.g. systemd's
``Restart=always``).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from types import FrameType
from typing import Any

from alkstore.worker.recycle import RECYCLE_EXIT

__all__ = ["RECYCLE_EXIT", "SUPERVISED_ENV", "follow_supervisor", "supervise", "wanted"]

log = logging.getLogger("alkstore.worker")

SUPERVISED_ENV = "ALKSTORE_WORKER_SUPERVISED"
WATCH_S = 0.5
MIN_LIFE_S = 1.0  # a child recycled sooner than this waits the rest (no restart storm)
_SKIP_DIRS = frozenset({"__pycache__", "node_modules", "site-packages", "venv", "site"})


def wanted(options: dict[str, Any]) -> bool:
    """Whether these worker options ask for the supervisor (and we are not its child)."""
    if os.environ.get(SUPERVISED_ENV):
        return False
    return bool(options.get("reload") or options.get("max_jobs") or options.get("max_memory"))


def python_files(roots: Iterable[Path]) -> dict[str, int]:
    """Every ``.py`` file under ``roots`` with its mtime (hidden and cache dirs skipped)."""
    found: dict[str, int] = {}
    for root in roots:
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS]
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    try:
                        found[path] = os.stat(path).st_mtime_ns
                    except OSError:
                        continue
    return found


def follow_supervisor() -> None:
    """In a supervised worker: get SIGTERM (the graceful stop) if the supervisor dies,
    even by SIGKILL, so no worker outlives it unseen (Linux ``PR_SET_PDEATHSIG``)."""
    marker = os.environ.get(SUPERVISED_ENV, "")
    parent = marker.removeprefix("pid:")
    if sys.platform != "linux" or marker == parent or not parent.isdigit():
        return  # not our child (unsupervised, or ALKSTORE_WORKER_SUPERVISED=1 under systemd)
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        return
    if os.getppid() != int(parent):  # it died before the prctl: stop now
        os.kill(os.getpid(), signal.SIGTERM)


def _changed(before: dict[str, int], after: dict[str, int]) -> str | None:
    for path, mtime in after.items():
        if before.get(path) != mtime:
            return path
    for path in before:
        if path not in after:
            return path
    return None


def supervise(*, reload: bool, watch: Iterable[Path] = ()) -> int:
    """Run this command's worker as a child until stopped; its last exit status."""
    argv = [sys.executable, *sys.orig_argv[1:]]
    env = {**os.environ, SUPERVISED_ENV: f"pid:{os.getpid()}"}  # the child knows its parent
    roots = [Path.cwd(), *watch] if reload else []
    files = python_files(roots)
    stops = 0
    child: subprocess.Popen[bytes] | None = None

    def forward(signum: int, _frame: FrameType | None) -> None:
        nonlocal stops
        stops += 1
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, forward)
    if reload:
        log.info("reload: watching %d .py file(s) under %s", len(files), ", ".join(map(str, roots)))
    status = 0
    while not stops:
        born = time.monotonic()
        child = subprocess.Popen(argv, env=env, process_group=0)
        log.info("supervisor %d: worker process %d started", os.getpid(), child.pid)
        reloading = False
        while True:
            try:
                code = child.wait(timeout=WATCH_S)
                break
            except subprocess.TimeoutExpired:
                pass
            if reload and not reloading and not stops:
                now = python_files(roots)
                path = _changed(files, now)
                files = now
                if path is not None:
                    log.info("reload: %s changed; restarting the worker", path)
                    reloading = True
                    child.send_signal(signal.SIGTERM)
        status = code if code >= 0 else 128 - code
        if stops:  # asked to stop: a child that was recycling meanwhile stopped cleanly too
            return 0 if code == RECYCLE_EXIT else status
        if reloading:
            continue
        if code == RECYCLE_EXIT:
            log.info("worker process %d recycled; starting a fresh one", child.pid)
            rest = MIN_LIFE_S - (time.monotonic() - born)
            if rest > 0:
                time.sleep(rest)
            continue
        if not reload:
            return status
        log.warning("worker process %d exited with %d; waiting for a change", child.pid, status)
        while not stops:
            time.sleep(WATCH_S)
            now = python_files(roots)
            path = _changed(files, now)
            files = now
            if path is not None:
                log.info("reload: %s changed; starting the worker", path)
                break
    return status
