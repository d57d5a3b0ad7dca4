"""The dashboard's queue pages: the overview with its chart, a queue's jobs, workers.

The shared layout and escaping live in :mod:`alkstore.dashboard.html`, the job
pages in :mod:`alkstore.dashboard.jobs`; no template engine.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from alkstore.admin import JOB_STATES, OutcomeCount, QueueInfo, QueueStats, WorkerInfo
from alkstore.core.display import age
from alkstore.core.job import Job
from alkstore.dashboard.charts import RANGES, ChartRange, chart
from alkstore.dashboard.html import esc, now_utc, options, when
from alkstore.dashboard.jobs import JobPages

__all__ = ["Page", "esc", "now_utc"]


def _flow(info: QueueInfo | None) -> str:
    """A queue's pause flag, limits, fairness and aging as escaped HTML:
    ``paused · concurrency 5 · fair (2 weighted) · aging 30s``."""
    if info is None:
        return '<span class="muted">-</span>'
    parts = ['<span class="bad">paused</span>'] if info.paused else []
    if info.concurrency is not None:
        parts.append(f"concurrency {info.concurrency}")
    if info.partition_concurrency is not None:
        parts.append(f"{info.partition_concurrency} per partition")
    if info.rate is not None:
        parts.append(esc(f"rate {info.rate}" + (f" burst {info.burst}" if info.burst else "")))
    if info.fair:
        parts.append(f"fair ({info.weights} weighted)" if info.weights else "fair")
    if info.aging_s is not None:
        parts.append(esc(f"aging {info.aging_s:g}s"))
    return " · ".join(parts) or '<span class="muted">-</span>'


class Page(JobPages):
    """A page of this dashboard for one request."""

    # -- overview -------------------------------------------------------------------
    def overview(
        self,
        stats: Sequence[QueueStats],
        history: Sequence[OutcomeCount],
        now: datetime,
        flows: Mapping[str, QueueInfo] | None = None,
        span: ChartRange = RANGES["1h"],
        *,
        nav: str = "",
    ) -> str:
        """The queues (``nav``: the links to the pages of queues before and after)."""
        flows = flows or {}
        rows = "".join(
            "<tr>"
            f'<td><a href="{esc(self.url("/queues/" + s.queue))}">{esc(s.queue)}</a></td>'
            f'<td class="num" data-col="pending">{s.pending}</td>'
            f'<td class="num">{s.delayed}</td>'
            f'<td class="num">{s.blocked}</td>'
            f'<td class="num">{s.processing}</td>'
            f'<td class="num{" bad" if s.dead else ""}">'
            f'<a href="{esc(self.url("/queues/" + s.queue, state="dead"))}">{s.dead}</a></td>'
            f'<td class="num">{esc(age(s.oldest_pending_age_s))}</td>'
            f'<td data-col="flow">{_flow(flows.get(s.queue))}</td>'
            "</tr>"
            for s in stats
        )
        table = (
            '<table id="queues"><thead><tr><th>queue</th><th class="num">pending (due)</th>'
            '<th class="num">delayed</th><th class="num">blocked</th>'
            '<th class="num">processing</th><th class="num">dead</th>'
            '<th class="num">oldest pending</th><th>flow control</th></tr></thead>'
            f"<tbody>{rows}</tbody></table>"
            if stats
            else '<p class="muted">No jobs in the store yet.</p>'
        ) + nav
        chart = self.chart(history, now, "all queues", span, "/")
        title = span.label[0].upper() + span.label[1:]
        return f'<section id="overview" data-live>{table}<h2>{title}</h2>{chart}</section>'

    def chart(
        self,
        history: Iterable[OutcomeCount],
        now: datetime,
        what: str,
        span: ChartRange = RANGES["1h"],
        path: str | None = None,
    ) -> str:
        """Jobs finished per bucket of ``span`` (charts.py); with ``path``, links to the
        other ranges of that page."""
        links = ""
        if path is not None:
            links = (
                '<nav class="ranges">'
                + " ".join(
                    f'<a href="{esc(self.url(path, range=r.key))}"'
                    f'{" class=on" if r is span else ""} data-range-link="{r.key}">{r.key}</a>'
                    for r in RANGES.values()
                )
                + "</nav>"
            )
        return chart(history, now, what, span, links)

    # -- jobs -------------------------------------------------------------------------

    def queue_page(
        self,
        queue: str,
        stats: QueueStats | None,
        jobs: Sequence[Job],
        history: Sequence[OutcomeCount],
        state: str | None,
        task: str | None,
        tasks: Sequence[str],
        now: datetime,
        back: str,
        *,
        span: ChartRange = RANGES["1h"],
        control: str = "",
        nav: str = "",
    ) -> str:
        """A queue's counts, chart, flow control (``control``) and a page of its jobs
        (``nav``: the links to the pages before and after)."""
        counts = (
            f"<b>{stats.pending}</b> pending · <b>{stats.delayed}</b> delayed · "
            f"<b>{stats.blocked}</b> blocked · <b>{stats.processing}</b> processing · "
            f"<b>{stats.dead}</b> dead · "
            f"oldest pending {esc(age(stats.oldest_pending_age_s))}"
            if stats
            else "no jobs"
        )
        state_options = options(("", *JOB_STATES), state)
        task_options = options(("", *tasks), task)
        filters = (
            f'<form method="get" class="filters" action="{esc(self.url("/queues/" + queue))}">'
            f'<label>state <select name="state">{state_options}</select></label> '
            f'<label>task <select name="task">{task_options}</select></label> '
            f'<input type="hidden" name="range" value="{esc(span.key)}">'
            "<button>Filter</button></form>"
        )
        listing = (
            self.bulk_form(jobs, now, back)
            if state == "dead"
            else self.job_table(jobs, now, select=False)
        )
        if task is not None:
            listing = f'<p class="muted">Jobs of task {esc(task)} on this page.</p>' + listing
        chart = self.chart(history, now, queue, span, "/queues/" + queue)
        summary = (
            f'<section id="queue-live" data-live><p class="counts">{counts}</p>{chart}</section>'
        )
        return f"{summary}<h2>Flow control</h2>{control}<h2>Jobs</h2>{filters}{nav}{listing}{nav}"

    # -- workers ------------------------------------------------------------------------
    def workers_page(
        self,
        workers: Sequence[WorkerInfo],
        now: datetime,
        holding: Mapping[str, Sequence[Job]] | None = None,
        *,
        nav: str = "",
    ) -> str:
        """The registered workers; ``holding``: the processing jobs claimed by each;
        ``nav``: the links to the pages of workers before and after."""
        holding = holding or {}
        rows = "".join(
            f'<tr class="{"alive" if w.alive else "gone"}"><td><code>{esc(w.id)}</code></td>'
            f'<td><span class="badge {"ok" if w.alive else "bad"}">'
            f"{'alive' if w.alive else 'gone'}</span></td>"
            f"<td>{esc(w.host)}</td><td class=num>{w.pid}</td>"
            f"<td>{esc(', '.join(w.queues))}</td>"
            f'<td class="num">{w.running}/{w.concurrency}</td>'
            f"<td>{when(w.started_at, now)}</td><td>{esc(age(w.seen_ago_s))} ago</td>"
            f'<td class="holds" data-holds="{esc(w.id)}">{self._holds(holding.get(w.id, ()))}</td>'
            "</tr>"
            for w in workers
        )
        table = (
            '<table id="workers"><thead><tr><th>id</th><th>state</th><th>host</th>'
            '<th class="num">pid</th><th>queues</th><th class="num">running</th><th>started</th>'
            "<th>last seen</th><th>holds</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>"
            if workers
            else '<p class="muted">No workers registered.</p>'
        ) + nav
        return f'<section id="workers-live" data-live>{table}</section>'

    def _holds(self, jobs: Sequence[Job], shown: int = 20) -> str:
        """Links to the jobs a worker holds (the first ``shown``, then how many more)."""
        if not jobs:
            return '<span class="muted">-</span>'
        links = "".join(
            f'<a href="{esc(self.url(f"/jobs/{j.id}"))}" title="{esc(j.queue)}">{j.id}</a>'
            for j in jobs[:shown]
        )
        more = f' <span class="muted">+{len(jobs) - shown} more</span>' if len(jobs) > shown else ""
        return links + more
