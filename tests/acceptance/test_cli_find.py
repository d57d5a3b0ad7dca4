"""``alkstore jobs find`` / ``jobs bulk`` / ``bulk-resume`` / ``actions`` as subprocesses (#26)."""

from __future__ import annotations

import json

import alkstore
from alkstore.core.options import QueueOpts
from tests.acceptance.conftest import run_cli
from tests.conftest import Target


async def _dead(store: alkstore.Store, n: int) -> list[int]:
    q = store.queue("mail", QueueOpts(max_attempts=1))
    ids = await q.enqueue_many(
        [json.dumps({"task": "send", "args": {"to": f"u{i}@x"}}).encode() for i in range(n)]
    )
    for h in await q.claim_batch("w", n):
        assert await h.fail("smtp timeout")
    return ids


async def test_find_pages_with_after_and_prints_json(target: Target, store: alkstore.Store) -> None:
    ids = await _dead(store, 5)
    out = run_cli(target, "jobs", "find", "queue:mail", "state:dead", "--limit", "3", "--json")
    assert out.returncode == 0, out.stderr
    page = json.loads(out.stdout)
    assert [j["id"] for j in page["jobs"]] == ids[:3] and page["next_after"] == ids[2]
    out = run_cli(target, "jobs", "find", "queue:mail", "--after", str(ids[2]), "--json")
    assert [j["id"] for j in json.loads(out.stdout)["jobs"]] == ids[3:]
    out = run_cli(target, "jobs", "find", "args.to=u1@x", "--json")
    assert [j["id"] for j in json.loads(out.stdout)["jobs"]] == [ids[1]]
    table = run_cli(target, "jobs", "find", "queue:mail", "--limit", "2")
    assert table.returncode == 0 and f"--after {ids[1]}" in table.stdout


async def test_bulk_is_a_dry_run_unless_yes_and_is_audited(
    target: Target, store: alkstore.Store
) -> None:
    ids = await _dead(store, 7)
    dry = run_cli(target, "jobs", "bulk", "retry", "queue:mail", "error:timeout")
    assert dry.returncode == 0, dry.stderr
    assert "would touch 7 job(s)" in dry.stdout and "nothing changed" in dry.stdout
    assert (await store.admin().bulk().preview("retry", "queue:mail")).count == 7
    done = run_cli(
        target, "jobs", "bulk", "retry", "queue:mail", "--yes", "--batch", "2", "--actor", "ops"
    )
    assert done.returncode == 0, done.stderr
    assert "7/7 (done)" in done.stdout
    states = {j.state for j in (await store.admin().find("queue:mail")).jobs}
    assert states == {"pending"} and len(ids) == 7
    audit = json.loads(run_cli(target, "jobs", "actions", "--json").stdout)
    assert [(a["actor"], a["action"], a["done"], a["filter"]) for a in audit] == [
        ("ops", "retry", 7, "queue:mail")
    ]
    again = run_cli(target, "jobs", "bulk-resume", str(audit[0]["id"]), "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["done"] == 7


def test_bad_input_is_one_line_and_exit_2(target: Target) -> None:
    assert run_cli(target, "migrate").returncode == 0
    for args in (
        ["jobs", "find", "state:finished"],
        ["jobs", "find", "colour:red"],
        ["jobs", "bulk", "retry"],  # no terms: refused
        ["jobs", "bulk", "move", "queue:a"],  # no --to
        ["jobs", "bulk", "retry", "queue:a", "--yes", "--dry-run"],
    ):
        out = run_cli(target, *args)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert "Traceback" not in out.stderr and out.stderr.strip().startswith(("Error", "Usage"))
    out = run_cli(target, "jobs", "bulk-resume", "99")
    assert out.returncode == 1 and "no bulk action 99" in out.stderr
