"""A real dashboard server (uvicorn in a thread) and a real browser (Debian's Chromium
driven by Playwright) per test, on every engine.

Screenshots are kept as test artefacts under ``tests/dashboard/artefacts/``
(gitignored), one per page and engine, named after the test.
"""

from __future__ import annotations

import asyncio
import re
import socket
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from alkstore.dashboard import create_app

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the tests import tests.dashboard.conftest's helpers
    sys.path.insert(0, str(ROOT))

CHROMIUM = "/usr/bin/chromium"
ARTEFACTS = Path(__file__).parent / "artefacts"
TOKEN = "test-token-0123456789"
BROWSER_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-default-apps",
    "--disable-extensions",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Served:
    """One dashboard app served by uvicorn on 127.0.0.1 in a thread of its own (its loop)."""

    def __init__(self, app: Any) -> None:
        self.port = free_port()
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the dashboard server did not start")
            time.sleep(0.01)
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)


Serve = Callable[..., Served]


@pytest.fixture
def serve(target: Any) -> Iterator[Serve]:
    """``serve(token=..., auth=..., mount=...)``: a dashboard on the test's store."""
    servers: list[Served] = []

    def start(**kwargs: Any) -> Served:
        kwargs.setdefault("refresh_s", 0.3)
        mount = kwargs.pop("mount", None)
        app = create_app(target.url, schema=target.schema, **kwargs)
        if mount is not None:
            from starlette.applications import Starlette
            from starlette.routing import Mount

            app = Starlette(routes=[Mount(mount, app)], lifespan=app.router.lifespan_context)
        served = Served(app)
        servers.append(served)
        return served

    yield start
    for served in servers:
        served.stop()


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium")
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        chromium = await pw.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS
        )
        try:
            yield chromium
        finally:
            await chromium.close()


@pytest.fixture
async def page(browser: Any) -> AsyncIterator[Any]:
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on(
        "console",
        lambda m: (
            errors.append(m.text)
            if m.type == "error" and "403" not in m.text and "401" not in m.text
            else None
        ),
    )
    yield page
    await context.close()
    assert not errors, f"the page logged errors: {errors}"


@pytest.fixture
def shot(request: pytest.FixtureRequest, target: Any) -> Callable[[Any, str], Any]:
    """``await shot(page, "overview")``: a full-page screenshot kept as an artefact."""
    ARTEFACTS.mkdir(exist_ok=True)
    test = re.sub(r"\W+", "_", request.node.originalname)

    async def take(page: Any, name: str) -> Path:
        path = ARTEFACTS / f"{target.engine}-{test}-{name}.png"
        await page.screenshot(path=str(path), full_page=True)
        return path

    return take


async def eventually(check: Callable[[], Any], what: str, timeout: float = 20.0) -> None:
    """Poll an async ``check`` until it returns true (the bound only names the failure)."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def http_get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str, Any]:
    """GET ``url``: (status, body, headers), also for an error status."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, r.read().decode(), r.headers
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), e.headers


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def http_post(
    url: str, fields: dict[str, str], headers: dict[str, str] | None = None
) -> tuple[int, str]:
    """POST a form without following a redirect: (status, body)."""
    data = urllib.parse.urlencode(fields).encode()
    request = urllib.request.Request(url, data=data, headers=headers or {}, method="POST")
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(request, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
