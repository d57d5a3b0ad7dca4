"""``alkstore queues fair`` and ``alkstore queues aging`` on every engine."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import alkstore
from tests.acceptance.conftest import run_cli


async def test_queues_fair_and_aging_store_the_settings_and_say_so(
    store: alkstore.Store, target: Any
) -> None:
    q = store.queue("tenants")
    await q.enqueue(b"x", alkstore.EnqueueOpts(partition_key="acme"))
    on = await asyncio.to_thread(
        run_cli, target, "queues", "fair", "tenants", "--weight", "acme=3", "--weight", "b=0.5"
    )
    assert on.returncode == 0, on.stderr
    assert "fair across partition keys (weights acme=3, b=0.5)" in on.stdout
    assert (await q.settings()).fair and await q.fair_weights() == {"acme": 3.0, "b": 0.5}
    kept = await asyncio.to_thread(run_cli, target, "queues", "fair", "tenants")
    assert "weights acme=3" in kept.stdout  # no --weight: the stored ones stay
    off = await asyncio.to_thread(run_cli, target, "queues", "fair", "tenants", "--off")
    assert off.returncode == 0 and "fairness off" in off.stdout
    assert not (await q.settings()).fair
    aging = await asyncio.to_thread(run_cli, target, "queues", "aging", "tenants", "30")
    assert aging.returncode == 0 and "per 30s" in aging.stdout
    assert (await q.settings()).aging_s == 30.0
    await asyncio.to_thread(run_cli, target, "queues", "aging", "tenants", "off")
    assert (await q.settings()).aging_s is None


async def test_bad_fair_and_aging_input_is_one_line_naming_it(target: Any) -> None:
    for args, named in [
        (("queues", "fair", "q", "--weight", "acme"), "acme"),
        (("queues", "fair", "q", "--weight", "acme=lots"), "acme=lots"),
        (("queues", "fair", "q", "--weight", "acme=-1"), "acme"),
        (("queues", "aging", "q", "soon"), "soon"),
        (("queues", "aging", "q", "0"), "aging_s"),
    ]:
        done = await asyncio.to_thread(run_cli, target, *args)
        assert done.returncode != 0 and named in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr


async def test_queues_list_shows_fairness_weights_and_aging(
    store: alkstore.Store, target: Any
) -> None:
    fair, plain = store.queue("tenants"), store.queue("plainq")
    await fair.enqueue(b"x", alkstore.EnqueueOpts(partition_key="acme"))
    await plain.enqueue(b"y")
    await fair.set_fair(weights={"acme": 3, "b": 0.5})
    await fair.set_aging(30)
    listed = await asyncio.to_thread(run_cli, target, "queues", "list")
    assert listed.returncode == 0, listed.stderr
    header = next(line for line in listed.stdout.splitlines() if "pending" in line)
    names = [c.strip() for c in header.split("┃")[1:-1]]
    rows = {
        cells[0]: dict(zip(names, cells, strict=True))
        for line in listed.stdout.splitlines()
        if line.startswith("│")
        for cells in [[c.strip() for c in line.split("│")[1:-1]]]
    }
    assert (rows["tenants"]["fair"], rows["tenants"]["aging"]) == ("fair, 2 weights", "30s")
    assert (rows["plainq"]["fair"], rows["plainq"]["aging"]) == ("-", "-")
    as_json = await asyncio.to_thread(run_cli, target, "queues", "list", "--json")
    by_name = {q["queue"]: q for q in json.loads(as_json.stdout)}
    assert by_name["tenants"] | {"fair": True, "weights": 2, "aging_s": 30.0} == by_name["tenants"]
    assert (by_name["plainq"]["fair"], by_name["plainq"]["aging_s"]) == (False, None)
