"""A queue's flow control on its dashboard page: its stored state (paused, limits,
fair claiming, aging) and the actions that change it (pause, resume, limits).

The actions are the public API's (``Queue.pause``, ``resume``, ``set_limits``),
each a checked POST (token or ``auth`` hook, CSRF, same origin: ``site.py``),
answered by a redirect back to the queue page with what was done. Limits are
replaced as a whole, as ``set_limits`` does: an empty field is no such limit.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from alkstore.admin import JOB_STATES, Admin, WorkerInfo
from alkstore.core.flow import QueueSettings, parse_rate
from alkstore.core.job import Job
from alkstore.dashboard.charts import pick_range
from alkstore.dashboard.html import PageBase, esc, now_utc
from alkstore.dashboard.paging import key_pager
from alkstore.dashboard.site import LIST_LIMIT, Dashboard, Refused, parse_id, redirect
from alkstore.errors import InvalidArgumentError, InvalidNameError
from alkstore.queue import Queue
from alkstore.tasks import BadCall, decode_call

__all__ = ["queue_control_routes", "queue_state", "queue_view"]


def _describe(settings: QueueSettings) -> list[tuple[str, str]]:
    rate = (
        f"{settings.rate_count} per {settings.rate_period_s:g}s"
        + (f", burst {settings.burst}" if settings.burst else "")
        if settings.rate_count is not None and settings.rate_period_s is not None
        else None
    )
    return [
        ("concurrency", str(settings.concurrency) if settings.concurrency is not None else ""),
        (
            "per partition",
            str(settings.partition_concurrency)
            if settings.partition_concurrency is not None
            else "",
        ),
        ("rate", rate or ""),
        ("fair", "round-robin across partition keys" if settings.fair else ""),
        ("aging", f"a priority level per {settings.aging_s:g}s waited" if settings.aging_s else ""),
    ]


def queue_state(page: PageBase, settings: QueueSettings, back: str) -> str:
    """The queue's state as HTML with its pause/resume and limits forms."""
    name = settings.queue
    badge = (
        '<span class="badge bad" id="queue-paused">paused: no worker claims from it</span>'
        if settings.paused
        else '<span class="badge ok" id="queue-paused">running</span>'
    )
    toggle = (
        page.action(f"/queues/{name}/resume", "Resume", back=back)
        if settings.paused
        else page.action(f"/queues/{name}/pause", "Pause", back=back, danger=True)
    )
    shown = "".join(
        f'<dt>{esc(k)}</dt><dd data-setting="{esc(k)}">'
        f"{esc(v) if v else '<span class=muted>none</span>'}</dd>"
        for k, v in _describe(settings)
    )
    rate = (
        str(parse_rate(f"{settings.rate_count}/{settings.rate_period_s:g}s"))
        if settings.rate_count is not None and settings.rate_period_s is not None
        else ""
    )
    fields = (
        ("concurrency", "concurrency", settings.concurrency, "numeric"),
        ("per partition", "partition_concurrency", settings.partition_concurrency, "numeric"),
        ("rate", "rate", rate, "text"),
        ("burst", "burst", settings.burst if settings.rate_count is not None else None, "numeric"),
    )
    inputs = "".join(
        f'<label>{esc(label)} <input name="{key}" value="{esc("" if value is None else value)}" '
        f'inputmode="{mode}" size="8" placeholder="none"></label> '
        for label, key, value, mode in fields
    )
    if page.can_act:
        limits = (
            f'<form method="post" action="{esc(page.url(f"/queues/{name}/limits"))}" '
            f'class="limits" id="limits-form">{page.csrf_field()}'
            f'<input type="hidden" name="next" value="{esc(back)}">{inputs}'
            "<button>Set limits</button> "
            '<span class="muted">empty: no such limit; rate as 100/s, 10/m</span></form>'
        )
    else:
        limits = ""
    return (
        f'<section id="queue-state"><p class="queue-flow">{badge} {toggle}</p>'
        f"<dl>{shown}</dl>{limits}</section>"
    )


def pager(
    page: PageBase, path: str, jobs: list[Job], more: tuple[bool, bool], **query: object
) -> str:
    """Links to the pages before and after ``jobs`` (``more``: whether each exists)."""
    return key_pager(page, path, [j.id for j in jobs], more, **query)


async def queue_view(dash: Dashboard, request: Request) -> Response:
    """``GET /queues/{queue}``: counts, chart (``?range=``), flow control and a keyset
    page of its jobs (``?after=`` / ``?before=`` a job id; ``?state=``, ``?task=``)."""
    queue = request.path_params["queue"]
    params = request.query_params
    state = params.get("state") or None
    task = params.get("task") or None
    span = pick_range(params.get("range"))
    page = await dash.page(request, params.get("msg"))
    after_text, before_text = params.get("after", ""), params.get("before", "")
    after = parse_id(after_text) if after_text else None
    before = parse_id(before_text) if before_text else None
    problem = None
    if state is not None and state not in JOB_STATES:
        problem = f"unknown state {state!r}: use one of {', '.join(JOB_STATES)}"
    elif (after_text and after is None) or (before_text and before is None) or (after and before):
        problem = f"invalid page: give after or before (a job id), got {request.url.query!r}"
    if problem is not None:
        return dash.html(page, f"Queue {queue}", page.refused(problem), "overview", status=400)
    store = await dash.store()
    admin = store.admin()
    rows = await admin.list_jobs(queue, state, LIST_LIMIT + 1, after=after, before=before)
    extra = len(rows) > LIST_LIMIT
    jobs = rows[-LIST_LIMIT:] if before is not None else rows[:LIST_LIMIT]
    # a page before this one exists if we came from one (after) or there was one more
    more = (after is not None or (before is not None and extra), before is not None or extra)
    tasks = sorted({t for t in map(task_of, jobs) if t is not None})
    if task is not None:
        jobs = [j for j in jobs if task_of(j) == task]
    stats = next((s for s in await admin.stats() if s.queue == queue), None)
    history = await admin.outcome_history(
        span.minutes, queue=queue, bucket_minutes=span.bucket_minutes
    )
    back = str(request.url.path) + (f"?{request.url.query}" if request.url.query else "")
    query = {"state": state, "task": task, "range": span.key if span.key != "1h" else None}
    nav = pager(page, "/queues/" + queue, jobs, more, **query)
    control = queue_state(page, await store.queue(queue).settings(), back)
    body = page.queue_page(
        queue, stats, jobs, history, state, task, tasks, now_utc(), back,
        span=span, control=control, nav=nav,
    )  # fmt: skip
    return dash.html(page, f"Queue {queue}", body, "overview")


async def held_jobs(admin: Admin, workers: Sequence[WorkerInfo]) -> dict[str, list[Job]]:
    """The processing jobs of the workers' queues by the worker that claimed them (the
    first ``LIST_LIMIT`` of each queue, in id order)."""
    held: dict[str, list[Job]] = {}
    for queue in sorted({q for w in workers for q in w.queues}):
        for job in await admin.list_jobs(queue, "processing", LIST_LIMIT):
            if job.worker_id is not None:
                held.setdefault(job.worker_id, []).append(job)
    return held


def task_of(job: Job) -> str | None:
    """The task a job's payload calls, if it is a task call."""
    try:
        return decode_call(job.payload)[0]
    except BadCall:
        return None


def _number(fields: dict[str, list[str]], key: str) -> int | None:
    text = (fields.get(key) or [""])[0].strip()
    if not text:
        return None
    if not text.isdigit():
        raise InvalidArgumentError(f"{key} must be a whole number >= 1 or empty, got {text!r}")
    return int(text)


def queue_control_routes(dash: Dashboard) -> list[Route]:
    """The POST routes of the queue page's actions."""

    def action(
        do: Callable[[Queue, dict[str, list[str]]], Awaitable[str]],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                fields = await dash.form(request)
            except Refused as e:
                return await dash.refused(request, str(e))
            back = dash.back(request, fields)
            try:
                queue = (await dash.store()).queue(request.path_params["queue"])
                done = await do(queue, fields)
            except (InvalidArgumentError, InvalidNameError) as e:
                return redirect(back, f"refused: {e}")
            return redirect(back, done)

        return endpoint

    async def pause(queue: Queue, _fields: dict[str, list[str]]) -> str:
        await queue.pause()
        return f"paused queue {queue.name}: no worker claims from it until resumed"

    async def resume(queue: Queue, _fields: dict[str, list[str]]) -> str:
        await queue.resume()
        return f"resumed queue {queue.name}"

    async def limits(queue: Queue, fields: dict[str, list[str]]) -> str:
        rate = (fields.get("rate") or [""])[0].strip() or None
        await queue.set_limits(
            concurrency=_number(fields, "concurrency"),
            partition_concurrency=_number(fields, "partition_concurrency"),
            rate=rate,
            burst=_number(fields, "burst"),
        )
        settings = await queue.settings()
        set_ = [f"{k} {v}" for k, v in _describe(settings)[:3] if v]
        return f"limits of {queue.name}: {', '.join(set_) or 'none'}"

    return [
        Route("/queues/{queue}/pause", action(pause), methods=["POST"]),
        Route("/queues/{queue}/resume", action(resume), methods=["POST"]),
        Route("/queues/{queue}/limits", action(limits), methods=["POST"]),
    ]
