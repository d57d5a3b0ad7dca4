"""The job page's life sections (#24): a progress bar, the attempt history, and the
signal action (a checked POST like the other actions)."""

from __future__ import annotations

from datetime import datetime

from alkstore.core.life import Attempt, Progress
from alkstore.dashboard.html import PageBase, esc, when

__all__ = ["life_sections"]

ERROR_SHOWN = 2000  # characters of an attempt's error on the page


def _progress(progress: Progress | None, now: datetime) -> str:
    if progress is None:
        return ""
    value = progress.value
    if value <= 1:
        bar = (
            f'<progress id="job-progress-bar" max="1" value="{value:g}">'
            f"{value * 100:.0f}%</progress> {value * 100:.0f}%"
        )
    else:
        bar = f'<span id="job-progress-bar">{value:g}</span>'
    message = f" <span>{esc(progress.message)}</span>" if progress.message else ""
    return (
        f"<h2>Progress</h2><p>{bar}{message} "
        f'<span class="muted">attempt {progress.attempt}, {when(progress.updated_at, now)}'
        "</span></p>"
    )


def _attempts(attempts: list[Attempt], now: datetime) -> str:
    if not attempts:
        return ""
    rows = []
    for a in attempts:
        took = (
            f"{(a.finished_at - a.claimed_at).total_seconds():.3f}s"
            if a.claimed_at is not None and a.finished_at is not None
            else "-"
        )
        error = ""
        if a.error:  # never all of a huge one (the last is whole at /api/jobs/ID/error)
            shown = a.error if len(a.error) <= ERROR_SHOWN else a.error[:ERROR_SHOWN] + "…"
            error = (
                f"<details><summary>{esc(a.error.splitlines()[0][:120])}</summary>"
                f"<pre>{esc(shown)}</pre></details>"
            )
        rows.append(
            f'<tr data-attempt="{a.number}"><td class="num">{a.number}</td>'
            f'<td><span class="state {esc(a.outcome)}">{esc(a.outcome)}</span></td>'
            f"<td>{esc(a.worker_id or '-')}</td><td>{esc(a.host or '-')}</td>"
            f"<td>{when(a.claimed_at, now) if a.claimed_at else '-'}</td>"
            f'<td class="num">{took}</td><td class="err">{error}</td></tr>'
        )
    return (
        '<h2>Attempts</h2><table class="jobs" id="attempts"><thead><tr>'
        '<th class="num">#</th><th>outcome</th><th>worker</th><th>host</th><th>claimed</th>'
        '<th class="num">took</th><th>error</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _signal_form(page: PageBase, job_id: int, back: str) -> str:
    if not page.can_act:
        return ""
    return (
        f'<h2>Signal</h2><form method="post" action="{esc(page.url(f"/jobs/{job_id}/signal"))}"'
        f' id="signal">{page.csrf_field()}<input type="hidden" name="next" value="{esc(back)}">'
        '<label>name <input name="name" required></label> '
        '<label>payload (JSON) <input name="payload" value="null"></label> '
        "<button>Send signal</button></form>"
    )


def life_sections(
    page: PageBase,
    job_id: int,
    attempts: list[Attempt],
    progress: Progress | None,
    now: datetime,
    *,
    live: bool,
    back: str,
) -> str:
    """Progress (refreshed live), attempts, and for a live job the signal form."""
    body = (
        f'<section id="job-life" data-live>{_progress(progress, now)}'
        f"{_attempts(attempts, now)}</section>"
    )
    return body + (_signal_form(page, job_id, back) if live else "")
