"""Keyset paging on the dashboard's lists: read a page's cursor (``?after=`` /
``?before=`` a key, ``?limit=``) and draw the Earlier / Later links.

A list is paged by a key it is ordered by (a job id, a worker id, a queue name),
never by an offset: each page reads from its cursor, however deep it is.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TypeVar

from alkstore.dashboard.html import PageBase, esc

__all__ = ["Cursor", "fetch_page", "key_pager", "read_cursor"]

T = TypeVar("T")


class Cursor:
    """A page's cursor as asked: ``after`` or ``before`` a key, at most ``limit`` rows."""

    def __init__(self, after: str | None, before: str | None, limit: int, default: int) -> None:
        self.after, self.before, self.limit = after, before, limit
        self.sized: dict[str, object] = {"limit": limit} if limit != default else {}


def read_cursor(params: Mapping[str, str], default: int) -> Cursor | str:
    """The cursor of ``?after=`` / ``?before=`` / ``?limit=`` (1 to ``default``), or
    what is wrong with it."""
    after, before = params.get("after") or None, params.get("before") or None
    text = params.get("limit", "").strip()
    limit = int(text) if text.isdigit() and len(text) < 7 else (default if not text else 0)
    if after is not None and before is not None:
        return "invalid page: give after or before, not both"
    if not 1 <= limit <= default:
        return f"invalid page: limit must be 1 to {default}, got {text!r}"
    return Cursor(after, before, limit, default)


async def fetch_page(
    fetch: Callable[..., Awaitable[list[T]]], key: Callable[[T], str], cursor: Cursor
) -> tuple[list[T], tuple[bool, bool]]:
    """One page by ``fetch(after=, before=, limit=)`` and whether there is a page
    before and after it (one key read each way)."""
    rows = await fetch(after=cursor.after, before=cursor.before, limit=cursor.limit)
    if not rows:
        return rows, (False, False)
    earlier = await fetch(before=key(rows[0]), limit=1)
    later = await fetch(after=key(rows[-1]), limit=1)
    return rows, (bool(earlier), bool(later))


def key_pager(
    page: PageBase,
    path: str,
    keys: Sequence[object],
    more: tuple[bool, bool],
    **query: object,
) -> str:
    """Links to the pages before and after the rows keyed ``keys`` (``more``: whether
    each exists); with no rows but a way back, a link to the first page."""
    earlier, later = more
    links = []
    if earlier and keys:
        href = page.url(path, before=keys[0], **query)
        links.append(f'<a href="{esc(href)}" rel="prev">← Earlier</a>')
    if later and keys:
        href = page.url(path, after=keys[-1], **query)
        links.append(f'<a href="{esc(href)}" rel="next">Later →</a>')
    if not keys and (earlier or later):
        links.append(f'<a href="{esc(page.url(path, **query))}" rel="first">First page</a>')
    return f'<nav class="pages">{" · ".join(links)}</nav>' if links else ""
