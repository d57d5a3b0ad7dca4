"""The throughput and failure charts: jobs finished per bucket, succeeded and
failed, over the last hour, day or week (``alk_outcomes``, kept a week by
default), as inline SVG that stretches to the page's width (no script, no CDN).

The bars are drawn in a fixed viewBox stretched with ``preserveAspectRatio="none"``;
the text (axis, totals) is HTML beside it, so it is never stretched.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from alkstore.admin import OutcomeCount
from alkstore.dashboard.html import esc

__all__ = ["FAILED", "RANGES", "ChartRange", "chart", "pick_range"]

FAILED = ("retry", "dead", "lost", "interrupted")


@dataclass(frozen=True)
class ChartRange:
    """A chart's span: ``key`` in the URL (``?range=24h``), minutes shown, bucket size."""

    key: str
    label: str
    minutes: int
    bucket_minutes: int

    @property
    def buckets(self) -> int:
        return self.minutes // self.bucket_minutes


RANGES = {
    r.key: r
    for r in (
        ChartRange("1h", "last hour", 60, 1),
        ChartRange("24h", "last day", 1440, 15),
        ChartRange("7d", "last week", 7 * 1440, 120),
    )
}


def pick_range(key: str | None) -> ChartRange:
    """The range a ``?range=`` asks for; the hour when absent or unknown."""
    return RANGES.get(key or "1h", RANGES["1h"])


def _per(bucket_minutes: int) -> str:
    return "min" if bucket_minutes == 1 else f"{bucket_minutes} min"


def chart(
    history: Iterable[OutcomeCount], now: datetime, what: str, span: ChartRange, links: str = ""
) -> str:
    """Succeeded and failed jobs per bucket of ``span`` as stacked bars (``what``: for whom)."""
    step = span.bucket_minutes * 60
    epoch = int(now.timestamp())
    last = epoch - epoch % step  # the current bucket's start
    first = last - (span.buckets - 1) * step
    ok = [0] * span.buckets
    bad = [0] * span.buckets
    for h in history:
        at = int(h.minute.timestamp())
        i = (at - at % step - first) // step
        if 0 <= i < span.buckets:
            if h.outcome == "success":
                ok[i] += h.jobs
            elif h.outcome in FAILED:  # snoozed and cancelled runs are neither
                bad[i] += h.jobs
    total_ok, total_bad = sum(ok), sum(bad)
    total = total_ok + total_bad
    rate = f"{100 * total_bad / total:.1f}%" if total else "-"
    recent_buckets = max(1, 5 // span.bucket_minutes)
    recent = sum(ok[-recent_buckets:]) + sum(bad[-recent_buckets:])
    per_min = recent / (recent_buckets * span.bucket_minutes)
    peak = max([a + b for a, b in zip(ok, bad, strict=True)] + [1])
    width, height = 1000, 200
    bar = width / span.buckets
    start = datetime.fromtimestamp(first, now.tzinfo)
    bars = []
    for i in range(span.buckets):
        x = i * bar
        h_ok = height * ok[i] / peak
        h_bad = height * bad[i] / peak
        label = (start + timedelta(seconds=i * step)).strftime("%m-%d %H:%M")
        tip = f"{label}Z ({_per(span.bucket_minutes)}): {ok[i]} succeeded, {bad[i]} failed"
        y_ok = height - h_ok
        bars.append(
            f"<g><title>{esc(tip)}</title>"
            f'<rect class="ok" x="{x + bar * 0.1:.2f}" y="{y_ok:.2f}" width="{bar * 0.8:.2f}" '
            f'height="{h_ok:.2f}"/>'
            f'<rect class="bad" x="{x + bar * 0.1:.2f}" y="{y_ok - h_bad:.2f}" '
            f'width="{bar * 0.8:.2f}" height="{h_bad:.2f}"/></g>'
        )
    grid = "".join(
        f'<line class="grid" x1="0" x2="{width}" y1="{height * f:.1f}" y2="{height * f:.1f}"/>'
        for f in (0.25, 0.5, 0.75)
    )
    svg = (
        f'<svg class="chart" viewBox="0 0 {width} {height}" preserveAspectRatio="none" '
        f'role="img" aria-label="jobs finished per {_per(span.bucket_minutes)}, {esc(what)}, '
        f'{esc(span.label)}">{grid}{"".join(bars)}</svg>'
    )
    empty = (
        f'<p class="muted chart-empty">no jobs finished in the {esc(span.label)}</p>'
        if not total
        else ""
    )
    axis = (
        f'<div class="axis"><span>{esc(start.strftime("%Y-%m-%d %H:%M"))}Z</span>'
        f"<span>peak {peak if total else 0} per {_per(span.bucket_minutes)}</span>"
        "<span>now</span></div>"
    )
    return (
        '<div class="stats">'
        f'<div><b data-stat="throughput">{per_min:.1f}</b> jobs/min '
        f"(last {recent_buckets * span.bucket_minutes} min)</div>"
        f'<div><b data-stat="finished">{total}</b> finished ({esc(span.label)})</div>'
        f'<div><b data-stat="failure-rate">{rate}</b> failure rate</div>'
        '<div class="legend"><i class="ok"></i>succeeded <i class="bad"></i>'
        f"failed (retry, dead, lost, interrupted)</div>{links}"
        f'</div><div class="chart-box" data-range="{span.key}">{svg}{empty}{axis}</div>'
    )
