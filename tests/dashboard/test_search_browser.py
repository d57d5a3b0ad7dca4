"""The search page and bulk actions in a real browser (Chromium), on both engines: search,
page, dry run, apply, progress, audit, and the refusals; screenshots kept as artefacts."""

from __future__ import annotations

import json
from typing import Any

import alkstore
from alkstore import QueueOpts
from tests.dashboard.conftest import TOKEN, Serve, eventually, http_post


def _call(to: str) -> bytes:
    return json.dumps({"task": "emails.send", "args": {"to": to}}).encode()


async def _dead(store: alkstore.Store, n: int, queue: str = "emails") -> list[int]:
    q = store.queue(queue, QueueOpts(max_attempts=1))
    ids = await q.enqueue_many([_call(f"u{i}@example.com") for i in range(n)])
    for h in await q.claim_batch("w", n):
        assert await h.fail("SMTP timeout")
    return ids


async def _login(page: Any, base: str) -> None:
    await page.goto(f"{base}/login")
    await page.fill("input[name=token]", TOKEN)
    await page.click("form.login button")
    await page.wait_for_url(f"{base}/")


async def test_search_pages_through_matches_with_the_filter_language(
    store: alkstore.Store, serve: Serve, page: Any, shot: Any
) -> None:
    ids = await _dead(store, 60)
    await store.queue("emails").enqueue(_call("live@example.com"))
    served = serve()
    await page.goto(served.url + "/")
    await page.click("nav a:has-text('Search')")
    await page.fill("#search input[name=q]", "queue:emails state:dead error:timeout")
    await page.click("#search button")
    await page.wait_for_selector("table.jobs")
    rows = page.locator("table.jobs tbody tr")
    assert await rows.count() == 50
    assert await rows.first.get_attribute("data-job") == str(ids[0])
    await shot(page, "search")
    await page.click("#next-page")
    await page.wait_for_url("**after=*")
    assert await rows.count() == 10
    assert await rows.last.get_attribute("data-job") == str(ids[-1])
    await page.fill("#search input[name=q]", "args.to=u7@example.com")
    await page.click("#search button")
    await page.wait_for_selector("table.jobs")
    assert [await r.get_attribute("data-job") for r in await rows.all()] == [str(ids[7])]
    await page.fill("#search input[name=q]", "state:finished")
    await page.click("#search button")
    assert "invalid state 'finished'" in await page.locator(".flash.bad").inner_text()
    await shot(page, "search-refused")


async def test_a_bulk_retry_is_a_dry_run_first_then_applied_with_progress_and_audit(
    store: alkstore.Store, serve: Serve, page: Any, shot: Any
) -> None:
    ids = await _dead(store, 30)
    served = serve(token=TOKEN)
    await _login(page, served.url)
    await page.goto(f"{served.url}/search?q=queue:emails+state:dead")
    await page.select_option("#bulk-form select[name=action]", "retry")
    await page.click("#bulk-form button")
    await page.wait_for_selector("#dry-run")
    assert await page.locator("#dry-count").inner_text() == "30"
    assert await page.locator("table.jobs tbody tr").count() == 20  # the sample
    still = await store.admin().find("queue:emails state:dead", limit=100)
    assert len(still.jobs) == 30  # a dry run changes nothing
    await shot(page, "bulk-dry-run")
    await page.click("#apply button")
    await page.wait_for_url("**/bulk/*")

    async def finished() -> bool:
        return await page.locator("#bulk-state").inner_text() == "done"

    await eventually(finished, "the action's page to show it done (live refresh)")
    assert await page.locator("#bulk-done").inner_text() == "30"
    states = {j.state for j in (await store.admin().find("queue:emails", limit=100)).jobs}
    assert states == {"pending"}
    await shot(page, "bulk-done")
    await page.click("text=All bulk actions")
    row = page.locator("#bulk-audit tbody tr").first
    cells = await row.locator("td").all_inner_texts()
    assert cells[1] == "retry" and cells[2] == "queue:emails state:dead"
    assert cells[3].startswith("dashboard@") and cells[5] == "30/30"
    await shot(page, "bulk-audit")
    assert len(ids) == 30


async def test_move_and_priority_take_their_argument_in_the_form(
    store: alkstore.Store, serve: Serve, page: Any
) -> None:
    await _dead(store, 3)
    served = serve(token=TOKEN)
    await _login(page, served.url)
    await page.goto(f"{served.url}/search?q=queue:emails")
    await page.select_option("#bulk-form select[name=action]", "move")
    await page.click("#bulk-form button")
    assert "invalid target queue" in await page.locator(".flash.bad").inner_text()
    await page.goto(f"{served.url}/search")
    await page.click("#bulk-form button")
    assert "every job is refused" in await page.locator(".flash.bad").inner_text()
    await page.goto(f"{served.url}/search?q=queue:emails")
    await page.select_option("#bulk-form select[name=action]", "move")
    await page.fill("#bulk-form input[name=to_queue]", "emails-later")
    await page.click("#bulk-form button")
    assert await page.locator("#dry-count").inner_text() == "3"
    await page.click("#apply button")
    await page.wait_for_url("**/bulk/*")

    async def finished() -> bool:
        return await page.locator("#bulk-state").inner_text() == "done"

    await eventually(finished, "the move to finish")
    moved = await store.admin().find("queue:emails-later", limit=10)
    assert len(moved.jobs) == 3


async def test_a_read_only_visitor_sees_the_dry_run_but_cannot_apply(
    store: alkstore.Store, serve: Serve, page: Any
) -> None:
    await _dead(store, 2)
    served = serve(token=TOKEN)
    await page.goto(f"{served.url}/search/preview?q=queue:emails&action=delete")
    assert await page.locator("#dry-count").inner_text() == "2"
    assert await page.locator("button:has-text('Apply')").is_disabled()
    status, _ = http_post(
        f"{served.url}/search/apply", {"q": "queue:emails", "action": "delete", "csrf": "x"}
    )
    assert status == 403
    assert len((await store.admin().find("queue:emails")).jobs) == 2
