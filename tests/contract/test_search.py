"""Job search (core/filters.py, Admin.find): one filter language, the same rows on both engines."""

from __future__ import annotations

import json

import pytest

import alkstore
from alkstore import EnqueueOpts, InvalidArgumentError, QueueOpts
from alkstore.core.filters import ArgTerm, JobFilter, TimeRange

from .conftest import Clock


def _call(task: str, **args: object) -> bytes:
    return json.dumps({"task": task, "args": args}).encode()


async def _ids(store: alkstore.Store, where: JobFilter | str) -> list[int]:
    page = await store.admin().find(where, limit=1000)
    return [j.id for j in page.jobs]


@pytest.fixture
async def jobs(store: alkstore.Store, qname: str) -> dict[str, int]:
    """One job of each kind in two queues: pending, delayed, processing, dead, not JSON."""
    a = store.queue(qname, QueueOpts(max_attempts=1))
    b = store.queue(qname + "-b")
    made = {
        "dead": await a.enqueue(_call("send", to="x@example.com", tags=["vip"], n=1)),
        "running": await a.enqueue(_call("send", to="y@example.com", tags=["low"], n=2)),
        "pending": await a.enqueue(_call("bill", to="z@example.com", tags=[], n=3, ok=True)),
        "delayed": await a.enqueue(_call("send", to="Q@Example.com"), EnqueueOpts(delay_s=3600)),
        "raw": await a.enqueue(b"\xff\xfe not json {"),
        "other": await b.enqueue(_call("send", to="x@example.com", tags=["vip"])),
    }
    first = await a.claim_one("worker-a")
    assert first is not None and first.job.id == made["dead"]
    assert await first.fail("SMTP Timeout after 30 s")
    running = await a.claim_one("worker-b")
    assert running is not None and running.job.id == made["running"]
    return made


async def test_each_term_narrows_the_search_the_same_way_on_both_engines(
    store: alkstore.Store, qname: str, jobs: dict[str, int]
) -> None:
    j = jobs
    assert await _ids(store, f"queue:{qname}") == sorted(
        [j["dead"], j["running"], j["pending"], j["delayed"], j["raw"]]
    )
    assert await _ids(store, f"queue:{qname},{qname}-b") == sorted(j.values())
    assert await _ids(store, "state:dead") == [j["dead"]]
    assert await _ids(store, "state:processing") == [j["running"]]
    assert await _ids(store, f"queue:{qname} state:pending") == [j["pending"], j["raw"]]
    assert await _ids(store, "state:delayed") == [j["delayed"]]
    assert await _ids(store, "state:dead,delayed") == [j["dead"], j["delayed"]]
    assert await _ids(store, "task:bill") == [j["pending"]]
    assert await _ids(store, f"task:send queue:{qname}") == [j["dead"], j["running"], j["delayed"]]
    assert await _ids(store, "args.to=x@example.com") == [j["dead"], j["other"]]
    assert await _ids(store, "args.n=2") == [j["running"]]
    assert await _ids(store, "'args.n=\"2\"'") == []  # a JSON string is not the number
    assert await _ids(store, "args.ok=true") == [j["pending"]]
    assert await _ids(store, "payload.task=bill") == [j["pending"]]
    assert await _ids(store, "args.tags~vip") == [j["dead"], j["other"]]  # an array element
    assert await _ids(store, "args.to~example.COM") == [  # a substring, any case
        j["dead"],
        j["running"],
        j["pending"],
        j["delayed"],
        j["other"],
    ]
    assert await _ids(store, "args.missing=1") == []
    assert await _ids(store, "error:timeout") == [j["dead"]]
    assert await _ids(store, "error:nothing-like-it") == []
    assert await _ids(store, "worker:worker-b") == [j["running"]]
    assert await _ids(store, "worker:worker-a") == [j["dead"]]  # a dead row keeps its last worker
    assert await _ids(store, f"queue:{qname} task:send args.tags~vip state:dead") == [j["dead"]]


async def test_a_payload_that_is_not_json_matches_no_json_term_and_breaks_no_search(
    store: alkstore.Store, qname: str, jobs: dict[str, int]
) -> None:
    assert jobs["raw"] not in await _ids(store, "args.to~e")
    assert jobs["raw"] not in await _ids(store, "task:send,bill")
    assert jobs["raw"] in await _ids(store, f"queue:{qname}")


async def test_time_ranges_read_created_run_at_and_died(
    store: alkstore.Store, clock: Clock, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(max_attempts=1))
    t0 = clock.now
    early = await q.enqueue(b"1")
    clock.advance(100)
    late = await q.enqueue(b"2", EnqueueOpts(delay_s=50))
    clock.advance(100)
    h = await q.claim_one("w")
    assert h is not None and h.job.id == early and await h.fail("boom")
    assert await _ids(store, JobFilter(times=(TimeRange("created", since=t0 + 50),))) == [late]
    assert await _ids(store, JobFilter(times=(TimeRange("created", until=t0 + 50),))) == [early]
    run_late = JobFilter(times=(TimeRange("run_at", since=t0 + 120, until=t0 + 170),))
    assert await _ids(store, run_late) == [late]
    assert await _ids(store, JobFilter(times=(TimeRange("died", since=t0 + 150),))) == [early]
    assert await _ids(store, JobFilter(times=(TimeRange("died", until=t0 + 150),))) == []


async def test_pages_are_keyset_pages_that_never_repeat_or_skip(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(max_attempts=1))
    ids = await q.enqueue_many([_call("t", i=i) for i in range(25)])
    for _ in range(5):  # some dead, some live: one page spans both tables
        h = await q.claim_one("w")
        assert h is not None and await h.fail("x")
    admin = store.admin()
    seen: list[int] = []
    after = None
    pages = 0
    while True:
        page = await admin.find(f"queue:{qname}", after=after, limit=10)
        seen += [j.id for j in page.jobs]
        pages += 1
        if page.after is None:
            break
        after = page.after
        await q.enqueue(b"later")  # new jobs land after the cursor, never shift a page
    assert seen[:25] == ids
    assert len(seen) == len(set(seen))
    assert pages == 3
    states = {j.id: j.state for j in (await admin.find(f"queue:{qname}", limit=10)).jobs}
    assert sorted(states.values()) == ["dead"] * 5 + ["pending"] * 5


async def test_a_filter_value_is_equal_to_its_text_and_both_search_the_same(
    store: alkstore.Store, qname: str, jobs: dict[str, int]
) -> None:
    value = JobFilter(
        queues=(qname,),
        tasks=("send",),
        args=(ArgTerm(("args", "tags"), "contains", "vip"),),
    )
    assert await _ids(store, value) == await _ids(store, value.text()) == [jobs["dead"]]


@pytest.mark.parametrize(
    ("where", "named"),
    [
        ("state:done", "'done'"),
        ("colour:red", "'colour'"),
        ("queue:bad/name", "bad/name"),
        ("created>yesterday", "'yesterday'"),
        ("args.a.b=[1]", "[1]"),
        ("args.a$b=1", "a$b"),
        ("nonsense", "'nonsense'"),
        ("'unclosed", "unclosed"),
    ],
)
async def test_a_bad_filter_is_refused_naming_the_bad_value(
    store: alkstore.Store, where: str, named: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=named.replace("$", r"\$").replace("[", r"\[")):
        await store.admin().find(where)


async def test_bad_page_arguments_are_refused(store: alkstore.Store) -> None:
    admin = store.admin()
    for bad in ({"limit": 0}, {"limit": 1001}, {"after": -1}, {"after": "3"}):
        with pytest.raises(InvalidArgumentError):
            await admin.find("state:dead", **bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        await admin.find(42)  # type: ignore[arg-type]
