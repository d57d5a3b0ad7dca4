"""A cluster on this machine: a scratch PostgreSQL listening on a bridge, and worker
hosts in network namespaces joined to it by veths, whose links can be cut.

Everything is created under names carrying this process's id (bridge ``ak<pid>br``,
veths ``ak<pid>h<n>``, namespaces ``alkc-<pid>-h<n>``, a 10.231.x.0/24 subnet that
exists only here) and torn down by name when the module ends, failed or not;
leftovers of a run that died are removed first. No traffic leaves this machine.
Skipped with the reason where namespaces or PostgreSQL's binaries are missing,
except under ``CI=true``, where that is a failure.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the workers import tests.cluster.app; so do we
    sys.path.insert(0, str(ROOT))
HOSTS = 3
PG_PORT = 55432
PG_USER = "postgres"  # the server refuses to run as root


def _sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=60)


def _unavailable() -> str | None:
    if sys.platform != "linux" or os.geteuid() != 0:
        return "needs root on Linux (network namespaces)"
    if shutil.which("ip") is None or shutil.which("bridge") is None:
        return "needs iproute2 (ip, bridge)"
    if not glob.glob("/usr/lib/postgresql/*/bin/initdb"):
        return "needs PostgreSQL's server binaries in /usr/lib/postgresql/*/bin"
    if _sh("id", "-u", PG_USER, check=False).returncode != 0:
        return f"needs a non-root user {PG_USER!r} to run the scratch server"
    probe = f"alkc-probe-{os.getpid()}"
    made = _sh("ip", "netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip()}"
    _sh("ip", "netns", "del", probe, check=False)
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_leftovers() -> None:
    """Namespaces and bridges of earlier runs whose process is gone."""
    for line in _sh("ip", "netns", "list", check=False).stdout.splitlines():
        m = re.match(r"alkc-(\d+)-h\d+\b", line)
        if m and not _alive(int(m.group(1))):
            _sh("ip", "netns", "del", m.group(0), check=False)
    for line in _sh("ip", "-o", "link", "show", check=False).stdout.splitlines():
        m = re.search(r"\d+: (ak(\d+)(?:br|h\d+))[:@]", line)
        if m and not _alive(int(m.group(2))):
            _sh("ip", "link", "del", m.group(1), check=False)


@dataclass
class Worker:
    """One worker process on one host."""

    host: str
    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    events: Path
    exited_at: float | None = None

    def records(self) -> list[dict[str, Any]]:
        import json

        out = []
        for line in self.log.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
        return out


@dataclass
class Cluster:
    tag: str
    subnet: str
    bridge: str
    pgdata: Path
    work: Path
    hosts: list[str] = field(default_factory=list)  # namespace names
    ports: dict[str, str] = field(default_factory=dict)  # host -> its bridge port (veth)
    workers: list[Worker] = field(default_factory=list)

    @property
    def server(self) -> str:
        return f"{self.subnet}.1"

    def url(self, **params: str) -> str:
        query = "&".join(f"{k}={v}" for k, v in params.items())
        return f"postgresql://alk@{self.server}:{PG_PORT}/postgres" + (f"?{query}" if query else "")

    def cut(self, host: str) -> float:
        """Drop every frame of the host's link (both ways); the time of the cut."""
        at = time.time()
        _sh("bridge", "link", "set", "dev", self.ports[host], "state", "0")
        return at

    def heal(self, host: str) -> float:
        at = time.time()
        _sh("bridge", "link", "set", "dev", self.ports[host], "state", "3")
        return at

    def start(
        self, host: str, schema: str, *args: str, env: dict[str, str] | None = None
    ) -> Worker:
        n = len(self.workers)
        name = f"{host}-{n}"
        log = self.work / f"{name}.log"
        events = self.work / f"{name}.events"
        environ = {
            **os.environ,
            "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "ALKC_EVENTS": str(events),
            "ALKC_HOST": host,
            **(env or {}),
        }
        environ.pop("ALKSTORE_URL", None)
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [
                    "ip", "netns", "exec", host,
                    sys.executable, "-m", "alkstore", "worker", "tests.cluster.app:app",
                    "--url", self.url(), "--schema", schema, "--worker-id", name,
                    "--poll-interval", "0.5", "--log-format", "json",
                    "--log-level", "debug",  # a line per success: the checks read them
                    *args,
                ],
                cwd=ROOT,
                env=environ,
                stdout=out,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
        worker = Worker(host, name, proc, log, events)
        self.workers.append(worker)
        return worker

    def stop_all(self) -> None:
        for worker in self.workers:
            if worker.proc.poll() is None:
                worker.proc.send_signal(signal.SIGKILL)
                worker.proc.wait()


def _setup(cluster: Cluster) -> None:
    tag, subnet = cluster.tag, cluster.subnet
    _sh("ip", "link", "add", cluster.bridge, "type", "bridge")
    _sh("ip", "addr", "add", f"{subnet}.1/24", "dev", cluster.bridge)
    _sh("ip", "link", "set", cluster.bridge, "up")
    for i in range(1, HOSTS + 1):
        ns, veth, peer = f"alkc-{tag}-h{i}", f"ak{tag}h{i}", f"ak{tag}p{i}"
        _sh("ip", "netns", "add", ns)
        cluster.hosts.append(ns)
        _sh("ip", "link", "add", veth, "type", "veth", "peer", "name", peer)
        cluster.ports[ns] = veth
        _sh("ip", "link", "set", peer, "netns", ns)
        _sh("ip", "link", "set", veth, "master", cluster.bridge, "up")
        _sh("ip", "-n", ns, "addr", "add", f"{subnet}.{10 + i}/24", "dev", peer)
        _sh("ip", "-n", ns, "link", "set", peer, "up")
        _sh("ip", "-n", ns, "link", "set", "lo", "up")
    bindir = sorted(glob.glob("/usr/lib/postgresql/*/bin"))[-1]
    data = cluster.pgdata
    shutil.chown(data, PG_USER)
    as_pg = ["runuser", "-u", PG_USER, "--"]
    _sh(*as_pg, f"{bindir}/initdb", "-D", str(data), "-U", "alk", "--auth=trust", "--no-sync")
    with open(data / "postgresql.conf", "a") as conf:
        conf.write(
            f"listen_addresses = '{cluster.server}'\nport = {PG_PORT}\n"
            f"unix_socket_directories = '{data}'\nfsync = off\n"
            "synchronous_commit = off\nfull_page_writes = off\nmax_connections = 200\n"
        )
    with open(data / "pg_hba.conf", "a") as hba:
        hba.write(f"host all all {subnet}.0/24 trust\n")
    _sh(*as_pg, f"{bindir}/pg_ctl", "-D", str(data), "-l", str(data / "log"), "-w", "start")


def _teardown(cluster: Cluster) -> None:
    cluster.stop_all()
    bindir = sorted(glob.glob("/usr/lib/postgresql/*/bin"))[-1]
    if (cluster.pgdata / "postmaster.pid").exists():
        _sh(
            "runuser", "-u", PG_USER, "--", f"{bindir}/pg_ctl", "-D", str(cluster.pgdata),
            "-m", "immediate", "-w", "stop", check=False,
        )  # fmt: skip
    for ns in [f"alkc-{cluster.tag}-h{i}" for i in range(1, HOSTS + 1)]:
        _sh("ip", "netns", "del", ns, check=False)
    for i in range(1, HOSTS + 1):
        _sh("ip", "link", "del", f"ak{cluster.tag}h{i}", check=False)
    _sh("ip", "link", "del", cluster.bridge, check=False)
    shutil.rmtree(cluster.pgdata, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    reason = _unavailable()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the cluster test cannot run under CI: {reason}")
        pytest.skip(reason)
    _remove_leftovers()
    pid = os.getpid()
    tag = str(pid)
    cluster = Cluster(
        tag=tag,
        subnet=f"10.231.{pid % 250 + 1}",
        bridge=f"ak{tag}br",
        pgdata=Path(tempfile.mkdtemp(prefix="alkc-pg-")),
        work=tmp_path_factory.mktemp("cluster"),
    )
    try:
        _setup(cluster)
        yield cluster
    finally:
        _teardown(cluster)
