"""``alkstore flows show`` and ``flows counts`` on every engine."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import alkstore
from alkstore import QueueOpts
from alkstore.workflows import Graph
from tests.acceptance.conftest import run_cli


async def test_flows_show_draws_the_tree_with_states_and_counts_a_batch(
    store: alkstore.Store, target: Any
) -> None:
    g = Graph()
    a = g.add("steps", "a", queue_opts=QueueOpts(max_attempts=1))
    b = g.add("steps", "b", after=[a])
    c = g.add("steps", "c", after=[a])
    done = g.add("callbacks", "done", after=[b, c], policy="complete")
    ids = await g.enqueue(store)
    handle = await store.queue("steps").claim_one("w")
    assert handle is not None and handle.job.id == ids[a.index]
    shown = await asyncio.to_thread(run_cli, target, "flows", "show", str(ids[b.index]))
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == f"#{ids[0]} steps processing"
    assert lines[1] == f"  * #{ids[1]} steps blocked"
    assert lines[2] == f"    #{ids[3]} callbacks blocked (runs anyway)"
    assert lines[3] == f"  #{ids[2]} steps blocked"
    assert lines[4] == f"    #{ids[3]} callbacks blocked (runs anyway) (above)"

    assert await handle.fail("boom")  # b and c die with it; the callback runs anyway
    got = await asyncio.to_thread(run_cli, target, "flows", "show", str(ids[3]), "--json")
    data = json.loads(got.stdout)
    states = {n["id"]: n["state"] for n in data["nodes"]}
    assert states == {ids[0]: "dead", ids[1]: "dead", ids[2]: "dead", ids[3]: "pending"}
    counts = await asyncio.to_thread(run_cli, target, "flows", "counts", str(ids[done.index]))
    assert counts.returncode == 0 and counts.stdout.strip() == f"#{ids[3]}: 2 job(s): dead 2"


async def test_flows_of_no_job_is_one_line(store: alkstore.Store, target: Any) -> None:
    cases = [(("flows", "show", "424242"), "no job 424242"), (("flows", "counts", "x"), "'x'")]
    for args, text in cases:
        done = await asyncio.to_thread(run_cli, target, *args)
        assert done.returncode != 0 and text in done.stderr and "Traceback" not in done.stderr
