"""Paging everywhere, in Chromium on both engines: the workers page and the
overview's queue list are keyset pages (``?after=`` / ``?before=`` a worker id or a
queue name, ``?limit=`` small here so a few rows page); screenshots are kept
(tests/dashboard/artefacts/)."""

from __future__ import annotations

from typing import Any

import alkstore
from alkstore.bookkeeping import Bookkeeping
from tests.dashboard.conftest import Serve, http_get


async def _shown(page: Any, selector: str) -> list[str]:
    return [t.strip() for t in await page.locator(selector).all_inner_texts()]


async def test_page_through_the_workers_by_id(
    store: alkstore.Store, serve: Serve, page: Any, shot: Any
) -> None:
    books = Bookkeeping(store)
    ids = [f"w{i}" for i in range(5)]
    for wid in reversed(ids):
        await books.report_worker(wid, "h", 1, ["emails"], 1, 0)
    served = serve()
    await page.goto(f"{served.url}/workers?limit=2")
    cells = "#workers tbody td:first-child"
    assert await _shown(page, cells) == ids[:2]
    assert await page.locator("a[rel=prev]").count() == 0
    await page.click("a[rel=next]")
    await page.wait_for_url("**after=w1*")
    assert await _shown(page, cells) == ids[2:4]
    await page.click("a[rel=next]")
    await page.wait_for_url("**after=w3*")
    assert await _shown(page, cells) == ids[4:]
    assert await page.locator("a[rel=next]").count() == 0
    await shot(page, "workers-last-page")
    await page.click("a[rel=prev]")
    await page.wait_for_url("**before=w4*")
    assert await _shown(page, cells) == ids[2:4]
    await page.click("a[rel=prev]")
    assert await _shown(page, cells) == ids[:2]
    assert await page.locator("a[rel=prev]").count() == 0


async def test_page_through_the_overviews_queues_by_name(
    store: alkstore.Store, serve: Serve, page: Any, shot: Any
) -> None:
    names = [f"q{i}" for i in range(5)]
    for name in names[:4]:
        await store.queue(name).enqueue(b"x")
    await store.queue(names[4]).pause()  # no jobs, stored settings: listed with its zeros
    served = serve()
    await page.goto(f"{served.url}/?limit=2")
    cells = "#queues tbody td:first-child"
    assert await _shown(page, cells) == names[:2]
    assert await page.locator("a[rel=prev]").count() == 0
    await page.click("a[rel=next]")
    await page.wait_for_url("**after=q1*")
    assert await _shown(page, cells) == names[2:4]
    await page.click("a[rel=next]")
    assert await _shown(page, cells) == names[4:]
    assert await page.locator("a[rel=next]").count() == 0
    assert "paused" in await page.locator("#queues tbody td[data-col=flow]").inner_text()
    await shot(page, "queues-last-page")
    await page.click("a[rel=prev]")
    await page.wait_for_url("**before=q4*")
    assert await _shown(page, cells) == names[2:4]
    for bad in ("limit=0", "limit=x", "after=q1&before=q3", "after=_bad"):  # not a name
        assert http_get(f"{served.url}/?{bad}")[0] == 400
    for bad in ("limit=0", "limit=201", "after=w1&before=w3"):
        assert http_get(f"{served.url}/workers?{bad}")[0] == 400
