"""What the pages show: large payloads, results and errors cut to a preview (the whole
fetched apart), a pending job not yet due shown as ``delayed``, dead letters in
keyset pages."""

from __future__ import annotations

import html
import json
import re

import alkstore
from alkstore.dashboard.html import PREVIEW_CHARS
from tests.dashboard.conftest import Serve, http_get

BIG = 300_000  # far past the preview, well under any store limit


async def test_a_large_payload_and_error_are_cut_on_the_pages_and_served_whole_apart(
    store: alkstore.Store, serve: Serve
) -> None:
    q = store.queue("big")
    payload = json.dumps({"task": "files.store", "args": {"blob": "x" * BIG}}).encode()
    error = "RuntimeError: disk full\n" + "  File 'store.py', line 9\n" * (BIG // 25)
    job_id = await q.enqueue(payload)
    handle = await q.claim_one("w")
    assert handle is not None and await handle.fail(error)
    served = serve()
    for path in (f"/jobs/{job_id}", "/dead", "/queues/big", "/queues/big?state=dead"):
        status, body, _ = http_get(served.url + path)
        assert status == 200 and len(body) < 6 * PREVIEW_CHARS, (path, len(body))
    status, body, _ = http_get(served.url + f"/jobs/{job_id}")
    assert f"of {len(payload) / 1024:.1f} KB shown" in body  # the payload's size
    assert f"of {len(error) / 1024:.1f} KB shown" in body  # the error's
    assert "files.store" in body and "RuntimeError: disk full" in body
    assert f'href="/api/jobs/{job_id}/payload"' in body
    assert f'href="/api/jobs/{job_id}/error"' in body
    status, whole, headers = http_get(served.url + f"/api/jobs/{job_id}/payload")
    assert status == 200 and headers["content-type"] == "application/json"
    assert whole.encode() == payload
    status, whole, headers = http_get(served.url + f"/api/jobs/{job_id}/error")
    assert status == 200 and json.loads(whole) == error
    assert http_get(served.url + f"/api/jobs/{job_id}/result")[0] == 404
    assert http_get(served.url + f"/api/jobs/{job_id}/nothing")[0] == 404


async def test_a_large_kept_result_is_cut_and_served_whole_apart(
    store: alkstore.Store, serve: Serve
) -> None:
    q = store.queue("big")
    job_id = await q.enqueue(b"small")
    handle = await q.claim_one("w")
    value = {"rows": ["<b>row</b>"] * (BIG // 10)}
    assert handle is not None and await handle.ack_result(value, 3600)
    served = serve()
    status, body, _ = http_get(served.url + f"/jobs/{job_id}")
    assert status == 200 and len(body) < 6 * PREVIEW_CHARS
    assert 'id="result"' in body and "&lt;b&gt;row&lt;/b&gt;" in body and "<b>row" not in body
    status, whole, headers = http_get(served.url + f"/api/jobs/{job_id}/result")
    assert status == 200 and headers["content-type"] == "application/json"
    assert json.loads(whole) == value


async def test_small_values_are_shown_whole_without_a_cut(
    store: alkstore.Store, serve: Serve
) -> None:
    job_id = await store.queue("small").enqueue({"n": 1})
    served = serve()
    status, body, _ = http_get(served.url + f"/jobs/{job_id}")
    assert status == 200 and "shown:" not in body and "&quot;n&quot;: 1" in body


async def test_a_pending_job_not_yet_due_is_shown_delayed(
    store: alkstore.Store, serve: Serve
) -> None:
    q = store.queue("later")
    due = await q.enqueue(b"now")
    later = await q.enqueue(b"in an hour", alkstore.EnqueueOpts(delay_s=3600))
    stats = {s.queue: s for s in await store.admin().stats()}["later"]
    assert (stats.pending, stats.delayed) == (1, 1)  # the same split as the pages
    served = serve()
    status, body, _ = http_get(served.url + "/queues/later")
    assert status == 200
    rows = {int(r.split('"', 1)[0]): r for r in body.split('<tr data-job="')[1:]}
    assert '<span class="state pending">pending</span>' in rows[due]
    assert '<span class="state delayed">delayed</span>' in rows[later]
    status, body, _ = http_get(served.url + f"/jobs/{later}")
    assert 'id="job-state">delayed</span>' in body and "delayed: due" in body
    status, body, _ = http_get(served.url + f"/jobs/{due}")
    assert 'id="job-state">pending</span>' in body


def _link(body: str, rel: str) -> str | None:
    found = re.search(rf'<a href="([^"]+)" rel="{rel}">', body)
    return None if found is None else html.unescape(found.group(1))


def _shown(body: str) -> list[int]:
    return [int(r.split('"', 1)[0]) for r in body.split('<tr data-job="')[1:]]


async def test_dead_letters_are_paged_by_id_with_next_and_previous_links(
    store: alkstore.Store, serve: Serve
) -> None:
    dead = []
    for i in range(5):
        q = store.queue(f"paged{i % 2}")
        job_id = await q.enqueue(b"x")
        handle = await q.claim_one("w")
        assert handle is not None and await handle.fail("boom")
        dead.append(job_id)
    served = serve()
    status, body, _ = http_get(served.url + "/dead?limit=2")
    assert status == 200 and _shown(body) == dead[:2] and "5 dead job(s)" in body
    assert _link(body, "prev") is None
    pages = [_shown(body)]
    while (later := _link(body, "next")) is not None:
        status, body, _ = http_get(served.url + later)
        assert status == 200
        pages.append(_shown(body))
    assert pages == [dead[:2], dead[2:4], dead[4:]]
    earlier = _link(body, "prev")
    assert earlier is not None and "before=" in earlier and "limit=2" in earlier
    status, body, _ = http_get(served.url + earlier)
    assert _shown(body) == dead[2:4]
    assert _link(body, "prev") is not None and _link(body, "next") is not None
    status, body, _ = http_get(served.url + f"/dead?after={dead[-1]}")
    assert status == 200 and _shown(body) == [] and _link(body, "first") == "/dead"
    for bad in ("after=abc", "limit=0", "limit=100000", f"after=1&before={dead[-1]}"):
        assert http_get(served.url + "/dead?" + bad)[0] == 400, bad
