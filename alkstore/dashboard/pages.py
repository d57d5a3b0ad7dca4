"""The dashboard's queue pages: the overview with its chart, a queue's jobs, workers.

The shared layout and escaping live in :mod:`alkstore.dashboard.html`, the job
pages in :mod:`alkstore.dashboard.jobs`; no template engine.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta

from alkstore.admin import JOB_STATES, OutcomeCount, QueueInfo, QueueStats, WorkerInfo
from alkstore.core.display import age
from alkstore.core.job import Job
from alkstore.dashboard.html import esc, now_utc, options, when
from alkstore.dashboard.jobs import JobPages

__all__ = ["Page", "esc", "now_utc"]

FAILED = ("retry", "dead", "lost", "interrupted")


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
    ) -> str:
        flows = flows or {}
        rows = "".join(
            "<tr>"
            f'<td><a href="{esc(self.url("/queues/" + s.queue))}">{esc(s.queue)}</a></td>'
            f'<td class="num" data-col="pending">{s.pending}</td>'
            f'<td class="num">{s.delayed}</td>'
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
            '<th class="num">delayed</th><th class="num">processing</th><th class="num">dead</th>'
            '<th class="num">oldest pending</th><th>flow control</th></tr></thead>'
            f"<tbody>{rows}</tbody></table>"
            if stats
            else '<p class="muted">No jobs in the store yet.</p>'
        )
        chart = self.chart(history, now, "all queues")
        return f'<section id="overview" data-live>{table}<h2>Last hour</h2>{chart}</section>'

    def chart(self, history: Iterable[OutcomeCount], now: datetime, what: str) -> str:
        """Jobs finished per minute over the last hour: successes and failures, as SVG."""
        minute0 = now.replace(second=0, microsecond=0) - timedelta(minutes=59)
        ok = [0] * 60
        bad = [0] * 60
        for h in history:
            i = int((h.minute - minute0).total_seconds() // 60)
            if 0 <= i < 60:
                if h.outcome == "success":
                    ok[i] += h.jobs
                elif h.outcome in FAILED:  # snoozed and cancelled runs are neither
                    bad[i] += h.jobs
        total_ok, total_bad = sum(ok), sum(bad)
        total = total_ok + total_bad
        rate = f"{100 * total_bad / total:.1f}%" if total else "-"
        recent = sum(ok[-5:]) + sum(bad[-5:])
        peak = max([a + b for a, b in zip(ok, bad, strict=True)] + [1])
        width, height, bar = 720, 140, 12
        bars = []
        for i in range(60):
            x = i * bar
            h_ok = round((height - 20) * ok[i] / peak)
            h_bad = round((height - 20) * bad[i] / peak)
            label = (minute0 + timedelta(minutes=i)).strftime("%H:%M")
            tip = f"{label}Z: {ok[i]} succeeded, {bad[i]} failed"
            y_ok = height - 20 - h_ok
            bars.append(
                f"<g><title>{esc(tip)}</title>"
                f'<rect class="ok" x="{x + 1}" y="{y_ok}" width="{bar - 2}" height="{h_ok}"/>'
                f'<rect class="bad" x="{x + 1}" y="{y_ok - h_bad}" width="{bar - 2}"'
                f' height="{h_bad}"/></g>'
            )
        axis = (
            f'<text x="0" y="{height - 4}">{esc(minute0.strftime("%H:%M"))}Z</text>'
            f'<text x="{width}" y="{height - 4}" text-anchor="end">now</text>'
        )
        if total:
            axis += f'<text x="4" y="12">peak {peak}/min</text>'
        else:
            axis += (
                f'<text x="{width // 2}" y="{height // 2}" text-anchor="middle">'
                "no jobs finished in the last hour</text>"
            )
        svg = (
            f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" '
            f'aria-label="jobs finished per minute, {esc(what)}">{"".join(bars)}{axis}</svg>'
        )
        return (
            '<div class="stats">'
            f'<div><b data-stat="throughput">{recent / 5:.1f}</b> jobs/min (last 5 min)</div>'
            f'<div><b data-stat="finished">{total}</b> finished (hour)</div>'
            f'<div><b data-stat="failure-rate">{rate}</b> failure rate</div>'
            '<div class="legend"><i class="ok"></i>succeeded <i class="bad"></i>'
            "failed (retry, dead, lost, interrupted)</div>"
            f"</div>{svg}"
        )

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
    ) -> str:
        counts = (
            f"<b>{stats.pending}</b> pending · <b>{stats.delayed}</b> delayed · "
            f"<b>{stats.processing}</b> processing · <b>{stats.dead}</b> dead · "
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
            "<button>Filter</button></form>"
        )
        listing = (
            self.bulk_form(jobs, now, back)
            if state == "dead"
            else self.job_table(jobs, now, select=False)
        )
        if len(jobs) >= 200:
            listing = f'<p class="muted">The {len(jobs)} oldest matching jobs.</p>' + listing
        summary = (
            f'<section id="queue-live" data-live><p class="counts">{counts}</p>'
            f"{self.chart(history, now, queue)}</section>"
        )
        return f"{summary}<h2>Jobs</h2>{filters}{listing}"

    # -- workers ------------------------------------------------------------------------
    def workers_page(self, workers: Sequence[WorkerInfo], now: datetime) -> str:
        rows = "".join(
            f'<tr class="{"alive" if w.alive else "gone"}"><td><code>{esc(w.id)}</code></td>'
            f'<td><span class="badge {"ok" if w.alive else "bad"}">'
            f"{'alive' if w.alive else 'gone'}</span></td>"
            f"<td>{esc(w.host)}</td><td class=num>{w.pid}</td>"
            f"<td>{esc(', '.join(w.queues))}</td>"
            f'<td class="num">{w.running}/{w.concurrency}</td>'
            f"<td>{when(w.started_at, now)}</td><td>{esc(age(w.seen_ago_s))} ago</td></tr>"
            for w in workers
        )
        table = (
            '<table id="workers"><thead><tr><th>id</th><th>state</th><th>host</th>'
            '<th class="num">pid</th><th>queues</th><th class="num">running</th><th>started</th>'
            "<th>last seen</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>"
            if workers
            else '<p class="muted">No workers registered.</p>'
        )
        return f'<section id="workers-live" data-live>{table}</section>'
