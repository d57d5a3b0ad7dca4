"""What every dashboard page shares: escaping, times, the layout, forms and actions.

Every value from the store goes through :func:`esc` (``html.escape`` with quotes)
before it reaches the page, so a payload or an error is shown as text, never
run as HTML. Elements with ``data-live`` and an ``id`` are refreshed in place
by ``live.js``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape
from urllib.parse import urlencode

from alkstore.core.display import age
from alkstore.core.job import Job

__all__ = [
    "PREVIEW_CHARS",
    "PageBase",
    "esc",
    "now_utc",
    "options",
    "preview",
    "shown_state",
    "size",
    "when",
]

# A payload, result or error longer than this is cut on the pages (a 50 MB payload
# would be 50 MB of HTML, fetched again at every refresh); the whole is one link away.
PREVIEW_CHARS = 4096


def esc(value: object) -> str:
    """Text as HTML text or attribute value."""
    return escape(str(value), quote=True)


def when(moment: datetime | None, now: datetime) -> str:
    if moment is None:
        return '<span class="muted">-</span>'
    delta = (moment - now).total_seconds()
    rel = f"in {age(delta)}" if delta > 0.5 else f"{age(-delta)} ago" if delta < -0.5 else "now"
    stamp = moment.strftime("%Y-%m-%d %H:%M:%S")
    return f'<time datetime="{esc(moment.isoformat())}" title="{esc(stamp)}Z">{esc(rel)}</time>'


def shown_state(job: Job, now: datetime) -> str:
    """The state a job is shown with: ``delayed`` for a pending job not yet due (the
    ``delayed`` of ``Admin.stats``: pending with ``run_at`` after now), else its state."""
    return "delayed" if job.state == "pending" and job.run_at > now else job.state


def size(n: int) -> str:
    """A byte or character count for people: ``812 B``, ``4.0 KB``, ``52.4 MB``."""
    if n < 1024:
        return f"{n} B"
    if n < 1024**2:
        return f"{n / 1024:.1f} KB"
    if n < 1024**3:
        return f"{n / 1024**2:.1f} MB"
    return f"{n / 1024**3:.1f} GB"


def preview(text: str, whole: int, raw_url: str, what: str, cls: str, ident: str) -> str:
    """``text`` in a ``<pre>``, cut to :data:`PREVIEW_CHARS` when it or ``whole``
    (its full size) is longer, saying how much is shown and linking to the whole
    at ``raw_url``."""
    if len(text) <= PREVIEW_CHARS and whole <= PREVIEW_CHARS:
        return f'<pre class="{cls}" id="{ident}">{esc(text)}</pre>'
    note = (
        f'<p class="muted cut" id="{ident}-cut">The first {size(PREVIEW_CHARS)} of '
        f'{size(whole)} shown: <a href="{esc(raw_url)}">the whole {esc(what)}</a>.</p>'
    )
    return f'{note}<pre class="{cls}" id="{ident}">{esc(text[:PREVIEW_CHARS])}…</pre>'


def options(values: Iterable[str], chosen: str | None) -> str:
    return "".join(
        f'<option value="{esc(v)}"{" selected" if v == chosen else ""}>{esc(v or "any")}</option>'
        for v in values
    )


@dataclass
class PageBase:
    """Where the page is mounted, who may act, the CSRF token; the layout and forms."""

    base: str
    can_act: bool
    csrf: str
    login_enabled: bool
    refresh_ms: int
    message: str | None = None

    def url(self, path: str, **query: object) -> str:
        q = {k: v for k, v in query.items() if v not in (None, "")}
        return self.base + path + (("?" + urlencode(q)) if q else "")

    # -- layout -------------------------------------------------------------------
    def layout(self, title: str, body: str, current: str) -> str:
        nav = "".join(
            f'<a href="{esc(self.url(path))}"{" class=on" if current == key else ""}>{label}</a>'
            for key, path, label in (
                ("overview", "/", "Queues"),
                ("dead", "/dead", "Dead letters"),
                ("search", "/search", "Search"),
                ("workers", "/workers", "Workers"),
                ("health", "/health", "Health"),
            )
        )
        if self.can_act:
            who = (
                f'<form method="post" action="{esc(self.url("/logout"))}" class="inline">'
                f"{self.csrf_field()}<button>Log out</button></form>"
                if self.login_enabled
                else '<span class="badge ok">actions enabled</span>'
            )
        elif self.login_enabled:
            who = f'<a href="{esc(self.url("/login"))}">Log in to act</a>'
        else:
            who = '<span class="badge">read-only</span>'
        flash = f'<p class="flash" role="status">{esc(self.message)}</p>' if self.message else ""
        lookup = (
            f'<form method="get" action="{esc(self.url("/jobs"))}" class="lookup">'
            '<input name="id" inputmode="numeric" placeholder="job id" aria-label="job id">'
            "<button>Find</button></form>"
        )
        return (
            "<!doctype html><html lang=en><head><meta charset=utf-8>"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)} · alkstore</title>"
            f'<link rel="icon" href="{esc(self.url("/assets/icon.svg"))}">'
            f'<link rel="stylesheet" href="{esc(self.url("/assets/style.css"))}">'
            f'<script src="{esc(self.url("/assets/live.js"))}" defer></script>'
            f'</head><body data-refresh-ms="{self.refresh_ms}">'
            f'<header><strong class="brand">alkstore</strong><nav>{nav}</nav>{lookup}'
            f'<span class="who">{who}</span></header>'
            f"<main><h1>{esc(title)}</h1>{flash}{body}</main>"
            '<footer>updated <span id="updated">now</span></footer></body></html>'
        )

    def csrf_field(self) -> str:
        return f'<input type="hidden" name="csrf" value="{esc(self.csrf)}">'

    def action(self, path: str, label: str, *, back: str, danger: bool = False) -> str:
        """A one-button POST form (disabled when this visitor may not act)."""
        if not self.can_act:
            return f'<button disabled title="read-only: log in to act">{esc(label)}</button>'
        cls = ' class="danger"' if danger else ""
        return (
            f'<form method="post" action="{esc(self.url(path))}" class="inline">'
            f'{self.csrf_field()}<input type="hidden" name="next" value="{esc(back)}">'
            f"<button{cls}>{esc(label)}</button></form>"
        )

    # -- overview -------------------------------------------------------------------

    def login_page(self, error: str | None) -> str:
        problem = f'<p class="flash bad">{esc(error)}</p>' if error else ""
        return (
            f'{problem}<form method="post" action="{esc(self.url("/login"))}" class="login">'
            f'{self.csrf_field()}<label>Token <input type="password" name="token" '
            'autocomplete="current-password" autofocus></label> <button>Log in</button></form>'
        )

    def refused(self, reason: str) -> str:
        return f'<p class="flash bad">{esc(reason)}</p>'


def now_utc() -> datetime:
    return datetime.now(UTC)
