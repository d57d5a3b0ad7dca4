"""The dashboard's job pages: job tables, dead letters with bulk requeue, one job."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta

from alkstore.core.display import age, describe_payload
from alkstore.core.job import Job
from alkstore.core.results import JobOutcome
from alkstore.dashboard.html import PREVIEW_CHARS, PageBase, esc, preview, shown_state, when

__all__ = ["JobPages"]


def _call(job: Job, width: int) -> str:
    """The job's call or payload in a line; a large one from its first bytes only."""
    if len(job.payload) <= PREVIEW_CHARS:
        return describe_payload(job, width)
    text = " ".join(job.payload[: width * 4].decode("utf-8", "replace").split())
    return text[: width - 1] + "…"


class JobPages(PageBase):
    """Job tables and a job's own page."""

    def job_rows(self, jobs: Sequence[Job], now: datetime, *, select: bool) -> str:
        out = []
        for job in jobs:
            error = job.last_error[:200].split("\n", 1)[0] if job.last_error else ""
            state = shown_state(job, now)
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
                f'<td><span class="state {esc(state)}">{esc(state)}</span></td>'
                f"<td><code>{esc(_call(job, 70))}</code></td>"
                f'<td class="num">{job.attempts}/{job.max_attempts}</td>'
                f"<td>{when(job.died_at or job.run_at, now)}</td>"
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

    def dead_page(
        self,
        jobs: Sequence[Job],
        total: int,
        now: datetime,
        back: str,
        pages: tuple[str | None, str | None, str | None],
    ) -> str:
        """A page of dead jobs; ``pages`` are the previous, next and first pages' URLs."""
        span = f", ids {jobs[0].id} to {jobs[-1].id} shown" if jobs and total > len(jobs) else ""
        note = f'<p id="dead-count" data-live>{total} dead job(s){span}.</p>'
        prev, after, first = pages
        links = [
            f'<a href="{esc(url)}" rel="{rel}">{label}</a>'
            for url, rel, label in (
                (prev, "prev", "← Earlier"),
                (after, "next", "Later →"),
                (first, "first", "First page"),
            )
            if url is not None
        ]
        nav = f'<nav class="pages">{" · ".join(links)}</nav>' if links else ""
        return note + nav + self.bulk_form(jobs, now, back) + nav

    def job_page(self, job: Job, now: datetime, back: str, attempts: str = "") -> str:
        """One job: its call, state, timing, worker, payload and last error; ``attempts``
        is the attempt history's section (HTML) when the store keeps one."""
        state = shown_state(job, now)
        if len(job.payload) > PREVIEW_CHARS:  # never parse (nor send) it all
            payload = job.payload[:PREVIEW_CHARS].decode("utf-8", "replace")
        else:
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
                f'<span class="state {esc(state)}" id="job-state">{esc(state)}</span>',
            ),
            ("call", f"<code>{esc(_call(job, 200))}</code>"),
            ("attempts", f"{job.attempts} of {job.max_attempts}"),
            ("priority", str(job.priority)),
            ("dedupe key", f"<code>{esc(job.dedupe_key)}</code>" if job.dedupe_key else "-"),
            (
                "partition key",
                f"<code>{esc(job.partition_key)}</code>" if job.partition_key else "-",
            ),
            ("created", when(job.created_at, now)),
            ("run at", when(job.run_at, now)),
            ("expires", when(job.expires_at, now)),
            ("visibility timeout", f"{job.visibility_timeout_s:g}s"),
            ("retry base", f"{job.retry_base_s:g}s"),
            ("worker" if job.state == "processing" else "last worker", esc(job.worker_id or "-")),
            ("workflow", f'<a href="{esc(self.url(f"/flows/{job.id}"))}">its graph</a>'),
        ]
        if job.state == "processing":
            fields.append(("claim expires", when(job.claim_expires_at, now)))
        if job.died_at is not None:
            fields.append(("died", when(job.died_at, now)))
        if job.state == "processing" and job.claim_expires_at is not None:
            # the claim's start is not stored: each heartbeat moves the deadline on, so
            # what is known is when the worker last renewed it (not how long it ran)
            renewed = job.claim_expires_at - timedelta(seconds=job.visibility_timeout_s)
            fields.append(("claim renewed", when(renewed, now)))
            fields.append(("timing", f"running; claim lapses {when(job.claim_expires_at, now)}"))
        elif state == "delayed":
            fields.append(("timing", f"delayed: due {when(job.run_at, now)}"))
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
        raw = self.url(f"/api/jobs/{job.id}/")
        error = (
            "<h2>Last error</h2>"
            + preview(
                job.last_error, len(job.last_error), raw + "error", "error", "error", "last-error"
            )
            if job.last_error
            else ""
        )
        shown = preview(payload, len(job.payload), raw + "payload", "payload", "payload", "payload")
        if not attempts:
            kept = "the last error only (below)" if job.last_error else "no error"
            attempts = (
                f'<p class="muted">{job.attempts} attempt(s) of {job.max_attempts} so far; '
                f"the store keeps {kept}, not each attempt.</p>"
            )
        return (
            f'<p class="actions">{"".join(actions)}</p>'
            f'<section id="job-live" data-live><dl>{dl}</dl></section>'
            f'<h2>Attempts</h2><section id="attempts">{attempts}</section>'
            f"<h2>Payload</h2>{shown}{error}"
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
            ("finished", when(outcome.finished_at, now)),
        ]
        dl = "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in fields)
        result = ""
        if outcome.value_json is not None:
            whole = len(outcome.value_json)
            shown = (
                outcome.value_json[:PREVIEW_CHARS]
                if whole > PREVIEW_CHARS  # never parse (nor send) it all
                else json.dumps(outcome.value, indent=2, ensure_ascii=False)
            )
            raw = self.url(f"/api/jobs/{outcome.id}/result")
            result = "<h2>Result</h2>" + preview(shown, whole, raw, "result", "payload", "result")
        return f"<dl>{dl}</dl>{result}"

    # -- workers ------------------------------------------------------------------------
