"""The state behind one dashboard app: its store, who may read and act, CSRF, bind rules.

Access (see docs/observability.md, "Dashboard"): a visitor is *trusted* when the
``auth`` hook says so, or, with a ``token``, when they logged in at ``/login``
(an HttpOnly, SameSite=Strict session cookie holding an HMAC of the token) or
send ``Authorization: Bearer <token>`` (compared in constant time). Only a
trusted visitor may act; with ``login_to_read`` only a trusted visitor may read
too (``alkstore dashboard`` sets it whenever it is bound beyond loopback, and
refuses to bind there without a token).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import inspect
import ipaddress
import secrets
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from alkstore.connect import connect
from alkstore.dashboard.pages import Page
from alkstore.errors import InvalidArgumentError
from alkstore.metrics import Metrics
from alkstore.store import Store

__all__ = ["AuthHook", "Dashboard", "Refused", "bind_plan", "is_loopback"]

AuthHook = Callable[[Request], bool | Awaitable[bool]]
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1", "[::1]")

CSRF_COOKIE = "alkstore_csrf"
SESSION_COOKIE = "alkstore_session"
LIST_LIMIT = 200
BODY_MAX = 256 * 1024
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)


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
        login_to_read: bool,
        options: dict[str, Any],
    ) -> None:
        if token is not None and (type(token) is not str or not token):
            raise InvalidArgumentError("token must be a non-empty str or None")
        if auth is not None and not callable(auth):
            raise InvalidArgumentError(f"auth must be a callable, got {auth!r}")
        if type(refresh_s) not in (int, float) or refresh_s < 0:
            raise InvalidArgumentError(f"refresh_s must be a number >= 0, got {refresh_s!r}")
        if type(login_to_read) is not bool:
            raise InvalidArgumentError(f"login_to_read must be a bool, got {login_to_read!r}")
        if login_to_read and token is None and auth is None:
            raise InvalidArgumentError(
                "login_to_read needs a token or an auth hook: nobody could read the dashboard"
            )
        self.login_to_read = login_to_read
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
        self.harden(response)
        response.set_cookie(
            CSRF_COOKIE, page.csrf, httponly=True, samesite="strict", path=page.base or "/"
        )
        return response

    @staticmethod
    def harden(response: Response) -> None:
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

    async def login_wall(self, request: Request) -> Response | None:
        """``None`` when this visitor may read; else the answer: the login form (401),
        or 403 when the ``auth`` hook said no."""
        if not self.login_to_read or await self.may_act(request):
            return None
        page = await self.page(request)
        if page.login_enabled:
            body = page.login_page("log in to see this dashboard")
            response = self.html(page, "Log in", body, "", status=401)
            response.headers["WWW-Authenticate"] = 'Bearer realm="alkstore dashboard"'
            return response
        return self.html(page, "Refused", page.refused("you may not see this dashboard"), "", 403)

    async def refused(self, request: Request, reason: str) -> Response:
        page = await self.page(request)
        return self.html(page, "Refused", page.refused(reason), "", status=403)


def redirect(target: str, message: str) -> RedirectResponse:
    sep = "&" if "?" in target else "?"
    return RedirectResponse(f"{target}{sep}msg={quote(message)}", status_code=303)


def parse_id(text: str) -> int | None:
    text = text.strip()
    if not text.isdigit() or len(text) > 19:
        return None
    value = int(text)
    return value if 1 <= value <= 2**63 - 1 else None


def is_loopback(host: str) -> bool:
    """Whether binding to ``host`` serves this machine only (``localhost``, 127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bind_plan(host: str, token: str | None) -> tuple[list[str] | None, bool]:
    """How ``alkstore dashboard`` serves on ``host``: ``(allowed_hosts, login_to_read)``.

    On loopback, only the loopback ``Host`` names are served (against DNS
    rebinding) and reads stay open. Beyond loopback every page needs the token,
    and without one this raises :class:`InvalidArgumentError` (nothing is served).
    """
    if is_loopback(host):
        return [*LOOPBACK_NAMES, host], False
    if token is None:
        raise InvalidArgumentError(
            f"--host {host} is beyond loopback: every payload, result and error would be "
            "readable by whoever reaches it; give --token (or ALKSTORE_DASHBOARD_TOKEN) so "
            "every page needs a login, or bind to 127.0.0.1"
        )
    return None, True
