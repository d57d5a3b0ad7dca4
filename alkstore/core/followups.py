"""Follow-ups staged by a running attempt, written only with its fenced ack.

A handler stages jobs (``alkstore.worker.stage``, or ``JobHandle.stage`` when
pulling): they wait here, in this process, keyed by (job id, attempt), until
that attempt's outcome. Its ack writes them in the ack's own transaction, and
only for a row that ack deleted (``Engine.ack_staged``): a refused ack (a lost
claim) writes none, and a retry, failure or snooze drops them. Nothing about
them is in the database before the ack commits; a process that dies first
leaves nothing behind.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence

from alkstore.core.deps import GraphNode

__all__ = ["combined", "drop", "put", "stage", "take"]

_lock = threading.Lock()  # a sync handler stages from the worker's thread pool
_staged: dict[tuple[int, int], list[GraphNode]] = {}


def stage(job_id: int, attempts: int, nodes: Sequence[GraphNode]) -> None:
    """Add ``nodes`` (their ``after_nodes`` index into ``nodes``) to the attempt's list."""
    with _lock:
        have = _staged.setdefault((job_id, attempts), [])
        off = len(have)
        have.extend(n._replace(after_nodes=tuple(j + off for j in n.after_nodes)) for n in nodes)


def take(keys: Iterable[tuple[int, int]]) -> dict[int, list[GraphNode]]:
    """Remove and return the staged nodes of these attempts, by job id."""
    with _lock:
        if not _staged:
            return {}
        out = {}
        for key in keys:
            nodes = _staged.pop(key, None)
            if nodes:
                out[key[0]] = nodes
        return out


def put(attempts: Mapping[int, int], staged: Mapping[int, list[GraphNode]]) -> None:
    """Put back what :func:`take` returned (an ack that failed is tried again)."""
    with _lock:
        for job_id, nodes in staged.items():
            _staged.setdefault((job_id, attempts[job_id]), [])[:0] = nodes


def drop(job_id: int, attempts: int) -> None:
    """The attempt ended otherwise (retry, failure, snooze): its follow-ups are gone."""
    if _staged:
        with _lock:
            _staged.pop((job_id, attempts), None)


def combined(staged: Mapping[int, Sequence[GraphNode]], acked: Iterable[int]) -> list[GraphNode]:
    """The follow-ups of the acked jobs as one graph (indices shifted to fit)."""
    out: list[GraphNode] = []
    for job_id in sorted(set(acked)):
        off = len(out)
        out.extend(
            n._replace(after_nodes=tuple(j + off for j in n.after_nodes))
            for n in staged.get(job_id, ())
        )
    return out
