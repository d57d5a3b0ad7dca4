"""Priority aging, decided once for both engines: a bounded periodic promotion.

A queue with ``aging_s`` set (``Queue.set_aging``) has its waiting jobs
promoted by the sweep (``Queue.sweep_expired``, which every worker runs every
``sweep_interval_s``), not by the claim's ORDER BY (an expression of the wait
there would defeat the claim index). ``top`` is the highest priority among the
queue's due pending jobs that were never promoted. A due pending job below
``top`` gains one priority level per ``aging_s`` it has waited (since it
became due, or since its last promotion), up to ``top + 1``: then it is ahead
of every job, and the next claim takes it. A promoted job that reached ``top``
climbs on to ``top + 1`` (level with the stream, it would still wait behind
the stream's older jobs). Jobs at the top that were never promoted do not
climb, so a queue whose jobs all share one priority is never rewritten.

The bound: a due job of priority ``p`` under a constant stream of jobs of
priority ``top`` reaches ``top + 1`` after ``(top - p + 1) * aging_s`` of
waiting, and is promoted at the first sweep after that, so it is claimed by
the first claim after ``(top - p + 1) * aging_s + sweep_interval_s`` (with
every worker busy, the first claim comes when a handler ends).

Steps (the engine adds the queue and its clock):

- ``aging_settings()`` → ``[(aging_s, top)]``: the queue's interval and the
  highest priority among its due pending jobs never promoted; no row: no aging
- ``promote(aging_s, top, cap)`` → ``[(promoted,)]``: every due pending job
  below ``top`` (or promoted already and below ``cap``) that has waited
  ``k >= 1`` intervals gains ``k`` levels, at most up to ``cap``
"""

from __future__ import annotations

from alkstore.core.options import PRIORITY_MAX
from alkstore.core.steps import Flow

__all__ = ["aging_sweep"]


def aging_sweep() -> Flow[int]:
    """Promote the queue's outranked waiting jobs; how many were promoted."""
    rows = yield ("aging_settings", {})
    if not rows or rows[0][0] is None or rows[0][1] is None:
        return 0
    aging_s, top = float(rows[0][0]), int(rows[0][1])
    cap = min(top + 1, PRIORITY_MAX)
    promoted = yield ("promote", {"aging_s": aging_s, "top": top, "cap": cap})
    return int(promoted[0][0]) if promoted else 0
