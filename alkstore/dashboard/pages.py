"""The dashboard's HTML: small functions returning escaped markup, no template engine.

Every value from the store goes through :func:`esc` (``html.escape`` with quotes)
before it reaches the page, so a payload or an error is shown as text, never
run as HTML. Elements with ``data-live`` and an ``id`` are refreshed in place
by ``live.js``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from html import escape
from urllib.parse import urlencode

from alkstore.admin import JOB_STATES, OutcomeCount, QueueInfo, QueueStats, WorkerInfo
from alkstore.cli.render import age, describe_payload
from alkstore.core.job import Job
from alkstore.core.results import JobOutcome

__all__ = ["Page", "esc"]

FAILED = ("retry", "dead", "lost", "interrupted")


def _flow(info: QueueInfo | None) -> str:
    """A queue's pause flag and limits (issue 10) as escaped HTML: ``paused · concurrency 5``."""
    if info is None:
        return '<span class="muted">-</span>'
    parts = ['<span class="bad">paused</span>'] if info.paused else []
    if info.concurrency is not None:
        parts.append(f"concurrency {info.concurrency}")
    if info.partition_concurrency is not None:
        parts.append(f"{info.partition_concurrency} per partition")
    if info.rate is not None:
        parts.append(esc(f"rate {info.rate}" + (f" burst {info.burst}" if info.burst else "")))
    return " · ".join(parts) or '<span class="muted">-</span>'


def esc(value: object) -> str:
    """Text as HTML text or attribute value."""
    return escape(str(value), quote=True)


def _when(moment: datetime | None, now: datetime) -> str:
    if moment is None:
        return '<span class="muted">-</span>'
    delta = (moment - now).total_seconds()
    rel = f"in {age(delta)}" if delta > 0.5 else f"{age(-delta)} ago" if delta < -0.5 else "now"
    stamp = moment.strftime("%Y-%m-%d %H:%M:%S")
    return f'<time datetime="{esc(moment.isoformat())}" title="{esc(stamp)}Z">{esc(rel)}</time>'


def _options(values: Iterable[str], chosen: str | None) -> str:
    return "".join(
        f'<option value="{esc(v)}"{" selected" if v == chosen else ""}>{esc(v or "any")}</option>'
        for v in values
    )


@dataclass
class Page:
    """What every page shares: where it is mounted, who may act, the CSRF token."""

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
                ("workers", "/workers", "Workers"),
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
    def job_rows(self, jobs: Sequence[Job], now: datetime, *, select: bool) -> str:
        out = []
        for job in jobs:
            error = (job.last_error or "").splitlines()[0] if job.last_error else ""
            box = (
                f'<td><input type="checkbox" name="id" value="{job.id}" '
                f'aria-label="select job {job.id}"></td>'
                if select
                else ""
            )
            out.append(
                f'<tr data-job="{job.id}">{box}'
                f'<td><a href="{esc(self.url(f"/jobs/{job.id}"))}">{job.id}</a></td>'
                f'<td><a href="{esc(self.url("/queues/" + job.queue))}">{esc(job.queue)}</a></td>'
                f'<td><span class="state {esc(job.state)}">{esc(job.state)}</span></td>'
                f"<td><code>{esc(describe_payload(job, 70))}</code></td>"
                f'<td class="num">{job.attempts}/{job.max_attempts}</td>'
                f"<td>{_when(job.died_at or job.run_at, now)}</td>"
                f'<td class="err">{esc(error[:80])}</td></tr>'
            )
        return "".join(out)

    def job_table(self, jobs: Sequence[Job], now: datetime, *, select: bool) -> str:
        if not jobs:
            return '<p class="muted">No jobs match.</p>'
        head = "<th></th>" if select else ""
        return (
            f'<table class="jobs"><thead><tr>{head}<th>id</th><th>queue</th><th>state</th>'
            '<th>call / payload</th><th class="num">attempts</th><th>run at / died</th>'
            "<th>last error</th>"
            f"</tr></thead><tbody>{self.job_rows(jobs, now, select=select)}</tbody></table>"
        )

    def bulk_form(self, jobs: Sequence[Job], now: datetime, back: str) -> str:
        """Dead jobs with checkboxes and a bulk requeue button."""
        if not self.can_act:
            return self.job_table(jobs, now, select=False)
        return (
            f'<form method="post" action="{esc(self.url("/requeue"))}" id="bulk">'
            f'{self.csrf_field()}<input type="hidden" name="next" value="{esc(back)}">'
            + "".join(f'<input type="hidden" name="shown" value="{j.id}">' for j in jobs)
            + f'<p><button name="all" value="">Requeue selected</button> '
            f'<button name="all" value="1">Requeue all {len(jobs)} shown</button></p>'
            f"{self.job_table(jobs, now, select=True)}</form>"
        )

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
        options = _options(("", *JOB_STATES), state)
        task_options = _options(("", *tasks), task)
        filters = (
            f'<form method="get" class="filters" action="{esc(self.url("/queues/" + queue))}">'
            f'<label>state <select name="state">{options}</select></label> '
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

    def dead_page(self, jobs: Sequence[Job], total: int, now: datetime, back: str) -> str:
        note = (
            f'<p id="dead-count" data-live>{total} dead job(s)'
            f"{f', {len(jobs)} shown' if total > len(jobs) else ''}.</p>"
        )
        return note + self.bulk_form(jobs, now, back)

    def job_page(self, job: Job, now: datetime, back: str) -> str:
        try:
            payload = json.dumps(job.json(), indent=2, ensure_ascii=False)
        except (ValueError, UnicodeDecodeError):
            try:
                payload = job.payload.decode()
            except UnicodeDecodeError:
                payload = repr(job.payload)
        fields = [
            ("queue", f'<a href="{esc(self.url("/queues/" + job.queue))}">{esc(job.queue)}</a>'),
            (
                "state",
                f'<span class="state {esc(job.state)}" id="job-state">{esc(job.state)}</span>',
            ),
            ("call", f"<code>{esc(describe_payload(job, 200))}</code>"),
            ("attempts", f"{job.attempts} of {job.max_attempts}"),
            ("priority", str(job.priority)),
            ("dedupe key", f"<code>{esc(job.dedupe_key)}</code>" if job.dedupe_key else "-"),
            ("created", _when(job.created_at, now)),
            ("run at", _when(job.run_at, now)),
            ("expires", _when(job.expires_at, now)),
            ("visibility timeout", f"{job.visibility_timeout_s:g}s"),
            ("retry base", f"{job.retry_base_s:g}s"),
            ("worker" if job.state == "processing" else "last worker", esc(job.worker_id or "-")),
        ]
        if job.state == "processing":
            fields.append(("claim expires", _when(job.claim_expires_at, now)))
        if job.died_at is not None:
            fields.append(("died", _when(job.died_at, now)))
        if job.state == "processing" and job.claim_expires_at is not None:
            fields.append(("timing", f"running; claim lapses {_when(job.claim_expires_at, now)}"))
        elif job.state == "pending" and job.run_at > now:
            fields.append(("timing", f"delayed: due {_when(job.run_at, now)}"))
        elif job.state == "pending":
            waited = (now - job.run_at).total_seconds()
            fields.append(("timing", f"due, waiting for a worker for {esc(age(waited))}"))
        elif job.died_at is not None:
            waited = (job.died_at - job.created_at).total_seconds()
            fields.append(("timing", f"died {esc(age(waited))} after it was created"))
        dl = "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in fields)
        actions = []
        if job.state == "dead":
            actions.append(self.action(f"/jobs/{job.id}/requeue", "Requeue", back=back))
        else:
            actions.append(self.action(f"/jobs/{job.id}/cancel", "Cancel", back=back, danger=True))
        error = (
            f'<h2>Last error</h2><pre class="error" id="last-error">{esc(job.last_error)}</pre>'
            if job.last_error
            else ""
        )
        return (
            f'<p class="actions">{"".join(actions)}</p>'
            f'<section id="job-live" data-live><dl>{dl}</dl></section>'
            f'<h2>Payload</h2><pre class="payload" id="payload">{esc(payload)}</pre>{error}'
        )

    def outcome_page(self, outcome: JobOutcome, now: datetime) -> str:
        """A finished job whose row is gone: only its kept result is left."""
        fields = [
            (
                "queue",
                f'<a href="{esc(self.url("/queues/" + outcome.queue))}">{esc(outcome.queue)}</a>',
            ),
            (
                "outcome",
                f'<span class="state {esc(outcome.outcome)}" id="job-state">'
                f"{esc(outcome.outcome)}</span>",
            ),
            ("attempts", str(outcome.attempts)),
            ("finished", _when(outcome.finished_at, now)),
        ]
        dl = "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in fields)
        result = ""
        if outcome.value_json is not None:
            shown = json.dumps(outcome.value, indent=2, ensure_ascii=False)
            result = f'<h2>Result</h2><pre class="payload" id="result">{esc(shown)}</pre>'
        return f"<dl>{dl}</dl>{result}"

    # -- workers ------------------------------------------------------------------------
    def workers_page(self, workers: Sequence[WorkerInfo], now: datetime) -> str:
        rows = "".join(
            f'<tr class="{"alive" if w.alive else "gone"}"><td><code>{esc(w.id)}</code></td>'
            f'<td><span class="badge {"ok" if w.alive else "bad"}">'
            f"{'alive' if w.alive else 'gone'}</span></td>"
            f"<td>{esc(w.host)}</td><td class=num>{w.pid}</td>"
            f"<td>{esc(', '.join(w.queues))}</td>"
            f'<td class="num">{w.running}/{w.concurrency}</td>'
            f"<td>{_when(w.started_at, now)}</td><td>{esc(age(w.seen_ago_s))} ago</td></tr>"
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

    def login_page(self, error: str | None) -> str:
        problem = f'<p class="flash bad">{esc(error)}</p>' if error else ""
        return (
            f'{problem}<form method="post" action="{esc(self.url("/login"))}" class="login">'
            f'{self.csrf_field()}<label>Token <input type="password" name="token" '
            'autocomplete="current-password" autofocus></label> <button>Log in</button></form>'
        )

    def refused(self, reason: str) -> str:
        return f'<p class="flash bad">{esc(reason)}</p>'


STYLE = """
:root{--fg:#1d232b;--muted:#6b7580;--line:#dde2e7;--ok:#2f9e62;--bad:#d2483c;--acc:#2b6cb0}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);
background:#f6f8fa}
header{display:flex;gap:1.5rem;align-items:center;padding:.6rem 1.2rem;background:#1d232b;
color:#fff}
header a{color:#c9d4df;text-decoration:none;margin-right:1rem}
header a.on,header a:hover{color:#fff;text-decoration:underline}
.brand{font-size:1.1rem}
.who{margin-left:auto}
main{padding:1rem 1.5rem;max-width:1200px}
h1{font-size:1.4rem;margin:.3rem 0 1rem}h2{font-size:1.1rem;margin:1.4rem 0 .5rem}
table{border-collapse:collapse;width:100%;background:#fff;border:1px solid var(--line)}
th,td{padding:.35rem .6rem;border-bottom:1px solid var(--line);text-align:left;
vertical-align:top}
th{background:#eef1f4;font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
td.bad a{color:var(--bad);font-weight:600}
td.err{color:var(--bad);font-size:.9em}
a{color:var(--acc)}
code{font:12.5px ui-monospace,SFMono-Regular,Menlo,monospace}
pre{background:#fff;border:1px solid var(--line);padding:.8rem;overflow:auto;max-height:28rem;
font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace;white-space:pre-wrap}
pre.error{border-color:#f0c2bd;background:#fff7f6}
.state{padding:.05rem .45rem;border-radius:.7rem;font-size:.85em;background:#e8ecf0}
.state.pending{background:#dcebff}.state.processing{background:#fff0c2}
.state.dead{background:#ffd9d4}
.badge{padding:.1rem .5rem;border-radius:.7rem;background:#55606b;color:#fff;font-size:.85em}
.badge.ok{background:var(--ok)}.badge.bad{background:var(--bad)}
tr.gone{color:var(--muted)}
.muted{color:var(--muted)}
.flash{background:#e7f3ec;border:1px solid #b7dcc6;padding:.5rem .8rem}
.flash.bad{background:#fff0ee;border-color:#f0c2bd}
form.inline{display:inline}
button{font:inherit;padding:.25rem .7rem;border:1px solid #9aa5b1;border-radius:.3rem;
background:#fff;cursor:pointer}
button:hover{background:#eef1f4}button.danger{border-color:var(--bad);color:var(--bad)}
button[disabled]{opacity:.5;cursor:not-allowed}
.lookup input{width:7rem;padding:.2rem .4rem}
.filters{margin:.4rem 0 .8rem}
.stats{display:flex;gap:2rem;align-items:baseline;margin:.3rem 0 .5rem;flex-wrap:wrap}
.stats b{font-size:1.3rem}
.legend i{display:inline-block;width:.8rem;height:.8rem;margin:0 .3rem 0 .8rem}
.legend i.ok,rect.ok{background:var(--ok);fill:var(--ok)}
.legend i.bad,rect.bad{background:var(--bad);fill:var(--bad)}
svg.chart{width:100%;max-width:760px;height:auto;background:#fff;border:1px solid var(--line)}
svg.chart text{font-size:11px;fill:var(--muted)}
dl{display:grid;grid-template-columns:10rem 1fr;gap:.2rem 1rem;background:#fff;
border:1px solid var(--line);padding:.8rem;margin:0}
dt{color:var(--muted)}dd{margin:0}
footer{padding:1rem 1.5rem;color:var(--muted);font-size:.85em}
"""

ICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16">'
    '<rect width="16" height="16" rx="3" fill="#1d232b"/>'
    '<rect x="3" y="9" width="2" height="4" fill="#2f9e62"/>'
    '<rect x="7" y="5" width="2" height="8" fill="#2f9e62"/>'
    '<rect x="11" y="3" width="2" height="10" fill="#d2483c"/></svg>'
)

LIVE_JS = """
// Refresh every [data-live] element in place from a fresh copy of this page.
(function () {
  var every = Number(document.body.dataset.refreshMs || 0);
  if (!every) return;
  function tick() {
    fetch(location.href, {headers: {"Accept": "text/html"}, cache: "no-store",
                          credentials: "same-origin"})
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (text) {
        if (text === null) return;
        var doc = new DOMParser().parseFromString(text, "text/html");
        document.querySelectorAll("[data-live]").forEach(function (el) {
          var fresh = doc.getElementById(el.id);
          if (fresh && fresh.innerHTML !== el.innerHTML) el.innerHTML = fresh.innerHTML;
        });
        var stamp = document.getElementById("updated");
        if (stamp) stamp.textContent = new Date().toLocaleTimeString();
      })
      .catch(function () {})
      .then(function () { setTimeout(tick, every); });
  }
  setTimeout(tick, every);
})();
"""


def now_utc() -> datetime:
    return datetime.now(UTC)
