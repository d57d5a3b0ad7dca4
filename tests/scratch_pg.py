"""A scratch PostgreSQL server: its own data directory and port on 127.0.0.1, for a
test or benchmark that stops and starts its server (the shared one is never
touched). Run as the ``postgres`` user when we are root (the server refuses root)."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

PG_USER = "postgres"


def server_bindir() -> str | None:
    """The newest installed PostgreSQL's binaries, ``None`` if there are none."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return os.path.dirname(found[-1]) if found else None


def _as_pg(*cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    prefix = ["runuser", "-u", PG_USER, "--"] if os.geteuid() == 0 else []
    return subprocess.run([*prefix, *cmd], check=check, capture_output=True, text=True, timeout=120)


class ScratchServer:
    """``initdb`` in a new temporary directory (trust auth, role ``alk``) on a free
    port; ``remove()`` stops it and deletes the directory."""

    def __init__(self, bindir: str) -> None:
        self.bindir = bindir
        # not under pytest's tmp_path: the server's user must reach it
        self.home = Path(tempfile.mkdtemp(prefix="alk-scratch-pg-"))
        self.data = self.home / "data"
        self.data.mkdir()
        if os.geteuid() == 0:
            shutil.chown(self.home, PG_USER)
            shutil.chown(self.data, PG_USER)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"postgresql://alk@127.0.0.1:{self.port}/postgres"
        _as_pg(f"{bindir}/initdb", "-D", str(self.data), "-U", "alk", "--auth=trust", "--no-sync")
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(
                f"listen_addresses = '127.0.0.1'\nport = {self.port}\n"
                f"unix_socket_directories = '{self.data}'\nfsync = off\n"
            )

    def start(self) -> None:
        """Start it and wait until it accepts connections."""
        self._pg_ctl("-l", str(self.home / "log"), "start")

    def stop(self, mode: str = "fast") -> None:
        self._pg_ctl("-m", mode, "stop")

    def remove(self) -> None:
        """Stop it (immediately) if it runs, and delete its directory."""
        if (self.data / "postmaster.pid").exists():
            self._pg_ctl("-m", "immediate", "stop", check=False)
        shutil.rmtree(self.home, ignore_errors=True)

    def _pg_ctl(self, *args: str, check: bool = True) -> None:
        _as_pg(f"{self.bindir}/pg_ctl", "-D", str(self.data), "-w", *args, check=check)
