"""The hot statements' cost per layout on a fresh store, statement by statement (#27).

    git worktree add --detach /work/wt-ringsrc da6c864    # the ring as built
    .venv/bin/python bench/ring_statements.py --ring-src /work/wt-ringsrc --rounds 40 \
        [--async-commit] [--only main,det2,...]
    ... --locks      # relation locks held at each statement's end, fast-path or not
    ... --explain    # EXPLAIN ANALYZE of a claim of one: planning and execution ms
    RS_PLAN=1 ... --explain       # the claim's generic plan as run (auto_explain)
    RS_PLAN=stats ... --explain   # log_executor_stats of five claims (elapsed)
    RS_CUSTOM=1 ...               # plan at every run (force_custom_plan), a diagnosis
    ... --no-arms    # claims without their sweep and lapsed arms (main and the parent layouts)

This checkout's code must be main's layout (one ``alk_jobs`` table); ``--ring-src``
is a checkout of the ring as built (``da6c864``): a subprocess runs it through
``old_code.py`` to create a ring schema per ring layout and hand back its
statements. Then, in one process, interleaved, each on a schema of its own:

- ``main``: main's layout and statements;
- ``ring9``: the ring as built (keep + p0..p7 attached) and its statements;
- ``det2``: the ring's statements with p1..p7 DETACHed (keep + p0 attached:
  candidate (a), the parent holding only what has rows);
- ``lit2``: the ring's statements on the full ring with ``part IN (-1, 0)`` in
  every read and write of ``alk_jobs`` (pruned at plan time: the statement text
  names the current partition);
- ``param2``: as ``lit2`` with the parts a parameter (``part = ANY(%(parts)s)``):
  the generic plan holds all nine partitions and prunes at executor start;
- ``direct2``: keep and p0 addressed by name, no parent (candidate (b)): the
  claim's arms per table (UNION ALL), an UPDATE per table; the insert and the
  ack straight into / from ``alk_jobs_p0``;
- ``direct2g``: ``direct2`` with keep's arms behind a one-time filter that is
  false (keep known to hold nothing claimable): its scans never run, but the
  executor still opens keep and its indexes;
- ``direct1``: as ``direct2`` without keep (the floor of any ring: one table);
- ``alone1``: ``direct1`` on p0 DETACHed and without the ring's CHECK (keyed rows
  in keep): a plain table like main's, for what being a partition costs;
- ``slim1``: ``alone1`` with only the indexes plain rows need (primary key, claim,
  due, processing, expiry: no dedupe, debounce, partition-key or fair index);
- ``slim2``: two such tables in the claim (p1 empty, p0 holding the rows): a
  ring's claim right after a turn, keep left out.

Every connection runs with ``jit`` off, ``plan_cache_mode = force_generic_plan``,
``enable_seqscan`` off (the ring's kept sessions; main's claim session has the
generic plan, its ack the seqscan setting) and prepares at the first run (the
engine's ``prepare_threshold=0``). Each round, for each layout in a rotating
order: an enqueue of 1,000 (once), 32 enqueues of one, 32 claims of one then
one ack of those 32, 31 claims of 32 each followed by its ack of 32. The
round's median per statement; printed: the median over rounds (µs) and the
ratio to main's. The first round is a warm-up (plans), not counted.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any

import psycopg

SESSION = (
    "SET jit TO off",
    "SET plan_cache_mode TO force_generic_plan",
    "SET enable_seqscan TO off",
)
NAMES = ("claim", "ack_many", "insert_jobs")
KINDS = ("enqueue 1", "enqueue 1000", "claim 1", "claim 32", "ack 32")


def _make_ring(url: str, schemas: list[str], dump: str) -> None:
    """In the ring's code (run through old_code.py): create the schemas, dump the SQL."""
    import asyncio

    import alkstore

    async def run() -> None:
        out: dict[str, dict[str, str]] = {}
        for schema in schemas:
            store = await alkstore.connect(url, schema=schema)
            q = store._engine.q  # type: ignore[attr-defined]
            out[schema] = {n: (q[n].decode() if isinstance(q[n], bytes) else q[n]) for n in NAMES}
            await store.close()
        with open(dump, "w") as f:
            json.dump(out, f)

    asyncio.run(run())


def _main_schema(url: str, schema: str) -> dict[str, str]:
    import asyncio

    import alkstore

    async def run() -> dict[str, str]:
        store = await alkstore.connect(url, schema=schema)
        q = store._engine.q  # type: ignore[attr-defined]
        out = {n: (q[n].decode() if isinstance(q[n], bytes) else q[n]) for n in NAMES}
        await store.close()
        return out

    return asyncio.run(run())


def _tables(sql: str, schema: str, table: str) -> str:
    return re.sub(rf'"{schema}"\.alk_jobs\b', f'"{schema}".{table}', sql)


def literal_parts(q: dict[str, str], parts: str) -> dict[str, str]:
    """The ring's statements with ``part IN (parts)`` in every read and write of alk_jobs
    (``parts``: a literal list, pruned at plan time, or ``%(parts)s``, a parameter:
    a generic plan holds every partition, pruned at executor start)."""
    cond = f"part IN ({parts})" if parts != "%(parts)s" else "part = ANY(%(parts)s::smallint[])"
    claim = q["claim"].replace(
        "WHERE queue = %(queue)s AND state", f"WHERE {cond} AND queue = %(queue)s AND state"
    )
    claim = claim.replace("WHERE j.id = ANY(", f"WHERE j.{cond} AND j.id = ANY(")
    ack = q["ack_many"].replace("WHERE j.id = f.id", f"WHERE j.{cond} AND j.id = f.id")
    assert claim.count(cond) in (2, 4) and ack != q["ack_many"]  # 2: without the arms
    return {"claim": claim, "ack_many": ack, "insert_jobs": q["insert_jobs"]}


def _between(text: str, start: str, end: str) -> str:
    i = text.index(start) + len(start)
    return text[i : text.index(end, i)]


def direct(
    q: dict[str, str], schema: str, tables: list[str], gated: bool = False
) -> dict[str, str]:
    """The ring's statements addressing ``tables`` (children of alk_jobs) by name;
    ``gated``: the first table's arms run only with ``%(keep_due)s`` (passed false)."""
    claim = q["claim"]
    head = claim[: claim.index("swept AS (")]
    swept = _between(claim, "swept AS (", "), buried AS (")
    buried = _between(claim, "), buried AS (", "), pending AS MATERIALIZED (")
    pending = _between(claim, "), pending AS MATERIALIZED (", "), lapsed AS MATERIALIZED (")
    lapsed = _between(claim, "), lapsed AS MATERIALIZED (", "), chosen AS MATERIALIZED (")
    chosen = _between(claim, "), chosen AS MATERIALIZED (", "), claimed AS (")
    claimed = _between(claim, "), claimed AS (", "), announced AS MATERIALIZED (")
    announced = _between(claim, "), announced AS MATERIALIZED (", ")\nSELECT * FROM claimed")
    tail = claim[claim.index("UNION ALL\nSELECT NULL::bigint") :]
    columns = _between(buried, "INSERT INTO", ")").split("(", 1)[1]
    swept = swept.replace(
        "RETURNING *", "RETURNING " + columns.replace("last_error, died_at, ", "")
    )
    ctes = []
    gate = "WHERE %(keep_due)s::boolean AND queue = %(queue)s"

    def body_of(text: str, i: int, t: str) -> str:
        text = _tables(text, schema, t)
        return text.replace("WHERE queue = %(queue)s", gate) if gated and i == 0 else text

    for i, t in enumerate(tables):
        ctes.append(f"swept_{i} AS ({body_of(swept, i, t)})")
    union = " UNION ALL ".join(f"SELECT * FROM swept_{i}" for i in range(len(tables)))
    ctes.append("buried AS (" + buried.replace("FROM swept", f"FROM ({union}) AS swept") + ")")
    for arm, body in (("pending", pending), ("lapsed", lapsed)):
        for i, t in enumerate(tables):
            b = body_of(body, i, t).replace(
                "SELECT id, priority, run_at FROM", f"SELECT id, priority, run_at, {i} AS k FROM"
            )
            ctes.append(f"{arm}_{i} AS MATERIALIZED ({b})")
    arms = " UNION ALL ".join(
        f"SELECT * FROM {arm}_{i}" for arm in ("pending", "lapsed") for i in range(len(tables))
    )
    ctes.append(
        "chosen AS MATERIALIZED ("
        + chosen.replace(
            "SELECT id FROM (SELECT * FROM pending UNION ALL SELECT * FROM lapsed) AS arms",
            f"SELECT id, k FROM ({arms}) AS arms",
        )
        + ")"
    )
    for i, t in enumerate(tables):
        b = _tables(claimed, schema, t).replace(
            "ANY(ARRAY(SELECT id FROM chosen))", f"ANY(ARRAY(SELECT id FROM chosen WHERE k = {i}))"
        )
        ctes.append(f"claimed_{i} AS ({b})")
    claimed_all = " UNION ALL ".join(f"SELECT * FROM claimed_{i}" for i in range(len(tables)))
    lapsed_all = " UNION ALL ".join(f"SELECT * FROM lapsed_{i}" for i in range(len(tables)))
    ctes.append(
        "announced AS MATERIALIZED ("
        + announced.replace(
            "FROM claimed AS c JOIN lapsed AS l",
            f"FROM ({claimed_all}) AS c JOIN ({lapsed_all}) AS l",
        )
        + ")"
    )
    final = "SELECT * FROM claimed_0 WHERE (SELECT count(*) FROM announced) >= 0\n"
    final += "".join(f"UNION ALL SELECT * FROM claimed_{i}\n" for i in range(1, len(tables)))
    claim_sql = head + ",\n".join(ctes) + "\n" + final + tail
    hot = tables[-1]
    insert = q["insert_jobs"]
    i, j = insert.index("CASE WHEN %(keep)s::boolean"), insert.index("AS r) END") + len("AS r) END")
    insert = insert[:i] + "0::smallint" + insert[j:]
    insert = insert.replace(f'"{schema}".alk_jobs (', f'"{schema}".{hot} (')
    ack = _tables(q["ack_many"], schema, hot)
    return {"claim": claim_sql, "ack_many": ack, "insert_jobs": insert}


class Layout:
    def __init__(self, name: str, url: str, q: dict[str, str], session: tuple[str, ...]) -> None:
        self.name, self.q = name, q
        self.queue = "q_" + name
        self.conn = psycopg.connect(url, autocommit=True, prepare_threshold=0)
        for s in session:
            self.conn.execute(s)
        self.times: dict[str, list[float]] = {k: [] for k in KINDS}

    def _insert(self, n: int) -> None:
        params = {
            "wake": False,
            "keep": False,
            "queue": self.queue,
            "payloads": [b"x" * 64] * n,
            "priority": 0,
            "run_at": None,
            "delay": 0.0,
            "max_attempts": 3,
            "visibility": 300.0,
            "retry_base": 1.0,
            "expires_in": None,
            "partition_key": None,
        }
        t0 = time.perf_counter()
        self.conn.execute(self.q["insert_jobs"], params, binary=True).fetchall()
        self.last = time.perf_counter() - t0

    def _claim(self, n: int) -> list[tuple[Any, ...]]:
        params = {
            "queue": self.queue,
            "worker": "w",
            "n": n,
            "exhausted_error": "x",
            "gated": True,
            "keep_due": False,
            "parts": [-1, 0],
        }
        t0 = time.perf_counter()
        rows = self.conn.execute(self.q["claim"], params, binary=True).fetchall()
        self.last = time.perf_counter() - t0
        assert len(rows) == n and rows[0][0] is not None, (self.name, rows[:1])
        return rows

    def _ack(self, rows: list[tuple[Any, ...]]) -> None:
        rows = sorted(rows, key=lambda r: r[0])
        params = {
            "ids": [r[0] for r in rows],
            "attempts": [r[7] for r in rows],
            "queues": [r[1] for r in rows],
            "parts": [-1, 0],
        }
        t0 = time.perf_counter()
        done = self.conn.execute(self.q["ack_many"], params, binary=True).fetchall()
        self.last = time.perf_counter() - t0
        assert len(done) == len(rows), (self.name, len(done))

    def round(self) -> dict[str, float]:
        got: dict[str, list[float]] = {k: [] for k in KINDS}
        self._insert(1000)
        got["enqueue 1000"].append(self.last)
        for _ in range(32):
            self._insert(1)
            got["enqueue 1"].append(self.last)
        ones = []
        for _ in range(32):
            ones += self._claim(1)
            got["claim 1"].append(self.last)
        self._ack(ones)
        got["ack 32"].append(self.last)
        for _ in range(31):
            rows = self._claim(32)
            got["claim 32"].append(self.last)
            self._ack(rows)
            got["ack 32"].append(self.last)
        return {k: statistics.median(v) for k, v in got.items()}

    def generic_plan(self) -> None:
        """The claim of one's plan as run (its generic plan), through auto_explain."""
        self._insert(10)
        for _ in range(5):
            self._claim(1)
        notes: list[str] = []
        self.conn.add_notice_handler(
            lambda d: notes.append((d.message_primary or "") + "\n" + (d.message_detail or ""))
        )
        stats = os.environ.get("RS_PLAN") == "stats"
        for s in (
            ("SET log_executor_stats = on", "SET client_min_messages = log")
            if stats
            else (
                "LOAD 'auto_explain'",
                "SET auto_explain.log_min_duration = 0",
                "SET auto_explain.log_analyze = on",
                "SET auto_explain.log_level = notice",
            )
        ):
            self.conn.execute(s)
        if stats:
            for _ in range(5):
                self._claim(1)
            self.conn.execute("SET log_executor_stats = off")
            for n in notes[-5:]:
                print(self.name, [x for x in n.splitlines() if "elapsed" in x])
            return
        self._claim(1)
        self.conn.execute("SET auto_explain.log_min_duration = -1")
        for row in self.conn.execute(
            "SELECT generic_plans, custom_plans, left(statement, 60) FROM pg_prepared_statements"
        ).fetchall():
            print(self.name, row)
        print(f"== {self.name}\n" + "\n".join(notes))

    def explain(self, runs: int = 30) -> None:
        """EXPLAIN ANALYZE of a claim of one (its custom plan): planning and execution ms."""
        self._insert(runs + 5)
        plan, run = [], []
        params = {
            "queue": self.queue,
            "worker": "w",
            "n": 1,
            "exhausted_error": "x",
            "gated": True,
            "keep_due": False,
            "parts": [-1, 0],
        }
        for _ in range(runs):
            sql = "EXPLAIN (ANALYZE, SUMMARY) " + self.q["claim"]
            lines = [r[0] for r in self.conn.execute(sql, params).fetchall()]
            plan.append(float(lines[-2].split()[2]))
            run.append(float(lines[-1].split()[2]))
        if os.environ.get("RS_PLAN"):
            print("\n".join(lines))
        print(
            f"  {self.name:8s} claim 1: planning {statistics.median(plan):.3f} ms,"
            f" execution {statistics.median(run):.3f} ms (medians of {runs})"
        )

    def locks(self) -> None:
        """Per statement: locks held at its end (fast-path / not), and the plan."""
        self._insert(40)
        for kind, run in (
            ("enqueue 1", lambda: self._insert(1)),
            ("claim 1", lambda: self._claim(1)),
        ):
            with self.conn.transaction():
                run()
                cur = self.conn.execute(
                    "SELECT count(*) FILTER (WHERE fastpath), count(*) FILTER (WHERE NOT fastpath)"
                    " FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'relation'"
                )
                fast, slow = cur.fetchone() or (0, 0)
            print(
                f"  {self.name:8s} {kind:10s} relation locks: {fast} fast-path, {slow} in the table"
            )
        rows = self._claim(1)
        with self.conn.transaction():
            self._ack(rows)
            cur = self.conn.execute(
                "SELECT count(*) FILTER (WHERE fastpath), count(*) FILTER (WHERE NOT fastpath)"
                " FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'relation'"
            )
            fast, slow = cur.fetchone() or (0, 0)
        print(f"  {self.name:8s} ack 1      relation locks: {fast} fast-path, {slow} in the table")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="postgresql://root@127.0.0.1:5432/test")
    parser.add_argument("--ring-src", default="/work/wt-ring27b-ringsrc")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--locks", action="store_true")
    parser.add_argument("--explain", action="store_true")
    parser.add_argument(
        "--no-arms",
        action="store_true",
        help="every claim without its sweep and lapsed arms (claim_in_wake.py's 'neither');"
        " the layouts built on one parent only",
    )
    parser.add_argument(
        "--async-commit",
        action="store_true",
        help="synchronous_commit off in every session: the statements' cost without the flush",
    )
    parser.add_argument("--only", default="", help="comma-separated layouts (default: all)")
    parser.add_argument("--make-ring", nargs=2, metavar=("SCHEMAS", "DUMP"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.make_ring:
        _make_ring(args.url, args.make_ring[0].split(","), args.make_ring[1])
        return
    tag = uuid.uuid4().hex[:6]
    ring_kinds = [
        "ring9",
        "det2",
        "lit2",
        "param2",
        "direct2",
        "direct2g",
        "direct1",
        "alone1",
        "slim1",
        "slim2",
    ]
    if args.no_arms:  # direct() splits the claim at its arms
        ring_kinds = ["ring9", "det2", "lit2", "param2"]
    if args.only:  # a schema each
        ring_kinds = [k for k in ring_kinds if k in args.only.split(",")]
    s_main = f"rs_main_{tag}"
    s = {k: f"rs_{k}_{tag}" for k in ring_kinds}
    qm = _main_schema(args.url, s_main)
    with tempfile.TemporaryDirectory() as d:
        dump = os.path.join(d, "ring.json")
        here = os.path.dirname(os.path.abspath(__file__))
        subprocess.run(
            [
                sys.executable,
                os.path.join(here, "old_code.py"),
                args.ring_src,
                os.path.abspath(__file__),
                "--url",
                args.url,
                "--make-ring",
                ",".join(s.values()),
                dump,
            ],
            check=True,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        )
        with open(dump) as f:
            qr = json.load(f)
    admin = psycopg.connect(args.url, autocommit=True)
    try:
        _measure(args, admin, s_main, s, qm, qr)
    finally:
        for name in (s_main, *s.values()):
            admin.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        admin.close()


def _measure(
    args: argparse.Namespace,
    admin: psycopg.Connection[Any],
    s_main: str,
    s: dict[str, str],
    qm: dict[str, str],
    qr: dict[str, dict[str, str]],
) -> None:
    if "det2" in s:
        for k in range(1, 8):
            admin.execute(
                f'ALTER TABLE "{s["det2"]}".alk_jobs DETACH PARTITION "{s["det2"]}".alk_jobs_p{k}'
            )
    if "alone1" in s:
        admin.execute(
            f'ALTER TABLE "{s["alone1"]}".alk_jobs DETACH PARTITION "{s["alone1"]}".alk_jobs_p0'
        )
        admin.execute(f'ALTER TABLE "{s["alone1"]}".alk_jobs_p0 DROP CONSTRAINT alk_jobs_keyed')
    for kind in ("slim1", "slim2"):  # p0 and p1 as plain tables with the plain rows' indexes
        if kind in s:
            for k in (0, 1):
                admin.execute(
                    f'ALTER TABLE "{s[kind]}".alk_jobs DETACH PARTITION "{s[kind]}".alk_jobs_p{k}'
                )
                admin.execute(
                    f'ALTER TABLE "{s[kind]}".alk_jobs_p{k} DROP CONSTRAINT alk_jobs_keyed'
                )
                for (index,) in admin.execute(
                    "SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = %s::regclass"
                    " AND (indexrelid::regclass::text ~ '(dedupe|debounce|partition_key)')",
                    (f'"{s[kind]}".alk_jobs_p{k}',),
                ).fetchall():
                    admin.execute(f"DROP INDEX {index}")
    keep_p0 = ["alk_jobs_keep", "alk_jobs_p0"]
    make = {
        "ring9": lambda q, _: q,
        "det2": lambda q, _: q,
        "lit2": lambda q, _: literal_parts(q, "-1, 0"),
        "param2": lambda q, _: literal_parts(q, "%(parts)s"),
        "direct2": lambda q, name: direct(q, name, keep_p0),
        "direct2g": lambda q, name: direct(q, name, keep_p0, gated=True),
        "direct1": lambda q, name: direct(q, name, ["alk_jobs_p0"]),
        "alone1": lambda q, name: direct(q, name, ["alk_jobs_p0"]),
        "slim1": lambda q, name: direct(q, name, ["alk_jobs_p0"]),
        "slim2": lambda q, name: direct(q, name, ["alk_jobs_p1", "alk_jobs_p0"]),
    }
    if args.no_arms:
        from claim_in_wake import variants

        qm["claim"] = variants(qm["claim"], s_main)["neither"]
        for name in s.values():
            qr[name]["claim"] = variants(qr[name]["claim"], name)["neither"]
    layouts = {"main": qm} | {k: make[k](qr[name], name) for k, name in s.items()}
    session = SESSION + (("SET synchronous_commit TO off",) if args.async_commit else ())
    if os.environ.get("RS_CUSTOM"):  # a diagnosis: plan at every run
        session += ("SET plan_cache_mode TO force_custom_plan",)
    runs = [Layout(name, args.url, q, session) for name, q in layouts.items()]
    try:
        if args.locks or args.explain:
            for lay in runs:
                if os.environ.get("RS_PLAN"):
                    lay.generic_plan()
                else:
                    lay.locks() if args.locks else lay.explain()
            return
        for r in range(args.rounds + 1):
            order = runs[r % len(runs) :] + runs[: r % len(runs)]
            for lay in order:
                got = lay.round()
                if r:
                    for k, v in got.items():
                        lay.times[k].append(v)
        base = {k: statistics.median(runs[0].times[k]) for k in KINDS}
        print(
            f"per statement, median over {args.rounds} rounds of each round's median (µs; x main)"
        )
        print("  " + " " * 9 + "".join(f"{k:>20s}" for k in KINDS))
        for lay in runs:
            cells = []
            for k in KINDS:
                m = statistics.median(lay.times[k])
                cells.append(f"{m * 1e6:9.0f} ({m / base[k]:4.2f}x)")
            print(f"  {lay.name:9s}" + "".join(f"{c:>20s}" for c in cells))
    finally:
        for lay in runs:
            lay.conn.close()


if __name__ == "__main__":
    main()
