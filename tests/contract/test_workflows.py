"""Workflows (alkstore.workflows): whole graphs enqueued atomically, the canvas on tasks."""

from __future__ import annotations

from typing import Any

import pytest

import alkstore
from alkstore.errors import DependencyError, InvalidArgumentError
from alkstore.workflows import Graph, batch, chain, chord, group, parent_results


async def _drain(store: alkstore.Store, *queues: str, fail: set[int] = frozenset()) -> list[int]:  # type: ignore[assignment]
    """Run everything claimable in ``queues`` until nothing is (fail the ids in
    ``fail``); the ids in the order they were claimed."""
    order: list[int] = []
    progress = True
    while progress:
        progress = False
        for name in queues:
            q = store.queue(name)
            while (handle := await q.claim_one("w")) is not None:
                progress = True
                order.append(handle.job.id)
                if handle.job.id in fail:
                    assert await handle.fail("boom")
                else:
                    assert await handle.ack_result({"from": handle.job.id}, keep_s=60)
    return order


async def test_a_graph_is_enqueued_at_once_and_runs_in_edge_order(
    store: alkstore.Store, qname: str
) -> None:
    g = Graph()
    a = g.add(qname, "a")
    b1 = g.add(qname + "x", "b1", after=[a])
    b2 = g.add(qname, "b2", after=[a])
    c = g.add(qname, "c", after=[b1, b2])
    ids = await g.enqueue(store)
    assert len(ids) == 4
    states = [(await store.admin().find_job(i)).state for i in ids]  # type: ignore[union-attr]
    assert states == ["pending", "blocked", "blocked", "blocked"]
    order = await _drain(store, qname, qname + "x")
    assert order[0] == ids[a.index] and order[-1] == ids[c.index]
    assert set(order[1:3]) == {ids[b1.index], ids[b2.index]}
    # results flow along edges: c's parents were b1 and b2 (read before c finished above,
    # their results are kept; here after, they may still be read until purged)


async def test_a_bad_parent_anywhere_writes_none_of_the_graph(
    store: alkstore.Store, qname: str
) -> None:
    g = Graph()
    a = g.add(qname, "a")
    g.add(qname, "b", after=[a])
    g.add(qname, "c", after=[a, 999_999])
    with pytest.raises(DependencyError, match="999999"):
        await g.enqueue(store)
    assert await store.queue(qname).claim_one("w") is None
    with pytest.raises(InvalidArgumentError, match="earlier node"):
        Graph().add(qname, "x", after=[a])  # a node of another graph


async def test_a_graph_in_a_rolled_back_transaction_leaves_nothing(
    store: alkstore.Store, qname: str
) -> None:
    g = Graph()
    g.add(qname, "b", after=[g.add(qname, "a")])
    with pytest.raises(RuntimeError):
        async with store.transaction() as tx:
            await g.enqueue_in(tx)
            raise RuntimeError("rollback")
    assert await store.queue(qname).claim_one("w") is None
    async with store.transaction() as tx:
        ids = await g.enqueue_in(tx)
    assert await _drain(store, qname) == ids


async def test_the_canvas_chain_group_chord_and_batch(store: alkstore.Store, target: Any) -> None:
    app = alkstore.App(target.url, **target.connect_kwargs())

    @app.task(queue="steps", keep_result_s=60)
    def step(n: int) -> int:
        return n

    @app.task(queue="callbacks", max_attempts=1)
    def done(label: str) -> None: ...

    run = await chain(step.s(1), group(step.s(2), step.s(3)), done.s("all")).defer(store)
    assert len(run.ids) == 4 and run.last == [run.ids[3]]
    order = await _drain(store, "steps", "callbacks")
    assert order[0] == run.ids[0] and order[3] == run.ids[3]
    assert set(order[1:3]) == set(run.ids[1:3])  # the group's two, in either order
    found = await store.admin().find_job(run.ids[3])
    assert found is None  # the callback ran and was acked

    # a chord whose header has a dead member: on_success is dead-lettered, on_complete runs
    flow = batch([step.s(10), step.s(11)], on_success=done.s("ok"), on_complete=done.s("finally"))
    run = await flow.defer(store)
    member, _, on_success, on_complete = run.ids
    order = await _drain(store, "steps", "callbacks", fail={member})
    assert on_complete in order and on_success not in order
    dead = await store.admin().find_job(on_success)
    assert dead is not None and dead.state == "dead"
    assert dead.last_error == f"dependency {member} died: boom"

    run = await chord([step.s(20), step.s(21)], done.s("sum")).defer(store)
    callback = run.last[0]
    first = await store.queue("steps").claim_one("w")
    assert first is not None and await first.ack_result(20, keep_s=60)
    results = await parent_results(store, callback, "callbacks")
    assert results == {first.job.id: 20}
    await app.close()
