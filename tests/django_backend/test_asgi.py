"""The dashboard mounted beside Django in one ASGI app (docs/django.md), driven by
ASGI calls: the dashboard shows the job that the Django view enqueued."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import alkstore
from tests.django_backend.conftest import Shop


async def _get(app: Any, path: str, query: str = "") -> tuple[int, bytes]:
    """One GET through the ASGI app, as a server would make it."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(b"host", b"testserver")],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    sent: list[dict[str, Any]] = []
    requested = False

    async def receive() -> dict[str, Any]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.Event().wait()  # the client never disconnects
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, body


def test_the_dashboard_mounted_in_the_projects_asgi_app_shows_the_views_job(shop: Shop) -> None:
    from django.core.asgi import get_asgi_application
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from alkstore.dashboard import create_app

    options = shop.options
    mode = "atomic" if shop.engine == "postgres" else "on_commit"

    async def go() -> tuple[int, bytes, int, bytes]:
        async with await alkstore.connect(options["URL"], schema=options["SCHEMA"]) as store:
            application = Starlette(
                routes=[Mount("/admin/jobs", create_app(store)), Mount("/", get_asgi_application())]
            )
            status, body = await _get(application, "/orders", f"item=kettle&mode={mode}")
            job_id = json.loads(body)["result_id"]
            page_status, page = await _get(application, f"/admin/jobs/jobs/{job_id}")
        return status, body, page_status, page

    status, body, page_status, page = asyncio.run(go())
    assert status == 200, body
    assert page_status == 200, page
    assert b"tests.django_backend.project.shop.tasks.ship" in page
