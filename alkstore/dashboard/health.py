"""The dashboard's health page: ``alkstore doctor``'s findings (``Admin.health``)."""

from __future__ import annotations

from alkstore.core.health import ACTION, OK, Health
from alkstore.dashboard.html import esc

__all__ = ["health_page"]

_BADGE = {OK: "ok", ACTION: "bad"}


def health_page(health: Health) -> str:
    """The findings as a table, the ones that need action first, with a summary line."""
    findings = sorted(health.findings, key=lambda f: f.verdict != ACTION)
    n = sum(f.verdict == ACTION for f in findings)
    summary = (
        f'<p class="flash" role="status">{n} finding(s) need action</p>'
        if n
        else '<p class="muted">Healthy: nothing needs action.</p>'
    )
    rows = "".join(
        f'<tr class="{esc(f.verdict)}"><td>{esc(f.check)}</td><td><code>{esc(f.subject)}</code>'
        f'</td><td><span class="badge {_BADGE.get(f.verdict, "")}">{esc(f.verdict)}</span></td>'
        f"<td>{esc(f.detail)}</td><td>{esc(f.fix)}</td></tr>"
        for f in findings
    )
    table = (
        '<table id="health"><thead><tr><th>check</th><th>subject</th><th>verdict</th>'
        f"<th>seen</th><th>fix</th></tr></thead><tbody>{rows}</tbody></table>"
    )
    note = (
        '<p class="muted">The same checks as <code>alkstore doctor</code>, with its default '
        "thresholds, as this dashboard's database role sees them.</p>"
    )
    return f'<section id="health-live" data-live>{summary}{table}</section>{note}'
