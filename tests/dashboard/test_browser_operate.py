"""The grown-up dashboard in Chromium on both engines: a queue's state and its pause,
resume and limits actions, keyset paging of a queue's jobs, the day and week charts
filling the page, the jobs each worker holds, the job page's sections. Every action
is clicked in the browser and checked in the store; screenshots are kept
(tests/dashboard/artefacts/)."""

from __future__ import annotations

from typing import Any

import alkstore
from alkstore.bookkeeping import Bookkeeping
from tests.dashboard.conftest import TOKEN, Serve

CALL = b'{"task":"emails.send","args":{"to":"a@example.com"}}'


async def _login(page: Any, base: str) -> None:
    await page.goto(f"{base}/login")
    await page.fill("input[name=token]", TOKEN)
    await page.click("form.login button")
    await page.wait_for_url(f"{base}/")


async def test_pause_and_resume_a_queue_from_its_page(
    store: alkstore.Store, serve: Serve, page: Any, shot: Any
) -> None:
    await store.queue("emails").enqueue_many([CALL] * 3)
    served = serve(token=TOKEN)
    await _login(page, served.url)
    await page.goto(f"{served.url}/queues/emails")
    assert await page.locator("#queue-paused").inner_text() == "running"
    await shot(page, "queue-running")
    await page.click("#queue-state button:has-text('Pause')")
    await page.wait_for_url("**/queues/emails?msg=*")
    assert "paused queue emails" in await page.locator(".flash").inner_text()
    assert "paused" in await page.locator("#queue-paused").inner_text()
    assert (await store.queue("emails").settings()).paused
    assert await store.queue("emails").claim_one("w") is None  # the pause holds
    await shot(page, "queue-paused")
    await page.click("#queue-state button:has-text('Resume')")
    await page.wait_for_url("**/queues/emails?msg=*")
    assert await page.locator("#queue-paused").inner_text() == "running"
    assert not (await store.queue("emails").settings()).paused
    await shot(page, "queue-resumed")


async def test_set_and_clear_a_queues_limits_and_see_fair_and_aging(
    store: alkstore.Store, serve: Serve, page: Any, shot: Any
) -> None:
    q = store.queue("reports")
    await q.enqueue(CALL)
    await q.set_fair(True)
    await q.set_aging(30)
    served = serve(token=TOKEN)
    await _login(page, served.url)
    await page.goto(f"{served.url}/queues/reports")
    assert "round-robin" in await page.locator("dd[data-setting=fair]").inner_text()
    assert "30s" in await page.locator("dd[data-setting=aging]").inner_text()
    await page.fill("#limits-form input[name=concurrency]", "5")
    await page.fill("#limits-form input[name=rate]", "100/s")
    await page.fill("#limits-form input[name=burst]", "10")
    await page.click("#limits-form button")
    await page.wait_for_url("**/queues/reports?msg=*")
    flash = await page.locator(".flash").inner_text()
    assert "concurrency 5" in flash and "rate 100 per 1s, burst 10" in flash
    assert await page.locator("dd[data-setting=concurrency]").inner_text() == "5"
    settings = await q.settings()
    assert (settings.concurrency, settings.rate_count, settings.burst) == (5, 100, 10)
    await shot(page, "queue-limited")
    # a bad value is refused with the reason, and nothing changes
    await page.fill("#limits-form input[name=concurrency]", "many")
    await page.click("#limits-form button")
    await page.wait_for_url("**/queues/reports?msg=*")
    flash = await page.locator(".flash").inner_text()
    assert "refused: concurrency must be a whole number" in flash
    assert (await q.settings()).concurrency == 5
    await shot(page, "queue-limit-refused")
    for name in ("concurrency", "rate", "burst"):  # empty: no such limit
        await page.fill(f"#limits-form input[name={name}]", "")
    await page.click("#limits-form button")
    await page.wait_for_url("**/queues/reports?msg=*")
    assert "limits of reports: none" in await page.locator(".flash").inner_text()
    settings = await q.settings()
    assert (settings.concurrency, settings.rate_count) == (None, None)


async def test_queue_actions_need_a_login(
    store: alkstore.Store, serve: Serve, page: Any, shot: Any
) -> None:
    await store.queue("emails").enqueue(CALL)
    served = serve(token=TOKEN)
    await page.goto(f"{served.url}/queues/emails")
    assert await page.locator("#queue-state button:has-text('Pause')").is_disabled()
    assert await page.locator("#limits-form").count() == 0
    cookies = {c["name"]: c["value"] for c in await page.context.cookies()}
    response = await page.request.post(
        f"{served.url}/queues/emails/pause", form={"csrf": cookies["alkstore_csrf"]}
    )
    assert response.status == 403
    assert not (await store.queue("emails").settings()).paused
    await shot(page, "queue-read-only")


async def test_page_through_a_queues_jobs_by_id(
    store: alkstore.Store, serve: Serve, page: Any, shot: Any
) -> None:
    ids = await store.queue("deep").enqueue_many([CALL] * 450)
    served = serve()
    await page.goto(f"{served.url}/queues/deep")
    rows = page.locator("table.jobs tbody tr")
    assert await rows.count() == 200
    assert await rows.first.get_attribute("data-job") == str(ids[0])
    assert await page.locator("a[rel=prev]").count() == 0
    await page.locator("a[rel=next]").first.click()
    await page.wait_for_url(f"**after={ids[199]}*")
    assert await rows.first.get_attribute("data-job") == str(ids[200])
    await page.locator("a[rel=next]").first.click()
    assert await rows.count() == 50  # the last page
    assert await rows.last.get_attribute("data-job") == str(ids[-1])
    assert await page.locator("a[rel=next]").count() == 0
    await shot(page, "queue-last-page")
    await page.locator("a[rel=prev]").first.click()
    await page.wait_for_url(f"**before={ids[400]}*")
    assert await rows.first.get_attribute("data-job") == str(ids[200])
    assert await rows.count() == 200


async def test_the_week_chart_fills_the_page_and_reads_the_stored_history(
    store: alkstore.Store, serve: Serve, page: Any, shot: Any
) -> None:
    books = Bookkeeping(store)
    await books.record_outcomes([("emails", "success", 90), ("emails", "dead", 10)])
    await books.record_outcomes([("reports", "success", 7)])
    served = serve()
    await page.goto(f"{served.url}/queues/emails")
    await page.click("a[data-range-link='7d']")
    await page.wait_for_url("**range=7d*")
    assert await page.locator("svg.chart rect.ok").count() == 84  # 7 days of 2-hour bars
    assert await page.locator("[data-stat=finished]").inner_text() == "100"  # this queue only
    assert await page.locator("[data-stat=failure-rate]").inner_text() == "10.0%"
    chart = await page.locator("svg.chart").bounding_box()
    main = await page.locator("main").bounding_box()
    assert chart["width"] > 0.9 * main["width"] - 50  # the chart spans the page
    await shot(page, "queue-week")
    await page.goto(f"{served.url}/?range=24h")
    assert await page.locator("svg.chart rect.ok").count() == 96  # a day of 15-minute bars
    assert await page.locator("[data-stat=finished]").inner_text() == "107"
    await shot(page, "overview-day")


async def test_workers_page_shows_the_jobs_each_worker_holds(
    store: alkstore.Store, serve: Serve, page: Any, shot: Any
) -> None:
    q = store.queue("emails")
    await q.enqueue_many([CALL] * 3)
    books = Bookkeeping(store)
    await books.report_worker("host-a:1:aaaaaa", "host-a", 1, ["emails"], 4, 2)
    await books.report_worker("host-b:2:bbbbbb", "host-b", 2, ["emails"], 4, 1)
    a = await q.claim_batch("host-a:1:aaaaaa", 2)
    b = await q.claim_batch("host-b:2:bbbbbb", 1)
    served = serve()
    await page.goto(f"{served.url}/workers")
    held_a = await page.locator("td[data-holds='host-a:1:aaaaaa'] a").all_inner_texts()
    held_b = await page.locator("td[data-holds='host-b:2:bbbbbb'] a").all_inner_texts()
    assert held_a == [str(h.job.id) for h in a] and held_b == [str(b[0].job.id)]
    await shot(page, "workers-holding")
    await page.click(f"td[data-holds='host-b:2:bbbbbb'] a >> text={b[0].job.id}")
    assert await page.locator("#job-state").inner_text() == "processing"
    assert "host-b:2:bbbbbb" in await page.locator("#job-live").inner_text()
    assert "claim renewed" in await page.locator("#job-live").inner_text()
    assert await page.locator("section#attempts").count() == 1
    await shot(page, "job-processing")
