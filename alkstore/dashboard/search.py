"""The dashboard's search page and bulk actions (alkstore/bulk.py), in the filter language.

``/search?q=…`` finds jobs (keyset pages, ``after=``); its bulk form asks for a
dry run first (``/search/preview``: the count and a sample), whose Apply button
POSTs ``/search/apply`` (checked like every action: may act, CSRF, origin).
The action's audit row is written, then it runs in batches on the dashboard's
event loop; ``/bulk/{id}`` shows its progress live, and ``/bulk`` the audit.
An action left unfinished (the dashboard stopped) is resumed from its page.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from alkstore.bulk import BulkAction
from alkstore.core.bulk import BULK_ACTIONS
from alkstore.core.filters import parse_filter
from alkstore.dashboard.html import esc, now_utc, options
from alkstore.dashboard.pages import Page
from alkstore.dashboard.site import Dashboard, Refused, parse_id, redirect
from alkstore.errors import InvalidArgumentError

__all__ = ["search_routes"]

PAGE_SIZE = 50
Endpoint = Callable[[Request], Awaitable[Response]]
_EVERY_JOB = "give at least one filter term: a bulk action on every job is refused"
_EXAMPLE = "queue:emails state:dead error:timeout args.to~example.com created>-1h"


def _search_form(page: Page, q: str) -> str:
    return (
        f'<form method="get" action="{esc(page.url("/search"))}" class="filters" id="search">'
        f'<input name="q" value="{esc(q)}" size="70" placeholder="{esc(_EXAMPLE)}" '
        'aria-label="filter"> <button>Search</button></form>'
        '<p class="muted">Terms: <code>queue:</code> <code>task:</code> <code>state:</code> '
        "(pending, delayed, processing, dead) <code>worker:</code> <code>error:</code> "
        "<code>args.PATH=</code> <code>args.PATH~</code> <code>created&gt;-1h</code> "
        "<code>run_at&lt;…</code> <code>died&gt;…</code>; all must hold.</p>"
    )


def _bulk_form(page: Page, q: str) -> str:
    return (
        f'<form method="get" action="{esc(page.url("/search/preview"))}" class="filters" '
        f'id="bulk-form"><input type="hidden" name="q" value="{esc(q)}">'
        f'<label>Bulk action <select name="action">{options(BULK_ACTIONS, "retry")}</select>'
        '</label> <label>priority <input name="priority" size="6" inputmode="numeric"></label> '
        '<label>to queue <input name="to_queue" size="16"></label> '
        "<button>Dry run</button></form>"
    )


def _progress(a: BulkAction) -> str:
    state = "done" if a.finished else f"running ({a.phase} table, after id {a.after_id})"
    arg = (
        f" priority {a.priority}"
        if a.priority is not None
        else (f" to {a.to_queue}" if a.to_queue else "")
    )
    return (
        f'<section id="bulk-live" data-live><dl class="facts">'
        f"<dt>action</dt><dd id=bulk-action>{esc(a.action)}{esc(arg)}</dd>"
        f"<dt>filter</dt><dd><code>{esc(a.filter)}</code></dd>"
        f"<dt>by</dt><dd>{esc(a.actor)} at {a.created_at:%Y-%m-%d %H:%M:%S} UTC</dd>"
        f'<dt>done</dt><dd><span id="bulk-done">{a.done}</span> of '
        f'<span id="bulk-matched">{a.matched}</span> counted at the start</dd>'
        f'<dt>state</dt><dd id="bulk-state">{esc(state)}</dd></dl></section>'
    )


def search_routes(dash: Dashboard, gated: Callable[[Endpoint], Any]) -> list[Route]:
    """The routes of the search page and the bulk actions (reads gated like the others)."""
    running: dict[int, asyncio.Task[BulkAction]] = {}

    def launch(action_id: int) -> None:
        if action_id in running and not running[action_id].done():
            return

        async def go() -> BulkAction:
            return await (await dash.store()).admin().bulk().run(action_id)

        running[action_id] = asyncio.get_running_loop().create_task(go())

    async def search(request: Request) -> Response:
        page = await dash.page(request, request.query_params.get("msg"))
        q = request.query_params.get("q", "")
        after_text = request.query_params.get("after", "")
        after = parse_id(after_text) if after_text else None
        if after_text and after is None:
            body = page.refused(f"invalid page: after must be a job id, got {after_text!r}")
            return dash.html(page, "Search", body, "search", status=400)
        admin = (await dash.store()).admin()
        try:
            found = await admin.find(q, after=after, limit=PAGE_SIZE)
        except InvalidArgumentError as e:
            # the form again with the reason (a page, not a failed request)
            body = _search_form(page, q) + page.refused(str(e))
            return dash.html(page, "Search", body, "search")
        more = (
            f'<p><a id="next-page" href="{esc(page.url("/search", q=q, after=found.after))}">'
            "Next page →</a></p>"
            if found.after is not None
            else ""
        )
        first = (
            f'<p><a href="{esc(page.url("/search", q=q))}">← First page</a></p>' if after else ""
        )
        body = (
            _search_form(page, q)
            + _bulk_form(page, q)
            + f'<p class="muted" id="found">{len(found.jobs)} job(s) on this page</p>'
            + page.job_table(found.jobs, now_utc(), select=False)
            + first
            + more
        )
        return dash.html(page, "Search", body, "search")

    async def preview(request: Request) -> Response:
        page = await dash.page(request)
        q = request.query_params.get("q", "")
        action = request.query_params.get("action", "")
        priority_text = request.query_params.get("priority", "").strip()
        to_queue = request.query_params.get("to_queue", "").strip() or None
        ops = (await dash.store()).admin().bulk()
        if not q.strip():
            body = _search_form(page, q) + page.refused(_EVERY_JOB)
            return dash.html(page, "Dry run", body, "search")
        try:
            priority = int(priority_text) if priority_text else None
        except ValueError:
            body = page.refused(f"invalid priority {priority_text!r}: expected an integer")
            return dash.html(page, "Dry run", body, "search", status=400)
        try:
            shown = await ops.preview(
                action,
                q,
                priority=priority if action == "priority" else None,
                to_queue=to_queue if action == "move" else None,
            )
        except InvalidArgumentError as e:
            body = _search_form(page, q) + page.refused(str(e))
            return dash.html(page, "Dry run", body, "search")
        exact = shown.filter.text()
        if page.can_act and shown.count:
            apply = (
                f'<form method="post" action="{esc(page.url("/search/apply"))}" id="apply">'
                f'{page.csrf_field()}<input type=hidden name=q value="{esc(exact)}">'
                f'<input type=hidden name=action value="{esc(action)}">'
                f'<input type=hidden name=priority value="{esc(priority_text)}">'
                f'<input type=hidden name=to_queue value="{esc(to_queue or "")}">'
                f'<button class="danger">Apply {esc(action)} to {shown.count} job(s)</button>'
                "</form>"
            )
        elif not shown.count:
            apply = '<p class="muted">Nothing to do.</p>'
        else:
            apply = '<button disabled title="read-only: log in to act">Apply</button>'
        body = (
            f'<p id="dry-run" role="status">Dry run: <strong>{esc(action)}</strong> would touch '
            f'<strong id="dry-count">{shown.count}</strong> job(s) matching '
            f"<code>{esc(exact)}</code>. Nothing has changed yet.</p>"
            f"{apply}<h2>First {len(shown.sample)}</h2>"
            + page.job_table(shown.sample, now_utc(), select=False)
        )
        return dash.html(page, "Dry run", body, "search")

    async def apply(request: Request) -> Response:
        try:
            fields = await dash.form(request)
        except Refused as e:
            return await dash.refused(request, str(e))

        def field(name: str) -> str:
            return (fields.get(name) or [""])[0].strip()

        page = await dash.page(request)
        ops = (await dash.store()).admin().bulk()
        client = request.client.host if request.client is not None else "unknown"
        try:
            if not field("q"):
                raise InvalidArgumentError(_EVERY_JOB)
            priority = int(field("priority")) if field("priority") else None
            action = field("action")
            started = await ops.start(
                action,
                parse_filter(field("q"), now=time.time()),
                actor=f"dashboard@{client}",
                priority=priority if action == "priority" else None,
                to_queue=(field("to_queue") or None) if action == "move" else None,
            )
        except (InvalidArgumentError, ValueError) as e:
            return dash.html(page, "Refused", page.refused(str(e)), "search", status=400)
        launch(started.id)
        return RedirectResponse(page.url(f"/bulk/{started.id}"), status_code=303)

    async def action_page(request: Request) -> Response:
        page = await dash.page(request, request.query_params.get("msg"))
        action_id = parse_id(request.path_params["action_id"])
        ops = (await dash.store()).admin().bulk()
        found = None if action_id is None else await ops.get(action_id)
        if found is None:
            body = page.refused(f"no bulk action {request.path_params['action_id']}")
            return dash.html(page, "No such action", body, "search", status=404)
        task = running.get(found.id)
        resume = ""
        if not found.finished and (task is None or task.done()):
            resume = page.action(
                f"/bulk/{found.id}/resume", "Resume", back=page.url(f"/bulk/{found.id}")
            )
        back = f'<p><a href="{esc(page.url("/bulk"))}">All bulk actions</a></p>'
        return dash.html(
            page, f"Bulk action {found.id}", _progress(found) + resume + back, "search"
        )

    async def resume(request: Request) -> Response:
        try:
            fields = await dash.form(request)
        except Refused as e:
            return await dash.refused(request, str(e))
        action_id = parse_id(request.path_params["action_id"])
        ops = (await dash.store()).admin().bulk()
        if action_id is None or await ops.get(action_id) is None:
            return redirect(dash.back(request, fields), "no such bulk action")
        launch(action_id)
        return redirect(dash.back(request, fields), f"resumed bulk action {action_id}")

    async def history(request: Request) -> Response:
        page = await dash.page(request)
        before_text = request.query_params.get("before", "")
        before = parse_id(before_text) if before_text else None
        found = await (await dash.store()).admin().bulk().history(before=before, limit=PAGE_SIZE)
        rows = "".join(
            f'<tr data-action="{a.id}"><td><a href="{esc(page.url(f"/bulk/{a.id}"))}">{a.id}</a>'
            f"</td><td>{esc(a.action)}</td><td><code>{esc(a.filter)}</code></td>"
            f"<td>{esc(a.actor)}</td><td>{a.created_at:%Y-%m-%d %H:%M:%S}</td>"
            f'<td class="num">{a.done}/{a.matched}</td>'
            f"<td>{'done' if a.finished else esc(a.phase)}</td></tr>"
            for a in found
        )
        more = (
            f'<p><a href="{esc(page.url("/bulk", before=found[-1].id))}">Older →</a></p>'
            if len(found) == PAGE_SIZE
            else ""
        )
        body = (
            '<table id="bulk-audit"><thead><tr><th>id</th><th>action</th><th>filter</th>'
            '<th>by</th><th>when (UTC)</th><th class="num">done</th><th>state</th></tr>'
            f"</thead><tbody>{rows}</tbody></table>{more}"
            if found
            else '<p class="muted">No bulk actions yet.</p>'
        )
        return dash.html(page, "Bulk actions", body, "search")

    return [
        Route("/search", gated(search)),
        Route("/search/preview", gated(preview)),
        Route("/search/apply", apply, methods=["POST"]),
        Route("/bulk", gated(history)),
        Route("/bulk/{action_id}", gated(action_page)),
        Route("/bulk/{action_id}/resume", resume, methods=["POST"]),
    ]
