"""The ``alkstore worker`` command against the in-process worker: start-up and drain.

    .venv/bin/python bench/cli_startup.py [--jobs 20000] [--runs 5] [--pg URL]
    .venv/bin/python bench/old_code.py /work/main bench/cli_startup.py ...   # the "before"

Rows, per engine, each the median of ``--runs`` with [min–max], the kinds alternating
run by run (a shared machine's load falls on all of them alike):

- ``CLI start-up``: exec of ``python -m alkstore worker APP --log-level LOG`` to its
  first handler's first line (``time.time()`` in the handler against the launch's),
  on a store holding one job: interpreter, imports, the app, connect, the schema
  check, the worker's first claim.
- ``CLI drain``: the same command on a backlog of ``--jobs`` no-op jobs; its N-th
  handler sends SIGTERM to its own process (a graceful stop: the outcomes still
  in flight are written). Wall clock from exec to the process's exit; client CPU is
  the process's whole user+sys time (``wait4``) over the jobs, start-up included.
- ``in-process drain``: a fresh ``python`` that imports the same app, opens it and
  logs at the same level (``logging.basicConfig``), then times
  ``app.worker(...).run()`` alone, its N-th handler calling ``worker.stop()``: what
  the peer harness's in-process rows count.
- ``CLI / in-process``: the drain rates' ratio (1.0 = the CLI costs nothing more).
- ``… first→last``: both drains from their first handler's first line to their last's
  (rate over the jobs between, client CPU of the process over them): the per-job
  path alone, start-up and stop left out (the peer harness's "first→last" rate).

``--loop uvloop`` runs both sides on uvloop (``pip install uvloop``; the peer
harness's in-process rows run on it): the in-process side sets uvloop's event loop
policy before ``asyncio.run``, the CLI side is started by a launcher that sets it and
then calls the CLI's ``main`` (what the CLI would cost on uvloop; it has no option
for it).

Both sides run this checkout's alkstore, or, under ``bench/old_code.py ROOT``, the
one ``ROOT`` holds (the CLI is then ``ROOT/alkstore/__main__.py`` run by old_code.py).
``--against ROOT`` runs both checkouts in one go, alternating run by run (the A/B
this machine's shifting load calls for):

    .venv/bin/python bench/cli_startup.py --against /work/main --pg postgresql://...
Logs go to /dev/null. Logging is ``--log`` (INFO, the CLI's default). Bytecode is
cached (``PYTHONPYCACHEPREFIX``, one warm-up start per engine) as in an installed
deployment, whatever ``PYTHONDONTWRITEBYTECODE`` says.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import alkstore

HERE = Path(__file__).resolve().parent
ROOT = Path(alkstore.__file__).resolve().parent.parent  # the checkout whose code runs
PYCACHE = os.path.join(tempfile.gettempdir(), f"alk-cli-bench-pycache-{os.getuid()}")

APP = """
import os, signal, time
import alkstore

app = alkstore.App(os.environ["BENCH_URL"], schema=os.environ["BENCH_SCHEMA"])
_N = int(os.environ.get("BENCH_STOP_AFTER", "0"))
_FIRST = os.environ.get("BENCH_FIRST")
_MARKS = os.environ.get("BENCH_MARKS")
_done = 0
_first = (0.0, 0.0)
on_last = None  # the in-process side sets it


@app.task(queue="bench", name="noop")
async def noop(i: int) -> None:
    global _done, _first
    _done += 1
    if _done == 1:
        _first = (time.process_time(), time.perf_counter())
        if _FIRST:
            with open(_FIRST, "w") as f:
                f.write(repr(time.time()))
    if _done == _N:
        if _MARKS and _N > 1:  # first to last handler: jobs/s and client CPU µs/job
            cpu, now = time.process_time() - _first[0], time.perf_counter() - _first[1]
            with open(_MARKS, "w") as f:
                f.write(f"{(_N - 1) / now} {cpu / (_N - 1) * 1e6}")
        if on_last is not None:
            on_last()
        else:
            os.kill(os.getpid(), signal.SIGTERM)
"""

IN_PROCESS = """
import asyncio, logging, os, sys, time
sys.path.insert(0, sys.argv[1])
if sys.argv[4] == "uvloop":
    import uvloop
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
logging.basicConfig(level=sys.argv[3].upper(), stream=open(os.devnull, "w"),
                    format="%(asctime)s %(levelname)s %(name)s: %(message)s")
import benchapp

async def main():
    await benchapp.app.connect()
    worker = benchapp.app.worker(concurrency=int(sys.argv[2]))
    benchapp.on_last = worker.stop
    cpu0, t0 = time.process_time(), time.perf_counter()
    async with benchapp.app:
        await worker.run()
    print(time.perf_counter() - t0, time.process_time() - cpu0, worker.counts["success"])

asyncio.run(main())
"""

# the CLI on uvloop (--loop uvloop): its policy set, then the CLI's own entry point
UVLOOP_CLI = """
import asyncio, sys
import uvloop
asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
from alkstore.cli import main
sys.argv[0] = "alkstore"
main()
"""


def _python(root: Path, script: str) -> list[str]:
    """The command running ``script`` (a path) against ``root``'s alkstore."""
    if root == HERE.parent:
        return [sys.executable, script]
    return [sys.executable, str(HERE / "old_code.py"), str(root), script]


def _cli_argv(root: Path, folder: str, args: argparse.Namespace) -> list[str]:
    app = f"{folder}/benchapp.py:app"
    rest = ["worker", app, "--concurrency", str(args.concurrency), "--log-level", args.log]
    if args.loop == "uvloop":
        launcher = Path(folder) / "cli_uvloop.py"
        launcher.write_text(UVLOOP_CLI)
        return [*_python(root, str(launcher)), *rest]
    if root == HERE.parent:
        return [sys.executable, "-m", "alkstore", *rest]
    return [*_python(root, str(root / "alkstore" / "__main__.py")), *rest]


def _env(url: str, schema: str, folder: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALKSTORE_")}
    env.update(BENCH_URL=url, BENCH_SCHEMA=schema, PYTHONPATH=folder, **extra)
    # bytecode cached as in any installed deployment, in a folder of its own (so the
    # other checkout stays untouched): PYTHONDONTWRITEBYTECODE=1 would make every
    # start compile alkstore from source (~0.1 s of CPU)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = PYCACHE
    return env


def _fill(root: Path, url: str, schema: str, folder: str, jobs: int) -> None:
    code = (
        "import asyncio, benchapp\n"
        "async def m():\n"
        "    async with benchapp.app:\n"
        f"        for s in range(0, {jobs}, 1000):\n"
        f"            calls = [{{'i': i}} for i in range(s, min(s + 1000, {jobs}))]\n"
        "            await benchapp.noop.defer_many(calls)\n"
        "asyncio.run(m())\n"
    )
    path = Path(folder) / "fill.py"
    path.write_text(code)
    subprocess.run(
        _python(root, str(path)),
        env=_env(url, schema, folder),
        check=True,
        stdout=subprocess.DEVNULL,
    )


def _run_cli(argv: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """(launch time.time(), wall s, CPU s) of one CLI process run to its exit."""
    launched, t0 = time.time(), time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"the CLI exited {proc.returncode}: {' '.join(argv)}")
    return launched, wall, usage.ru_utime + usage.ru_stime


class Store:
    """A fresh store per run: a SQLite file in a temporary folder, or a scratch schema."""

    def __init__(self, engine: str, pg: str | None) -> None:
        self.engine, self.pg = engine, pg
        self.folder = tempfile.mkdtemp(prefix="alk-cli-bench-")
        (Path(self.folder) / "benchapp.py").write_text(APP)
        if engine == "postgres":
            assert pg is not None
            self.url, self.schema = pg, f"bench_{uuid.uuid4().hex[:8]}"
        else:
            self.url, self.schema = f"sqlite:///{self.folder}/b.db", "alkstore"

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.engine == "postgres":
            import psycopg

            with psycopg.connect(self.url, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
        shutil.rmtree(self.folder, ignore_errors=True)


def startup(root: Path, engine: str, args: argparse.Namespace) -> tuple[float, float]:
    """(s from exec to the first handler, CPU s of the whole process: start-up, one
    job and the graceful stop)."""
    with Store(engine, args.pg) as s:
        _fill(root, s.url, s.schema, s.folder, 1)
        first = f"{s.folder}/first"
        env = _env(s.url, s.schema, s.folder, BENCH_STOP_AFTER="1", BENCH_FIRST=first)
        launched, _, cpu = _run_cli(_cli_argv(root, s.folder, args), env)
        return float(Path(first).read_text()) - launched, cpu


def _marks(folder: str) -> tuple[float, float]:
    """(jobs/s, client CPU µs/job) from the first handler to the last."""
    rate, cpu = Path(folder, "marks").read_text().split()
    return float(rate), float(cpu)


Drain = tuple[float, float, float, float]  # jobs/s, µs/job; first→last jobs/s, µs/job


def cli_drain(root: Path, engine: str, args: argparse.Namespace) -> Drain:
    with Store(engine, args.pg) as s:
        _fill(root, s.url, s.schema, s.folder, args.jobs)
        marks = f"{s.folder}/marks"
        env = _env(s.url, s.schema, s.folder, BENCH_STOP_AFTER=str(args.jobs), BENCH_MARKS=marks)
        _, wall, cpu = _run_cli(_cli_argv(root, s.folder, args), env)
        return (args.jobs / wall, cpu / args.jobs * 1e6, *_marks(s.folder))


def in_process_drain(root: Path, engine: str, args: argparse.Namespace) -> Drain:
    with Store(engine, args.pg) as s:
        _fill(root, s.url, s.schema, s.folder, args.jobs)
        marks = f"{s.folder}/marks"
        env = _env(s.url, s.schema, s.folder, BENCH_STOP_AFTER=str(args.jobs), BENCH_MARKS=marks)
        path = Path(s.folder) / "inproc.py"
        path.write_text(IN_PROCESS)
        argv = [*_python(root, str(path)), s.folder, str(args.concurrency), args.log, args.loop]
        out = subprocess.run(argv, env=env, check=True, capture_output=True, text=True).stdout
        wall, cpu, done = out.split()[-3:]
        assert int(done) >= args.jobs, out
        return (args.jobs / float(wall), float(cpu) / args.jobs * 1e6, *_marks(s.folder))


def _range(values: list[float], fmt: str) -> str:
    return f"{statistics.median(values):{fmt}} [{min(values):{fmt}}–{max(values):{fmt}}]"


def _print(root: Path, engine: str, samples: dict[str, list[Any]]) -> None:
    who = f"{engine:<8} {root.name:<10}"
    if samples["startup"]:
        ms = [t * 1000 for t, _ in samples["startup"]]
        cpu = [c * 1000 for _, c in samples["startup"]]
        print(
            f"{who} {'CLI start-up to first handler':<30} {_range(ms, '.0f')} ms · "
            f"whole run of 1 job {_range(cpu, '.0f')} ms CPU",
            flush=True,
        )
    if not samples["cli"]:
        return
    rows = (
        ("CLI drain", samples["cli"], 0),
        ("in-process drain", samples["here"], 0),
        ("CLI first→last", samples["cli"], 2),
        ("in-process first→last", samples["here"], 2),
    )
    for label, runs, at in rows:
        rates, cpus = [r[at] for r in runs], [r[at + 1] for r in runs]
        print(
            f"{who} {label:<30} {_range(rates, ',.0f')} jobs/s · {_range(cpus, '.1f')} µs CPU/job",
            flush=True,
        )
    for label, at in (("CLI / in-process (rate)", 0), ("… first→last (rate)", 2)):
        pairs = zip(samples["cli"], samples["here"], strict=True)
        ratio = [c[at] / h[at] for c, h in pairs]
        print(f"{who} {label:<30} {_range(ratio, '.2f')}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--log", default="info", help="log level (the CLI's default: info)")
    parser.add_argument("--pg", default=None, help="PostgreSQL URL (a scratch schema is used)")
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    parser.add_argument("--engines", default="sqlite,postgres")
    parser.add_argument("--only", default="startup,drain", help="startup, drain or both")
    parser.add_argument(
        "--against", default=None, help="another checkout, run alternately with this one"
    )
    args = parser.parse_args()
    engines = [e for e in args.engines.split(",") if e and (e != "postgres" or args.pg)]
    only = set(args.only.split(","))
    roots = [ROOT] + ([Path(args.against).resolve()] if args.against else [])
    print(
        f"# {args.jobs} no-op jobs, c={args.concurrency}, log {args.log}, loop {args.loop}, "
        f"median [min–max] of {args.runs}; alkstore from {', '.join(map(str, roots))}",
        flush=True,
    )
    for engine in engines:
        samples: dict[Path, dict[str, list[Any]]] = {
            root: {"startup": [], "cli": [], "here": []} for root in roots
        }
        for root in roots:
            startup(root, engine, args)  # warm-up: bytecode cached, page cache warm
        for _ in range(args.runs):  # alternating: one of each kind and checkout per round
            for root in roots:
                if "startup" in only:
                    samples[root]["startup"].append(startup(root, engine, args))
                if "drain" in only:
                    samples[root]["cli"].append(cli_drain(root, engine, args))
                    samples[root]["here"].append(in_process_drain(root, engine, args))
        for root in roots:
            _print(root, engine, samples[root])


if __name__ == "__main__":
    main()
