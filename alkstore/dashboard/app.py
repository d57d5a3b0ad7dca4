"""The dashboard's ASGI app (Starlette): routes, access control, CSRF.

Safe by default:

- reads are open to whoever reaches the server (``alkstore dashboard`` binds
  to 127.0.0.1); every action (requeue, cancel, bulk requeue) is a POST and is
  refused (403) unless the visitor may act: with ``token=…`` a visitor logs in
  at ``/login`` (an HttpOnly, SameSite=Strict session cookie) or sends
  ``Authorization: Bearer <token>``; with ``auth=…`` (when mounted in your own
  app) your hook decides per request; with neither, the dashboard is read-only;
- every form POST carries a CSRF token that must equal the visitor's
  ``alkstore_csrf`` cookie (double submit), and a cross-origin ``Origin`` is
  refused;
- pages are sent with a strict Content-Security-Policy (scripts and styles
  only from the dashboard itself) and every stored value is HTML-escaped.

It talks to the store only through the public API (``Store`` and ``Admin``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import inspect
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import parse_qs, urlsplit

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from alkstore.admin import GONE_AFTER_S, JOB_STATES, Admin
from alkstore.cli.render import flow_json
from alkstore.connect import connect
from alkstore.core.job import Job
from alkstore.dashboard.assets import ICON, LIVE_JS, STYLE
from alkstore.dashboard.pages import Page, now_utc
from alkstore.errors import AlkstoreError, InvalidArgumentError, InvalidNameError
from alkstore.metrics import CONTENT_TYPE, Metrics
from alkstore.store import Store
from alkstore.tasks import BadCall, decode_call

__all__ = ["AuthHook", "Dashboard", "create_app"]

AuthHook = Callable[[Request], bool | Awaitable[bool]]

CSRF_COOKIE = "alkstore_csrf"
SESSION_COOKIE = "alkstore_session"
LIST_LIMIT = 200
BODY_MAX = 256 * 1024
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)


def _task_of(job: Job) -> str | None:
    try:
        return decode_call(job.payload)[0]
    except BadCall:
        return None


class Refused(Exception):
    """An action that this request may not perform (403)."""


class Dashboard:
    """The state behind one dashboard app: its store, access rules and metrics."""

    def __init__(
        self,
        store: Store | str | None,
        *,
        schema: str,
        token: str | None,
        auth: AuthHook | None,
        refresh_s: float,
        gone_after_s: float,
        options: dict[str, Any],
    ) -> None:
        if token is not None and (type(token) is not str or not token):
            raise InvalidArgumentError("token must be a non-empty str or None")
        if auth is not None and not callable(auth):
            raise InvalidArgumentError(f"auth must be a callable, got {auth!r}")
        if type(refresh_s) not in (int, float) or refresh_s < 0:
            raise InvalidArgumentError(f"refresh_s must be a number >= 0, got {refresh_s!r}")
        self._given = store if isinstance(store, Store) else None
        self._url = None if isinstance(store, Store) else store
        self._schema = schema
        self._options = options
        self._store: Store | None = self._given
        self._opening = asyncio.Lock()
        self.token = token
        self.auth = auth
        self.refresh_ms = int(refresh_s * 1000)
        self.gone_after_s = gone_after_s
        self.metrics = Metrics()
        self._session = (
            None
            if token is None
            else hmac.new(token.encode(), b"alkstore-dashboard-session", hashlib.sha256).hexdigest()
        )

    # -- the store ------------------------------------------------------------------
    async def store(self) -> Store:
        """The store, opened on first use when the app was given a URL."""
        if self._store is not None and not self._store.closed:
            return self._store
        async with self._opening:
            if self._store is None or self._store.closed:
                self._store = await connect(self._url, schema=self._schema, **self._options)
            return self._store

    async def close(self) -> None:
        """Close the store if the dashboard opened it (a given store stays open)."""
        if self._store is not None and self._store is not self._given:
            await self._store.close()
            self._store = None

    # -- access -----------------------------------------------------------------------
    def _bearer_ok(self, request: Request) -> bool:
        header = request.headers.get("authorization", "")
        scheme, _, value = header.partition(" ")
        return (
            self.token is not None
            and scheme.lower() == "bearer"
            and hmac.compare_digest(value.strip().encode(), self.token.encode())
        )

    async def may_act(self, request: Request) -> bool:
        """Whether this request may change anything."""
        if self.auth is not None:
            verdict = self.auth(request)
            if inspect.isawaitable(verdict):
                verdict = await verdict
            return verdict is True
        if self._session is None:
            return False
        if self._bearer_ok(request):
            return True
        cookie = request.cookies.get(SESSION_COOKIE, "")
        return hmac.compare_digest(cookie.encode(), self._session.encode())

    @staticmethod
    def base(request: Request) -> str:
        return str(request.scope.get("root_path", "")).rstrip("/")

    async def page(self, request: Request, message: str | None = None) -> Page:
        csrf = request.cookies.get(CSRF_COOKIE) or ""
        if len(csrf) < 32:
            csrf = secrets.token_urlsafe(32)
        return Page(
            base=self.base(request),
            can_act=await self.may_act(request),
            csrf=csrf,
            login_enabled=self.auth is None and self.token is not None,
            refresh_ms=self.refresh_ms,
            message=message if message is None else message[:200],
        )

    def html(self, page: Page, title: str, body: str, current: str, status: int = 200) -> Response:
        response = HTMLResponse(page.layout(title, body, current), status_code=status)
        self._harden(response)
        response.set_cookie(
            CSRF_COOKIE, page.csrf, httponly=True, samesite="strict", path=page.base or "/"
        )
        return response

    @staticmethod
    def _harden(response: Response) -> None:
        response.headers["Content-Security-Policy"] = _CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "same-origin"
        response.headers["Cache-Control"] = "no-store"

    async def form(self, request: Request, *, need_act: bool = True) -> dict[str, list[str]]:
        """The POSTed form after the access, origin and CSRF checks (``Refused`` if one fails)."""
        origin = request.headers.get("origin")
        if origin is not None and urlsplit(origin).netloc != request.headers.get("host", ""):
            raise Refused(f"cross-origin request from {origin} refused")
        if need_act and not await self.may_act(request):
            raise Refused(
                "this dashboard is read-only for you: "
                + (
                    "log in with the token to act"
                    if self.token
                    else "it was started without a token"
                )
            )
        body = await request.body()
        if len(body) > BODY_MAX:
            raise Refused("request body too large")
        try:
            fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=20_000)
        except (UnicodeDecodeError, ValueError):
            raise Refused("unreadable form") from None
        if not self._bearer_ok(request):
            sent = (fields.get("csrf") or [""])[0]
            cookie = request.cookies.get(CSRF_COOKIE, "")
            if not cookie or not hmac.compare_digest(sent.encode(), cookie.encode()):
                raise Refused("missing or wrong CSRF token: reload the page and try again")
        return fields

    def back(self, request: Request, fields: dict[str, list[str]]) -> str:
        """The form's ``next`` if it is a path of this dashboard, else the overview."""
        base = self.base(request)
        target = (fields.get("next") or [""])[0]
        if (
            target.startswith((base or "") + "/")
            and not target.startswith("//")
            and "\\" not in target
            and urlsplit(target).netloc == ""
        ):
            return target
        return base + "/"

    async def refused(self, request: Request, reason: str) -> Response:
        page = await self.page(request)
        return self.html(page, "Refused", page.refused(reason), "", status=403)


def _redirect(target: str, message: str) -> RedirectResponse:
    sep = "&" if "?" in target else "?"
    from urllib.parse import quote

    return RedirectResponse(f"{target}{sep}msg={quote(message)}", status_code=303)


def _int(text: str) -> int | None:
    text = text.strip()
    if not text.isdigit() or len(text) > 19:
        return None
    value = int(text)
    return value if 1 <= value <= 2**63 - 1 else None


def create_app(
    store: Store | str | None = None,
    *,
    schema: str = "alkstore",
    token: str | None = None,
    auth: AuthHook | None = None,
    refresh_s: float = 2.0,
    allowed_hosts: Sequence[str] | None = None,
    gone_after_s: float = GONE_AFTER_S,
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
        options=options,
    )

    async def overview(request: Request) -> Response:
        admin = (await dash.store()).admin()
        stats = await admin.stats()
        flows = {i.queue: i for i in await admin.queues()}
        history = await admin.outcome_history(60)
        page = await dash.page(request, request.query_params.get("msg"))
        body = page.overview(stats, history, now_utc(), flows)
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
        queue = request.path_params["queue"]
        state = request.query_params.get("state") or None
        task = request.query_params.get("task") or None
        page = await dash.page(request, request.query_params.get("msg"))
        if state is not None and state not in JOB_STATES:
            body = page.refused(f"unknown state {state!r}: use one of {', '.join(JOB_STATES)}")
            return dash.html(page, f"Queue {queue}", body, "overview", status=400)
        admin = (await dash.store()).admin()
        jobs = await admin.list_jobs(queue, state, 2000 if task else LIST_LIMIT)
        tasks = sorted({t for t in map(_task_of, jobs) if t is not None})
        if task is not None:
            jobs = [j for j in jobs if _task_of(j) == task][:LIST_LIMIT]
        stats = next((s for s in await admin.stats() if s.queue == queue), None)
        history = [h for h in await admin.outcome_history(60) if h.queue == queue]
        back = str(request.url.path) + (f"?{request.url.query}" if request.url.query else "")
        body = page.queue_page(queue, stats, jobs, history, state, task, tasks, now_utc(), back)
        return dash.html(page, f"Queue {queue}", body, "overview")

    async def dead_page(request: Request) -> Response:
        admin = (await dash.store()).admin()
        stats = await admin.stats()
        jobs: list[Job] = []
        for s in stats:
            if s.dead and len(jobs) < LIST_LIMIT:
                jobs += await admin.list_jobs(s.queue, "dead", LIST_LIMIT - len(jobs))
        total = sum(s.dead for s in stats)
        page = await dash.page(request, request.query_params.get("msg"))
        back = page.url("/dead")
        return dash.html(page, "Dead letters", page.dead_page(jobs, total, now_utc(), back), "dead")

    async def job_lookup(request: Request) -> Response:
        text = request.query_params.get("id", "")
        job_id = _int(text)
        page = await dash.page(request)
        if job_id is None:
            body = page.refused(f"invalid job id {text!r}: expected a positive integer")
            return dash.html(page, "Find a job", body, "", status=400)
        return RedirectResponse(page.url(f"/jobs/{job_id}"), status_code=303)

    async def job_page(request: Request) -> Response:
        page = await dash.page(request, request.query_params.get("msg"))
        job_id = _int(request.path_params["job_id"])
        admin = (await dash.store()).admin()
        job = None if job_id is None else await admin.find_job(job_id)
        if job is None:
            outcome = None if job_id is None else await admin.outcome(job_id)
            if outcome is not None and outcome.outcome == "success":  # only a kept result left
                body = page.outcome_page(outcome, now_utc())
                return dash.html(page, f"Job {outcome.id}", body, "")
            body = page.refused(f"no job {request.path_params['job_id']}")
            return dash.html(page, "No such job", body, "", status=404)
        body = page.job_page(job, now_utc(), page.url(f"/jobs/{job.id}"))
        return dash.html(page, f"Job {job.id}", body, "")

    async def workers_page(request: Request) -> Response:
        workers = await (await dash.store()).admin().workers(dash.gone_after_s)
        page = await dash.page(request, request.query_params.get("msg"))
        return dash.html(page, "Workers", page.workers_page(workers, now_utc()), "workers")

    async def act_on_job(
        request: Request, op: Callable[[Admin, int], Awaitable[bool]], done: str, refused: str
    ) -> Response:
        """One job action (requeue, cancel): a checked POST, then back with a message."""
        try:
            fields = await dash.form(request)
        except Refused as e:
            return await dash.refused(request, str(e))
        job_id = _int(request.path_params["job_id"])
        admin = (await dash.store()).admin()
        ok = job_id is not None and await op(admin, job_id)
        message = f"{done} job {job_id}" if ok else f"job {job_id} {refused}"
        return _redirect(dash.back(request, fields), message)

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
            ids = [_int(x) for x in fields.get("shown", [])]
        else:
            ids = [_int(x) for x in fields.get("id", [])]
        valid = [i for i in ids if i is not None]
        done = await admin.requeue_many(valid) if valid else 0
        return _redirect(dash.back(request, fields), f"requeued {done} of {len(valid)} job(s)")

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

    async def metrics(request: Request) -> Response:
        admin = (await dash.store()).admin()
        dash.metrics.set_queue_stats(await admin.stats())
        dash.metrics.set_workers(await admin.workers(dash.gone_after_s))
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

    routes = [
        Route("/", overview),
        Route("/api/overview", overview_json),
        Route("/queues/{queue}", queue_page),
        Route("/dead", dead_page),
        Route("/jobs", job_lookup),
        Route("/jobs/{job_id}", job_page),
        Route("/workers", workers_page),
        Route("/jobs/{job_id}/requeue", act_requeue, methods=["POST"]),
        Route("/jobs/{job_id}/cancel", act_cancel, methods=["POST"]),
        Route("/requeue", act_bulk_requeue, methods=["POST"]),
        Route("/login", login, methods=["GET", "POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/metrics", metrics),
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
