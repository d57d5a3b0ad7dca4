"""The dashboard's ASGI app (Starlette): its routes.

Safe by default:

- every action (requeue, cancel, bulk requeue) is a POST and is refused (403)
  unless the visitor may act: with ``token=…`` a visitor logs in at ``/login``
  (an HttpOnly, SameSite=Strict session cookie) or sends
  ``Authorization: Bearer <token>``; with ``auth=…`` (when mounted in your own
  app) your hook decides per request; with neither, the dashboard is read-only;
- reads are open to whoever reaches the server unless ``login_to_read`` is set
  (``alkstore dashboard`` binds to 127.0.0.1, and sets it, with a token
  required, whenever it is bound beyond loopback): then every page but the
  login and the static assets answers 401 with the login form;
- every form POST carries a CSRF token that must equal the visitor's
  ``alkstore_csrf`` cookie (double submit), and a cross-origin ``Origin`` is
  refused;
- pages are sent with a strict Content-Security-Policy (scripts and styles
  only from the dashboard itself) and every stored value is HTML-escaped;
  large payloads, results and errors are cut to a preview on the pages, the
  whole fetched apart (``/api/jobs/{id}/payload|result|error``).

It talks to the store only through the public API (``Store`` and ``Admin``).
The access rules and the store live in :mod:`alkstore.dashboard.site`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from alkstore.admin import GONE_AFTER_S, Admin, QueueStats, WorkerInfo, flow_json
from alkstore.dashboard.assets import ICON, LIVE_JS, STYLE
from alkstore.dashboard.charts import pick_range
from alkstore.dashboard.flows import flow_body
from alkstore.dashboard.health import health_page
from alkstore.dashboard.life import life_sections
from alkstore.dashboard.pages import Page, now_utc
from alkstore.dashboard.paging import fetch_page, key_pager, read_cursor
from alkstore.dashboard.queue_control import held_jobs, queue_control_routes, queue_view
from alkstore.dashboard.search import search_routes
from alkstore.dashboard.site import (
    LIST_LIMIT,
    SESSION_COOKIE,
    AuthHook,
    Dashboard,
    Refused,
    parse_id,
    redirect,
)
from alkstore.errors import AlkstoreError, InvalidArgumentError, InvalidNameError
from alkstore.flowgraph import read_flow
from alkstore.metrics import CONTENT_TYPE
from alkstore.store import Store

__all__ = ["AuthHook", "Dashboard", "create_app"]


def create_app(
    store: Store | str | None = None,
    *,
    schema: str = "alkstore",
    token: str | None = None,
    auth: AuthHook | None = None,
    refresh_s: float = 2.0,
    allowed_hosts: Sequence[str] | None = None,
    gone_after_s: float = GONE_AFTER_S,
    login_to_read: bool = False,
    **options: Any,
) -> Starlette:
    """The dashboard as an ASGI app: serve it with uvicorn or mount it in yours.

    ``store`` is an open :class:`~alkstore.Store` (kept open) or a store URL
    (opened on first request; ``None``: ``$ALKSTORE_URL``, else the default).
    ``token`` enables actions for visitors who log in with it; ``auth`` (a
    function of the Starlette ``Request``, sync or async, returning ``True``
    to allow) replaces the token check when mounted in your own app.
    ``refresh_s`` is how often pages refresh their numbers (0: never);
    a worker unseen for ``gone_after_s`` is shown as gone.
    ``allowed_hosts`` limits the ``Host`` header (against DNS rebinding of a
    loopback dashboard; ``alkstore dashboard`` sets it when bound to loopback).
    ``login_to_read`` makes every page (not only the actions) need the token or
    the ``auth`` hook's yes (``alkstore dashboard`` sets it beyond loopback).

    >>> from starlette.routing import Mount
    >>> app = Starlette(routes=[Mount("/jobs-admin", create_app(store, auth=is_staff))])
    """
    dash = Dashboard(
        store,
        schema=schema,
        token=token,
        auth=auth,
        refresh_s=refresh_s,
        gone_after_s=gone_after_s,
        login_to_read=login_to_read,
        options=options,
    )

    async def overview(request: Request) -> Response:
        """Queues by name, a keyset page (``?after=`` / ``?before=`` a name), and the chart."""
        page = await dash.page(request, request.query_params.get("msg"))
        cursor = read_cursor(request.query_params, LIST_LIMIT)
        if isinstance(cursor, str):
            return dash.html(page, "Queues", page.refused(cursor), "overview", status=400)
        admin = (await dash.store()).admin()
        infos, more = await fetch_page(admin.queues_page, lambda i: i.queue, cursor)
        flows = {i.queue: i for i in infos}
        counted = {s.queue: s for s in await admin.stats()}
        stats = [  # a queue with stored settings only shows its zeros
            counted.get(i.queue) or QueueStats(i.queue, 0, 0, 0, 0, None) for i in infos
        ]
        span = pick_range(request.query_params.get("range"))
        history = await admin.outcome_history(span.minutes, bucket_minutes=span.bucket_minutes)
        query = {"range": span.key if span.key != "1h" else None, **cursor.sized}
        nav = key_pager(page, "/", [i.queue for i in infos], more, **query)
        body = page.overview(stats, history, now_utc(), flows, span, nav=nav)
        return dash.html(page, "Queues", body, "overview")

    async def overview_json(request: Request) -> Response:
        admin = (await dash.store()).admin()
        flows = {i.queue: i for i in await admin.queues()}
        stats = [s._asdict() | flow_json(flows.get(s.queue)) for s in await admin.stats()]
        history = [
            {**h._asdict(), "minute": h.minute.isoformat()} for h in await admin.outcome_history(60)
        ]
        return JSONResponse({"queues": stats, "history": history})

    async def queue_page(request: Request) -> Response:
        return await queue_view(dash, request)

    async def dead_page(request: Request) -> Response:
        """Dead jobs of every queue, a keyset page by id (``?after=`` / ``?before=``)."""
        page = await dash.page(request, request.query_params.get("msg"))
        query = {k: request.query_params.get(k, "") for k in ("after", "before", "limit")}
        after, before = (parse_id(query[k]) if query[k] else None for k in ("after", "before"))
        limit = parse_id(query["limit"]) if query["limit"] else LIST_LIMIT
        if (
            (query["after"] and after is None)
            or (query["before"] and before is None)
            or limit is None
            or limit > LIST_LIMIT
            or (after is not None and before is not None)
        ):
            body = page.refused(
                "invalid page: give after or before (a job id) and limit (1 to "
                f"{LIST_LIMIT}), got {request.url.query!r}"
            )
            return dash.html(page, "Dead letters", body, "dead", status=400)
        admin = (await dash.store()).admin()
        rows = await admin.list_dead(after=after, before=before, limit=limit + 1)
        jobs = rows[-limit:] if before is not None else rows[:limit]
        if jobs:  # is there a page before and after this one? one id each way
            earlier = await admin.list_dead(before=jobs[0].id, limit=1)
            later = await admin.list_dead(after=jobs[-1].id, limit=1)
        else:
            earlier = later = []
        total = sum(s.dead for s in await admin.stats())
        sized = {"limit": limit} if limit != LIST_LIMIT else {}
        pages = (
            page.url("/dead", before=jobs[0].id, **sized) if earlier else None,
            page.url("/dead", after=jobs[-1].id, **sized) if later else None,
            page.url("/dead", **sized) if not jobs and (after or before) else None,
        )
        back = page.url("/dead", after=after, before=before, **sized)
        body = page.dead_page(jobs, total, now_utc(), back, pages)
        return dash.html(page, "Dead letters", body, "dead")

    async def job_lookup(request: Request) -> Response:
        text = request.query_params.get("id", "")
        job_id = parse_id(text)
        page = await dash.page(request)
        if job_id is None:
            body = page.refused(f"invalid job id {text!r}: expected a positive integer")
            return dash.html(page, "Find a job", body, "", status=400)
        return RedirectResponse(page.url(f"/jobs/{job_id}"), status_code=303)

    async def job_page(request: Request) -> Response:
        page = await dash.page(request, request.query_params.get("msg"))
        job_id = parse_id(request.path_params["job_id"])
        admin = (await dash.store()).admin()
        job = None if job_id is None else await admin.find_job(job_id)
        if job is None:
            outcome = None if job_id is None else await admin.outcome(job_id)
            if outcome is not None and outcome.outcome == "success":  # only a kept result left
                body = page.outcome_page(outcome, now_utc())
                body += await life_html(page, outcome.queue, outcome.id, live=False)
                return dash.html(page, f"Job {outcome.id}", body, "")
            body = page.refused(f"no job {request.path_params['job_id']}")
            return dash.html(page, "No such job", body, "", status=404)
        body = page.job_page(job, now_utc(), page.url(f"/jobs/{job.id}"))
        body += await life_html(page, job.queue, job.id, live=job.state != "dead")
        return dash.html(page, f"Job {job.id}", body, "")

    async def life_html(page: Page, queue: str, job_id: int, *, live: bool) -> str:
        """The job's progress, attempts and signal form (dashboard/life.py)."""
        q = (await dash.store()).queue(queue)
        attempts, progress = await q.attempts(job_id), await q.progress(job_id)
        back = page.url(f"/jobs/{job_id}")
        return life_sections(page, job_id, attempts, progress, now_utc(), live=live, back=back)

    async def act_signal(request: Request) -> Response:
        """Send a signal to a job (a checked POST): name and JSON payload from the form."""
        try:
            fields = await dash.form(request)
        except Refused as e:
            return await dash.refused(request, str(e))
        job_id = parse_id(request.path_params["job_id"])
        name = (fields.get("name") or [""])[0]
        try:
            payload = json.loads((fields.get("payload") or ["null"])[0] or "null")
            sent = job_id is not None and await (await dash.store()).signal(job_id, name, payload)
        except (ValueError, AlkstoreError) as e:
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            return redirect(dash.back(request, fields), f"signal not sent: {first}")
        message = f"sent signal {name!r} to job {job_id}" if sent else f"no live job {job_id}"
        return redirect(dash.back(request, fields), message)

    async def flow_page(request: Request) -> Response:
        page = await dash.page(request)
        job_id = parse_id(request.path_params["job_id"])
        graph = None if job_id is None else await read_flow(await dash.store(), job_id)
        if graph is None or graph.nodes[graph.root].state == "gone":
            body = page.refused(f"no job {request.path_params['job_id']}")
            return dash.html(page, "No such job", body, "", status=404)
        body = flow_body(graph, lambda i: page.url(f"/jobs/{i}"))
        return dash.html(page, f"Workflow of job {graph.root}", body, "")

    async def workers_page(request: Request) -> Response:
        """Workers by id, a keyset page (``?after=`` / ``?before=`` a worker id)."""
        page = await dash.page(request, request.query_params.get("msg"))
        cursor = read_cursor(request.query_params, LIST_LIMIT)
        if isinstance(cursor, str):
            return dash.html(page, "Workers", page.refused(cursor), "workers", status=400)
        admin = (await dash.store()).admin()

        async def fetch(**where: Any) -> list[WorkerInfo]:
            return await admin.workers_page(gone_after_s=dash.gone_after_s, **where)

        workers, more = await fetch_page(fetch, lambda w: w.id, cursor)
        holding = await held_jobs(admin, workers)
        nav = key_pager(page, "/workers", [w.id for w in workers], more, **cursor.sized)
        body = page.workers_page(workers, now_utc(), holding, nav=nav)
        return dash.html(page, "Workers", body, "workers")

    async def health(request: Request) -> Response:
        found = await (await dash.store()).admin().health()
        page = await dash.page(request, request.query_params.get("msg"))
        return dash.html(page, "Health", health_page(found), "health")

    async def act_on_job(
        request: Request, op: Callable[[Admin, int], Awaitable[bool]], done: str, refused: str
    ) -> Response:
        """One job action (requeue, cancel): a checked POST, then back with a message."""
        try:
            fields = await dash.form(request)
        except Refused as e:
            return await dash.refused(request, str(e))
        job_id = parse_id(request.path_params["job_id"])
        admin = (await dash.store()).admin()
        ok = job_id is not None and await op(admin, job_id)
        message = f"{done} job {job_id}" if ok else f"job {job_id} {refused}"
        return redirect(dash.back(request, fields), message)

    async def act_requeue(request: Request) -> Response:
        return await act_on_job(request, Admin.requeue, "requeued", "is not dead: not requeued")

    async def act_cancel(request: Request) -> Response:
        return await act_on_job(request, Admin.cancel, "cancelled", "is not live: not cancelled")

    async def act_bulk_requeue(request: Request) -> Response:
        try:
            fields = await dash.form(request)
        except Refused as e:
            return await dash.refused(request, str(e))
        admin = (await dash.store()).admin()
        if (fields.get("all") or [""])[0] == "1":
            ids = [parse_id(x) for x in fields.get("shown", [])]
        else:
            ids = [parse_id(x) for x in fields.get("id", [])]
        valid = [i for i in ids if i is not None]
        done = await admin.requeue_many(valid) if valid else 0
        return redirect(dash.back(request, fields), f"requeued {done} of {len(valid)} job(s)")

    async def login(request: Request) -> Response:
        page = await dash.page(request)
        if not page.login_enabled:
            body = page.refused("this dashboard has no token login (read-only, or mounted)")
            return dash.html(page, "Log in", body, "", status=404)
        if request.method == "GET":
            return dash.html(page, "Log in", page.login_page(None), "")
        try:
            fields = await dash.form(request, need_act=False)
        except Refused as e:
            return await dash.refused(request, str(e))
        sent = (fields.get("token") or [""])[0]
        assert dash.token is not None and dash._session is not None
        if not hmac.compare_digest(sent.encode(), dash.token.encode()):
            await asyncio.sleep(0.5)  # slow down guessing
            return dash.html(page, "Log in", page.login_page("wrong token"), "", status=403)
        response = RedirectResponse(page.url("/"), status_code=303)
        response.set_cookie(
            SESSION_COOKIE,
            dash._session,
            httponly=True,
            samesite="strict",
            path=page.base or "/",
        )
        return response

    async def logout(request: Request) -> Response:
        try:
            await dash.form(request, need_act=False)
        except Refused as e:
            return await dash.refused(request, str(e))
        page = await dash.page(request)
        response = RedirectResponse(page.url("/"), status_code=303)
        response.delete_cookie(SESSION_COOKIE, path=page.base or "/")
        return response

    async def raw(request: Request) -> Response:
        """The whole payload, result or error of a job (the pages show a preview)."""
        job_id = parse_id(request.path_params["job_id"])
        part = request.path_params["part"]
        admin = (await dash.store()).admin()
        body: bytes | str | None = None
        if job_id is not None and part in ("payload", "error"):
            job = await admin.find_job(job_id)
            if job is not None and part == "payload":
                body = job.payload
            elif job is not None and job.last_error is not None:
                body = json.dumps(job.last_error, ensure_ascii=False)
        elif job_id is not None and part == "result":
            outcome = await admin.outcome(job_id)
            body = None if outcome is None else outcome.value_json
        if body is None:
            return JSONResponse({"error": f"job {job_id} has no {part}"}, status_code=404)
        media = "application/json"
        if isinstance(body, bytes):  # a payload: as stored; JSON when it is JSON
            try:
                json.loads(body)
            except (ValueError, UnicodeDecodeError):
                media = "application/octet-stream"
        response = Response(body, media_type=media)
        dash.harden(response)
        return response

    async def metrics(request: Request) -> Response:
        admin = (await dash.store()).admin()
        dash.metrics.set_queue_stats(await admin.stats())
        dash.metrics.set_workers(await admin.workers(dash.gone_after_s))
        dash.metrics.set_health((await admin.health()).facts)
        return Response(dash.metrics.render(), media_type=CONTENT_TYPE)

    def asset(text: str, media_type: str) -> Callable[[Request], Awaitable[Response]]:
        async def serve(request: Request) -> Response:
            response = Response(text, media_type=media_type)
            response.headers["Cache-Control"] = "max-age=300"
            response.headers["X-Content-Type-Options"] = "nosniff"
            return response

        return serve

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await dash.close()

    def gated(endpoint: Callable[[Request], Awaitable[Response]]) -> Any:
        """A read: answered only when this visitor may read (see ``login_to_read``)."""

        async def read(request: Request) -> Response:
            wall = await dash.login_wall(request)
            return wall if wall is not None else await endpoint(request)

        return read

    routes = [
        Route("/", gated(overview)),
        Route("/api/overview", gated(overview_json)),
        Route("/api/jobs/{job_id}/{part:str}", gated(raw)),
        Route("/queues/{queue}", gated(queue_page)),
        Route("/dead", gated(dead_page)),
        Route("/jobs", gated(job_lookup)),
        Route("/jobs/{job_id}", gated(job_page)),
        Route("/workers", gated(workers_page)),
        Route("/flows/{job_id}", gated(flow_page)),
        Route("/health", gated(health)),
        Route("/jobs/{job_id}/requeue", act_requeue, methods=["POST"]),
        Route("/jobs/{job_id}/cancel", act_cancel, methods=["POST"]),
        Route("/jobs/{job_id}/signal", act_signal, methods=["POST"]),
        Route("/requeue", act_bulk_requeue, methods=["POST"]),
        *queue_control_routes(dash),
        Route("/login", login, methods=["GET", "POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/metrics", gated(metrics)),
        *search_routes(dash, gated),
        Route("/assets/style.css", asset(STYLE, "text/css")),
        Route("/assets/live.js", asset(LIVE_JS, "text/javascript")),
        Route("/assets/icon.svg", asset(ICON, "image/svg+xml")),
    ]

    async def store_error(request: Request, exc: Exception) -> Response:
        page = await dash.page(request)
        text = " ".join(str(exc).split())[:300]
        if isinstance(exc, InvalidArgumentError | InvalidNameError):
            return dash.html(page, "Bad request", page.refused(text), "", status=400)
        body = page.refused(f"the store failed: {text}")
        return dash.html(page, "Store error", body, "", status=503)

    middleware = []
    if allowed_hosts is not None:
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts)))
    app = Starlette(
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers={AlkstoreError: store_error},
    )
    app.state.dashboard = dash
    return app
