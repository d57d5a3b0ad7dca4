"""The job page's life sections in a real browser (#24): the progress bar moves live,
the attempt history with its errors (text, never markup), and the signal action."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import alkstore
from alkstore.worker.job_life import JobLife
from tests.dashboard.conftest import TOKEN, Serve, eventually


async def _login(page: Any, base: str) -> None:
    await page.goto(f"{base}/login")
    await page.fill("input[name=token]", TOKEN)
    await page.click("form.login button")
    await page.wait_for_url(f"{base}/")


async def test_a_job_page_shows_progress_live_attempts_and_sends_a_signal(
    store: alkstore.Store, serve: Serve, page: Any, shot: Any
) -> None:
    q = store.queue("life")
    job_id = await q.enqueue(b'{"task":"export","args":{}}')
    handle = await q.claim_one("w-dash")
    assert handle is not None
    life = JobLife(handle, asyncio.get_running_loop())
    await life._write(0.25, "quarter")
    now = time.time()
    await store._engine.add_attempts(
        [
            (job_id, "life", 1, "w-old", "host-a", now - 9, now - 8, "snoozed", None),
            (job_id, "life", 1, "w-old", "host-a", now - 5, now - 4, "lost", "bad <b>x</b>\nTb"),
        ],
        20,
    )
    served = serve(token=TOKEN)
    await _login(page, served.url)
    await page.goto(f"{served.url}/jobs/{job_id}")
    bar = page.locator("#job-progress-bar")
    assert await bar.get_attribute("value") == "0.25"
    assert [
        await page.locator(f"#attempts tr[data-attempt='1'] td >> nth={i}").inner_text()
        for i in (1, 2, 3)
    ] == ["snoozed", "w-old", "host-a"]
    rows = page.locator("#attempts tbody tr")
    assert await rows.count() == 2
    assert "bad <b>x</b>" in await rows.nth(1).inner_text()  # shown as text
    await shot(page, "job-life")
    await life._write(0.75, "three quarters")  # the page refreshes itself

    async def moved() -> bool:
        return await bar.get_attribute("value") == "0.75"

    await eventually(moved, "the progress bar to move without a reload")
    await page.fill("#signal input[name=name]", "approval")
    await page.fill("#signal input[name=payload]", '{"ok": true}')
    await page.click("#signal button")
    await page.wait_for_url(f"**/jobs/{job_id}?msg=*")
    assert "sent signal 'approval'" in await page.locator(".flash").inner_text()
    assert await store._engine.get_signal("life", job_id, "approval") == '{"ok":true}'
    await page.fill("#signal input[name=name]", "again")
    await page.fill("#signal input[name=payload]", "{not json")
    await page.click("#signal button")
    await page.wait_for_url(f"**/jobs/{job_id}?msg=*")
    assert "signal not sent" in await page.locator(".flash").inner_text()
