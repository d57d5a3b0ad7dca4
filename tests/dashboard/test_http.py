"""The dashboard over plain HTTP: mounting with an auth hook, bearer tokens, CSRF and
origin checks, /metrics, and the ``alkstore dashboard`` command."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.error
from typing import Any

import pytest
from starlette.requests import Request

import alkstore
from alkstore.bookkeeping import Bookkeeping
from tests.dashboard.conftest import ROOT, TOKEN, Serve, free_port
from tests.dashboard.conftest import http_get as _get
from tests.dashboard.conftest import http_post as _post


async def _dead(store: alkstore.Store, queue: str = "q") -> int:
    q = store.queue(queue)
    job_id = await q.enqueue(b"x")
    handle = await q.claim_one("w")
    assert handle is not None and await handle.fail("boom")
    return job_id


async def test_mounted_under_a_prefix_the_auth_hook_decides(
    store: alkstore.Store, serve: Serve
) -> None:
    job_id = await _dead(store)

    def staff_only(request: Request) -> bool:
        return request.headers.get("x-staff") == "yes"

    served = serve(auth=staff_only, mount="/ops/queues")
    status, body, headers = _get(served.url + "/ops/queues/")
    assert status == 200 and 'href="/ops/queues/dead"' in body
    csrf = headers["set-cookie"].split("alkstore_csrf=")[1].split(";")[0]
    assert "Path=/ops/queues" in headers["set-cookie"]
    cookie = {"Cookie": f"alkstore_csrf={csrf}"}
    form = {"csrf": csrf, "next": "/ops/queues/dead"}
    url = f"{served.url}/ops/queues/jobs/{job_id}/requeue"
    status, body = _post(url, form, cookie)
    assert status == 403 and "read-only" in body
    assert (await store.admin().find_job(job_id)).state == "dead"  # type: ignore[union-attr]
    status, _ = _post(url, form, {**cookie, "X-Staff": "yes"})
    assert status == 303
    assert (await store.admin().find_job(job_id)).state == "pending"  # type: ignore[union-attr]


async def test_bearer_token_acts_and_a_wrong_one_or_a_foreign_origin_is_refused(
    store: alkstore.Store, serve: Serve
) -> None:
    job_id = await _dead(store)
    served = serve(token=TOKEN)
    url = f"{served.url}/jobs/{job_id}/requeue"
    assert _post(url, {}, {"Authorization": "Bearer wrong-token-xxxxxxxx"})[0] == 403
    for origin in ("http://evil.example", "null"):
        foreign = {"Authorization": f"Bearer {TOKEN}", "Origin": origin}
        status, body = _post(url, {}, foreign)
        assert status == 403 and "cross-origin" in body
    assert (await store.admin().find_job(job_id)).state == "dead"  # type: ignore[union-attr]
    status, _ = _post(url, {"next": "https://evil.example/"}, {"Authorization": f"Bearer {TOKEN}"})
    assert status == 303  # done, and redirected home rather than off-site
    assert (await store.admin().find_job(job_id)).state == "pending"  # type: ignore[union-attr]


async def test_without_a_token_or_hook_every_action_is_refused(
    store: alkstore.Store, serve: Serve
) -> None:
    job_id = await _dead(store)
    served = serve()
    status, body, headers = _get(served.url + f"/jobs/{job_id}")
    assert status == 200 and "disabled" in body
    assert "script-src 'self'" in headers["content-security-policy"]
    csrf = headers["set-cookie"].split("alkstore_csrf=")[1].split(";")[0]
    cookie = {"Cookie": f"alkstore_csrf={csrf}"}
    for path in (f"/jobs/{job_id}/requeue", f"/jobs/{job_id}/cancel", "/requeue"):
        status, _ = _post(served.url + path, {"csrf": csrf, "id": str(job_id)}, cookie)
        assert status == 403, path
    assert _get(served.url + f"/jobs/{job_id}/requeue")[0] == 405  # never a GET
    assert (await store.admin().find_job(job_id)).state == "dead"  # type: ignore[union-attr]


async def test_dashboard_metrics_and_json_show_the_queues(
    store: alkstore.Store, serve: Serve
) -> None:
    await store.queue("m").enqueue_many([b"a", b"b"])
    await _dead(store, "m")
    await Bookkeeping(store).report_worker("w-1", "h", 1, ["m"], 2, 0)
    served = serve()
    status, text, headers = _get(served.url + "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    assert 'alkstore_queue_jobs{queue="m",state="pending"} 2.0' in text
    assert 'alkstore_queue_jobs{queue="m",state="dead"} 1.0' in text
    assert 'alkstore_workers{state="alive"} 1.0' in text
    assert "alkstore_queue_oldest_pending_age_seconds{queue=" in text
    status, body, _ = _get(served.url + "/api/overview")
    assert status == 200 and '"queue": "m"' in body.replace('":"', '": "')


async def test_the_overview_shows_a_queues_pause_and_limits(
    store: alkstore.Store, serve: Serve
) -> None:
    paused, limited, plain = store.queue("held"), store.queue("capped"), store.queue("free")
    for q in (paused, limited, plain):
        await q.enqueue(b"x")
    await paused.pause()
    await limited.set_limits(concurrency=3, partition_concurrency=1, rate="10/s")
    served = serve()
    status, body, _ = _get(served.url + "/")
    assert status == 200
    rows = {r.split("</a>")[0].rsplit(">", 1)[1]: r for r in body.split("<tr>")[2:]}
    assert 'data-col="flow"><span class="bad">paused</span>' in rows["held"]
    assert "concurrency 3 · 1 per partition · rate 10/s" in rows["capped"]
    assert "paused" not in rows["capped"] and "concurrency" not in rows["free"]
    status, text, _ = _get(served.url + "/api/overview")
    queues = {q["queue"]: q for q in json.loads(text)["queues"]}
    assert queues["held"]["paused"] is True and queues["free"]["paused"] is False
    assert queues["capped"]["concurrency"] == 3 and queues["capped"]["rate"] == "10/s"


async def test_the_overview_shows_a_queues_fairness_and_aging(
    store: alkstore.Store, serve: Serve
) -> None:
    fair, plain = store.queue("tenants"), store.queue("free")
    await fair.enqueue(b"x", alkstore.EnqueueOpts(partition_key="acme"))
    await plain.enqueue(b"y")
    await fair.set_fair(weights={"acme": 2})
    await fair.set_aging(30)
    served = serve()
    status, body, _ = _get(served.url + "/")
    assert status == 200
    rows = {r.split("</a>")[0].rsplit(">", 1)[1]: r for r in body.split("<tr>")[2:]}
    assert "fair (1 weighted) · aging 30s" in rows["tenants"]
    assert "fair" not in rows["free"] and "aging" not in rows["free"]
    status, text, _ = _get(served.url + "/api/overview")
    queues = {q["queue"]: q for q in json.loads(text)["queues"]}
    assert (queues["tenants"]["fair"], queues["tenants"]["weights"]) == (True, 1)
    assert queues["tenants"]["aging_s"] == 30.0 and queues["free"]["fair"] is False
    assert queues["free"]["concurrency"] is None


async def test_a_job_page_shows_its_dedupe_key_and_once_finished_its_kept_result(
    store: alkstore.Store, serve: Serve
) -> None:
    q = store.queue("r")
    job_id = await q.enqueue(b"x", alkstore.EnqueueOpts(dedupe_key="order-<42>"))
    served = serve()
    status, body, _ = _get(served.url + f"/jobs/{job_id}")
    assert status == 200 and "order-&lt;42&gt;" in body  # shown, escaped
    handle = await q.claim_one("w")
    assert handle is not None and await handle.ack_result({"total": "<b>7</b>"}, 3600)
    status, body, _ = _get(served.url + f"/jobs/{job_id}")
    assert status == 200 and 'id="result"' in body and "success" in body
    assert "&lt;b&gt;7&lt;/b&gt;" in body and "<b>7</b>" not in body


async def test_a_job_page_shows_its_partition_key_live_and_dead(
    store: alkstore.Store, serve: Serve
) -> None:
    q = store.queue("tenants")
    job_id = await q.enqueue(b"x", alkstore.EnqueueOpts(partition_key="acme-<1>"))
    served = serve()
    status, body, _ = _get(served.url + f"/jobs/{job_id}")
    assert status == 200 and "partition key" in body
    assert "<code>acme-&lt;1&gt;</code>" in body  # shown, escaped
    handle = await q.claim_one("w")
    assert handle is not None and await handle.fail("boom")
    status, body, _ = _get(served.url + f"/jobs/{job_id}")
    assert status == 200 and "<code>acme-&lt;1&gt;</code>" in body


async def test_a_blocked_jobs_page_links_to_its_workflow_graph(
    store: alkstore.Store, serve: Serve
) -> None:
    q = store.queue("r")
    parent = await q.enqueue(b"p")
    child = await q.enqueue(b"c", alkstore.EnqueueOpts(after=(parent,)))
    served = serve()
    status, body, _ = _get(served.url + f"/jobs/{child}")
    assert status == 200 and "blocked" in body and f'href="/flows/{child}"' in body
    status, body, _ = _get(served.url + f"/flows/{child}")
    assert status == 200 and f"/jobs/{parent}" in body


async def test_bad_lookups_get_clear_pages(store: alkstore.Store, serve: Serve) -> None:
    served = serve()
    assert _get(served.url + "/jobs?id=abc")[0] == 400
    assert _get(served.url + "/jobs/99999")[0] == 404
    status, body, _ = _get(served.url + "/queues/bad%20name")
    assert status == 400 and "bad name" in body
    assert _get(served.url + "/queues/q?state=weird")[0] == 400


def test_dashboard_command_serves_on_loopback(target: Any, tmp_path: Any) -> None:
    port = free_port()
    args = [sys.executable, "-m", "alkstore", "--url", target.url, "--schema", target.schema]
    short = subprocess.run(
        [*args, "dashboard", "--token", "short"], cwd=ROOT, capture_output=True, text=True
    )
    assert short.returncode == 2 and "at least 8" in short.stderr
    proc = subprocess.Popen(
        [*args, "dashboard", "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                status, body, _ = _get(f"http://127.0.0.1:{port}/")
                break
            except urllib.error.URLError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail(f"dashboard did not start: {proc.stderr.read()!r}")  # type: ignore[union-attr]
                time.sleep(0.1)
        assert status == 200 and "read-only" in body
        rebound = _get(f"http://127.0.0.1:{port}/", {"Host": f"evil.example:{port}"})
        assert rebound[0] == 400  # another Host name: refused (DNS rebinding)
    finally:
        proc.terminate()
        proc.wait(30)
    assert b"read-only (no --token)" in proc.stderr.read()  # type: ignore[union-attr]


async def test_the_health_page_and_its_gauges_show_the_doctors_findings(
    store: alkstore.Store, serve: Serve
) -> None:
    """#26: /health lists ``alkstore doctor``'s findings (a silent worker needs action
    at the default 30 s only after a while, so a lapsed claim is what is shown) and
    /metrics carries the numeric facts."""
    from alkstore.core.options import QueueOpts

    queue = store.queue("slow", QueueOpts(visibility_timeout_s=0.01))
    await queue.enqueue(b"x")
    assert await queue.claim_one("w") is not None
    while not (await store.admin().health()).facts.overdue:  # the 10 ms claim lapses
        await asyncio.sleep(0.01)
    served = serve()
    status, page, _ = _get(served.url + "/health")
    assert status == 200, page
    assert 'href="/health" class=on>Health</a>' in page
    assert "claims past deadline" in page and "<code>slow</code>" in page
    assert "migration" in page and "schema version" in page
    status, text, _ = _get(served.url + "/metrics")
    assert status == 200
    assert 'alkstore_claims_past_deadline{queue="slow"} 1.0' in text
    assert "alkstore_oldest_xmin_age_seconds" in text
    if store.engine_name == "postgres":
        assert 'alkstore_table_dead_rows{table="alk_jobs"}' in text
