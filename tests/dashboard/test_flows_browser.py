"""The workflow page in a real browser on both engines: the graph of a running
workflow, each job coloured by its state; a screenshot is kept (tests/dashboard/artefacts/)."""

from __future__ import annotations

from typing import Any

import alkstore
from alkstore import QueueOpts
from alkstore.dashboard.flows import STATE_COLOURS
from alkstore.workflows import Graph
from tests.dashboard.conftest import TOKEN, Serve


async def test_the_workflow_page_draws_the_graph_with_each_jobs_state(
    store: alkstore.Store, serve: Serve, page: Any, shot: Any
) -> None:
    g = Graph()
    once = QueueOpts(max_attempts=1)
    extract = g.add("etl", "extract")
    clean = g.add("etl", "clean", after=[extract], queue_opts=once)
    enrich = g.add("etl", "enrich", after=[extract])
    load = g.add("etl", "load", after=[clean, enrich])
    report = g.add("reports", "report", after=[load], policy="complete")
    ids = await g.enqueue(store)
    q = store.queue("etl")
    first = await q.claim_one("w")
    assert first is not None and await first.ack_result({"rows": 3}, keep_s=600)
    doomed, running = await q.claim_batch("w", 2)
    assert {doomed.job.id, running.job.id} == {ids[clean.index], ids[enrich.index]}
    if doomed.job.id != ids[clean.index]:
        doomed, running = running, doomed
    assert await doomed.fail("ValueError: <b>bad</b> row")  # takes `load` down with it

    served = serve(token=TOKEN)
    await page.goto(f"{served.url}/flows/{ids[enrich.index]}")
    await page.wait_for_selector("svg.flow")
    states = {}
    for node in await page.locator("svg.flow g.node").all():
        states[int(await node.get_attribute("data-id"))] = await node.get_attribute("data-state")
    assert states == {
        ids[extract.index]: "succeeded",
        ids[clean.index]: "dead",
        ids[enrich.index]: "processing",
        ids[load.index]: "dead",
        ids[report.index]: "pending",  # its only parent died: it runs anyway
    }
    fill = await page.locator(f"g.node[data-id='{ids[load.index]}'] rect").get_attribute("fill")
    assert fill == STATE_COLOURS["dead"]
    assert await page.locator("svg.flow path.edge").count() == 5
    dashed = page.locator(f"path.edge[data-child='{ids[report.index]}']")
    assert await dashed.get_attribute("stroke-dasharray") == "5,4"  # runs anyway
    errors = await page.locator("ul.flow-dead").inner_text()
    assert "<b>bad</b> row" in errors  # text, never markup
    assert f"dependency {ids[clean.index]} died" in errors
    await shot(page, "workflow")
    await page.goto(f"{served.url}/flows/{ids[load.index]}")  # a callback's counts
    counts = await page.locator("#flow-counts").inner_text()
    assert counts == f"job {ids[load.index]} waits for 2 job(s): dead 1, processing 1"
    await page.goto(f"{served.url}/flows/{ids[enrich.index]}")
    await page.click(f"g.node[data-id='{ids[clean.index]}']")
    await page.wait_for_url(f"**/jobs/{ids[clean.index]}")
    assert await page.locator("#job-state").inner_text() == "dead"
