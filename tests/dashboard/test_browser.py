"""The dashboard in a real browser on both engines: real data, clicks, live numbers,
refused actions; a screenshot of each page is kept (tests/dashboard/artefacts/)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import alkstore
from alkstore.bookkeeping import Bookkeeping
from tests.dashboard.conftest import TOKEN, Serve, eventually

CALL = b'{"task":"emails.send","args":{"to":"a@example.com"}}'


async def _dead_job(store: alkstore.Store, queue: str = "emails", error: str = "boom") -> int:
    q = store.queue(queue)
    job_id = await q.enqueue(CALL, alkstore.EnqueueOpts(priority=100))  # claimed first
    handle = await q.claim_one("test-worker")
    assert handle is not None and handle.job.id == job_id
    await handle.fail(error)
    return job_id


async def _fill(store: alkstore.Store) -> None:
    """emails: 3 due, 1 delayed, 1 processing, 1 dead; reports: 2 due; an hour of outcomes."""
    emails = store.queue("emails")
    await emails.enqueue_many([CALL] * 4)
    await emails.enqueue(CALL, alkstore.EnqueueOpts(delay_s=3600))
    assert await emails.claim_one("test-worker") is not None
    await _dead_job(store, error="RuntimeError: smtp down\nTraceback (most recent call last):")
    await store.queue("reports").enqueue_many([b"plain text", b"\xff\x00 binary"])
    books = Bookkeeping(store)
    await books.record_outcomes([("emails", "success", 40), ("emails", "retry", 3)])
    await books.record_outcomes([("reports", "dead", 2)])


async def _login(page: Any, base: str) -> None:
    await page.goto(f"{base}/login")
    await page.fill("input[name=token]", TOKEN)
    await page.click("form.login button")
    await page.wait_for_url(f"{base}/")


async def test_overview_shows_the_stores_real_counts_and_the_hours_chart(
    store: alkstore.Store, serve: Serve, page: Any, shot: Any
) -> None:
    await _fill(store)
    served = serve(token=TOKEN)
    await page.goto(served.url + "/")
    row = page.locator("#queues tbody tr", has_text="emails")
    cells = await row.locator("td").all_inner_texts()
    # due, delayed, blocked, processing, dead
    assert cells[:6] == ["emails", "3", "1", "0", "1", "1"]
    assert (
        await page.locator("#queues tbody tr", has_text="reports").locator("td").nth(1).inner_text()
    ) == "2"
    assert await page.locator("[data-stat=finished]").inner_text() == "45"
    assert await page.locator("[data-stat=failure-rate]").inner_text() == "11.1%"
    assert await page.locator("svg.chart rect.ok").count() == 60
    await shot(page, "overview")


async def test_requeue_a_dead_job_by_clicking_and_see_it_pending(
    store: alkstore.Store, serve: Serve, page: Any, shot: Any
) -> None:
    job_id = await _dead_job(store, error='ValueError: bad <b>input</b>\n  File "x.py", line 1')
    served = serve(token=TOKEN)
    await _login(page, served.url)
    await page.goto(f"{served.url}/dead")
    await page.wait_for_selector(f"tr[data-job='{job_id}']")
    await shot(page, "dead-letters")
    await page.click(f"tr[data-job='{job_id}'] a >> text={job_id}")
    assert await page.locator("#job-state").inner_text() == "dead"
    # the error is text on the page, never markup
    assert "bad <b>input</b>" in await page.locator("#last-error").inner_text()
    await shot(page, "job-dead")
    await page.click("button:has-text('Requeue')")
    await page.wait_for_url(f"**/jobs/{job_id}?msg=*")
    assert await page.locator("#job-state").inner_text() == "pending"
    assert f"requeued job {job_id}" in await page.locator(".flash").inner_text()
    await shot(page, "job-requeued")
    job = await store.admin().find_job(job_id)
    assert job is not None and job.state == "pending" and job.attempts == 0


async def test_bulk_requeue_of_selected_dead_jobs(
    store: alkstore.Store, serve: Serve, page: Any, shot: Any
) -> None:
    ids = [await _dead_job(store, "bulk") for _ in range(3)]
    served = serve(token=TOKEN)
    await _login(page, served.url)
    await page.goto(f"{served.url}/queues/bulk?state=dead")
    await page.check(f"input[name=id][value='{ids[0]}']")
    await page.check(f"input[name=id][value='{ids[2]}']")
    await shot(page, "queue-dead-selected")
    await page.click("button:has-text('Requeue selected')")
    await page.wait_for_url("**msg=*")
    assert "requeued 2 of 2" in await page.locator(".flash").inner_text()
    states = [(await store.admin().find_job(i)).state for i in ids]  # type: ignore[union-attr]
    assert states == ["pending", "dead", "pending"]


async def test_a_count_changes_live_without_a_reload(
    store: alkstore.Store, serve: Serve, page: Any, shot: Any
) -> None:
    await store.queue("live").enqueue(b"one")
    served = serve()
    await page.goto(served.url + "/")
    cell = page.locator("#queues tr", has_text="live").locator("td[data-col=pending]")
    assert await cell.inner_text() == "1"
    await page.evaluate("window.__sameDocument = true")
    await store.queue("live").enqueue_many([b"two", b"three", b"four"])

    async def updated() -> bool:
        return bool(await cell.inner_text() == "4")

    await eventually(updated, "the pending count to refresh")
    assert await page.evaluate("window.__sameDocument") is True  # no navigation happened
    await shot(page, "overview-live")


async def test_actions_without_the_token_are_refused(
    store: alkstore.Store, serve: Serve, page: Any, shot: Any
) -> None:
    job_id = await _dead_job(store)
    served = serve(token=TOKEN)
    await page.goto(f"{served.url}/jobs/{job_id}")
    button = page.locator("button:has-text('Requeue')")
    assert await button.is_disabled()  # read-only until logged in
    await shot(page, "job-read-only")
    cookies = {c["name"]: c["value"] for c in await page.context.cookies()}
    # a POST with a valid CSRF pair but no session: refused, nothing changes
    response = await page.request.post(
        f"{served.url}/jobs/{job_id}/requeue",
        form={"csrf": cookies["alkstore_csrf"], "next": "/"},
    )
    assert response.status == 403
    assert "read-only" in await response.text()
    # logged in, but without the CSRF field: refused too
    await _login(page, served.url)
    response = await page.request.post(f"{served.url}/jobs/{job_id}/requeue", form={"next": "/"})
    assert response.status == 403 and "CSRF" in await response.text()
    job = await store.admin().find_job(job_id)
    assert job is not None and job.state == "dead"
    await page.goto(f"{served.url}/login")
    await shot(page, "login")


async def test_queue_job_and_workers_pages_escape_what_they_show(
    store: alkstore.Store, serve: Serve, page: Any, shot: Any
) -> None:
    hostile = b'{"task":"x","args":{"html":"<script>window.__pwned=1</script><img src=x>"}}'
    job_id = await store.queue("mixed").enqueue(hostile)
    await store.queue("mixed").enqueue(CALL)
    books = Bookkeeping(store)
    await books.report_worker("host-b:7:old", "host-b", 7, ["mixed"], 2, 1)
    reported = time.monotonic()
    served = serve(gone_after_s=1.5)
    await page.goto(f"{served.url}/queues/mixed")
    assert await page.locator("table.jobs tbody tr").count() == 2
    await page.select_option("select[name=task]", "emails.send")
    await page.click("button:has-text('Filter')")
    assert await page.locator("table.jobs tbody tr").count() == 1
    await shot(page, "queue")
    await page.goto(f"{served.url}/jobs?id={job_id}")
    assert "<script>window.__pwned=1</script>" in await page.locator("#payload").inner_text()
    assert await page.evaluate("window.__pwned === undefined")
    assert await page.locator("main img").count() == 0
    await shot(page, "job")
    await asyncio.sleep(max(0.0, 1.6 - (time.monotonic() - reported)))  # "old" is now gone
    await books.report_worker("host-a:101:abc", "host-a", 101, ["mixed", "emails"], 8, 3)
    await page.goto(f"{served.url}/workers")
    assert await page.locator("#workers tbody tr").count() == 2
    old = page.locator("#workers tbody tr", has_text="host-b:7:old")
    assert "gone" in await old.inner_text()
    fresh = page.locator("#workers tbody tr", has_text="host-a:101:abc")
    assert "alive" in await fresh.inner_text() and "3/8" in await fresh.inner_text()
    await shot(page, "workers")


async def test_a_dashboard_that_needs_a_login_to_read_shows_the_login_form_first(
    store: alkstore.Store, serve: Serve, page: Any, shot: Any
) -> None:
    job_id = await store.queue("emails").enqueue(CALL)
    served = serve(token=TOKEN, login_to_read=True)
    response = await page.goto(f"{served.url}/jobs/{job_id}")
    assert response is not None and response.status == 401
    assert await page.locator("#payload").count() == 0
    assert "a@example.com" not in await page.content()
    await shot(page, "login-to-read")
    await page.fill("input[name=token]", TOKEN)
    await page.click("form.login button")
    await page.wait_for_url(f"{served.url}/")
    assert await page.locator("#queues tbody tr", has_text="emails").count() == 1
    await page.goto(f"{served.url}/jobs/{job_id}")
    assert "a@example.com" in await page.locator("#payload").inner_text()
    await page.click("button:has-text('Log out')")
    await page.wait_for_url(f"{served.url}/")
    assert await page.locator("input[name=token]").count() == 1  # locked again
