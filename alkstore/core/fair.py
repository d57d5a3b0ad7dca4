"""Fair claiming across partition keys, decided once for both engines.

A fair queue keeps one key cursor per partition key with live jobs
(``alk_fair``: the enqueue adds it, the claim that finds the key empty drops
it), holding the key's virtual time ``vtime``. A claim serves the keys of
smallest ``vtime`` first (weighted fair queueing): the ``j``-th job a claim
takes from key ``k`` finishes at ``vtime_k + j / weight_k``, the ``n`` smallest
finish tags are claimed, and each key's ``vtime`` advances by its jobs claimed
over its weight. Within a key, jobs keep the claim order (``priority DESC,
run_at, id``). A key with live jobs but none due (all running or delayed)
moves to the claim's virtual time, so it banks no credit for the turns it
could not use; a new key starts at the smallest ``vtime`` of the queue.

Steps (the engine adds the queue, its clock and the worker):

- ``fair_cursors(window)`` → ``(key, vtime, weight)`` of the ``window`` keys of
  smallest ``vtime`` (PostgreSQL: locked, ``SKIP LOCKED``: two claimers never
  serve the same key at once)
- ``fair_cursors_wait(window)`` → the same, waiting for cursors another claim
  holds; asked only when ``fair_cursors`` gave none (few keys, all being served:
  a short wait keeps the turns fair where taking the plain order would not)
- ``fair_heads(keys, limits)`` → ``(key, id, live)``: up to ``limits[i]``
  claimable jobs of ``keys[i]`` in claim order; a key with none gives one row
  ``(key, None, live)``, ``live`` saying whether it still has any live job.
  Only the keys :func:`head_limits` gives a turn are asked for (about one per
  job claimed), so a claim's probes do not grow with the window of cursors
- ``running_partitions()``, ``claim_ids(ids)``: as in ``core.limited_claim``
- ``fair_update(keys, vtimes, pruned)`` → nothing; new ``vtime`` per key, and
  the cursors of keys without live jobs dropped

When the keys read give fewer than ``n`` jobs (their due work is all taken,
or the jobs have no partition key), the rest of the claim is taken in the
queue's plain order.

This module is the statement of the rule: SQLite runs these steps, and so does
PostgreSQL for a fair queue with limits; PostgreSQL's fair queue without limits
runs the same order as one statement (``fair_claim`` in its queries.sql), held
to this flow by ``tests/contract/test_fair_order.py``.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from alkstore.core.flow import CANDIDATE_WINDOW, pick_partitions
from alkstore.core.names import is_storable_text
from alkstore.core.options import PARTITION_KEY_MAX
from alkstore.core.steps import Flow, Rows
from alkstore.errors import InvalidArgumentError

__all__ = [
    "FAIR_SLACK",
    "FAIR_SPARE",
    "WEIGHT_MAX",
    "Cursor",
    "FairPlan",
    "check_weight",
    "check_weights",
    "fair_claim",
    "head_limits",
    "plan",
]

# A claim of n reads n + FAIR_SLACK key cursors (keys with nothing due take a slot)
# and probes the keys of the n + FAIR_SPARE smallest finish tags among them: the
# spare turns go to the next keys when a key read has nothing due.
FAIR_SLACK = 8
FAIR_SPARE = 2
WEIGHT_MAX = 1_000_000.0


def check_weight(key: object, weight: object) -> float:
    """A weight: a finite number in (0, 1e6]."""
    if type(weight) not in (int, float) or not 0 < weight <= WEIGHT_MAX:  # type: ignore[operator]
        raise InvalidArgumentError(
            f"weight of partition key {key!r} must be a number in (0, {WEIGHT_MAX:g}], "
            f"got {weight!r}"
        )
    return float(weight)  # type: ignore[arg-type]


def check_weights(weights: object) -> dict[str, float] | None:
    """``{partition_key: weight}`` checked (``None``: keep the stored weights)."""
    if weights is None:
        return None
    if not isinstance(weights, Mapping):
        raise InvalidArgumentError(
            f"weights must be a dict of partition key to weight, got {weights!r}"
        )
    checked: dict[str, float] = {}
    for key, weight in weights.items():
        if (
            type(key) is not str
            or not key
            or len(key) > PARTITION_KEY_MAX
            or not is_storable_text(key)
        ):
            raise InvalidArgumentError(
                f"a weights key must be a partition key (a non-empty str of at most "
                f"{PARTITION_KEY_MAX} characters), got {key!r}"
            )
        checked[key] = check_weight(key, weight)
    return checked


class Cursor(NamedTuple):
    """One key cursor: the key, its virtual time and its weight."""

    key: str
    vtime: float
    weight: float


class FairPlan(NamedTuple):
    """The candidates of a fair claim in serving order, and what to do with the cursors."""

    order: list[tuple[int, str]]  # (job id, key), smallest finish tag first
    tags: dict[int, float]  # job id -> finish tag
    idle: list[str]  # keys with live jobs but none due now
    pruned: list[str]  # keys without live jobs: cursor dropped


def head_limits(cursors: Sequence[Cursor], n: int) -> list[int]:
    """How many heads to read per key: how many of the ``n + FAIR_SPARE`` smallest
    finish tags (``vtime + j / weight``, ties in cursor order) are its, as if every
    key had jobs enough, at most ``n``. 0: the key is not read at all (its turn
    comes later), so a claim probes about as many keys as it takes jobs, not the
    whole window."""
    counts = [0] * len(cursors)
    if not cursors:
        return counts
    # each key's tags rise with j: merge them (a heap of each key's next tag)
    heap = [(c.vtime + 1 / c.weight, rank, 1) for rank, c in enumerate(cursors)]
    heapq.heapify(heap)
    for _ in range(n + FAIR_SPARE):
        _, rank, j = heap[0]
        counts[rank] = j
        c = cursors[rank]
        heapq.heapreplace(heap, (c.vtime + (j + 1) / c.weight, rank, j + 1))
    return [min(n, k) for k in counts]


def plan(cursors: Sequence[Cursor], heads: Iterable[tuple[Any, ...]]) -> FairPlan:
    """Order the heads of the keys read by finish tag (weighted fair queueing)."""
    by_key = {c.key: c for c in cursors}
    taken: dict[str, int] = {}
    tagged: list[tuple[float, int, int, str]] = []
    idle: list[str] = []
    pruned: list[str] = []
    rank = {c.key: i for i, c in enumerate(cursors)}
    for key, job_id, live in heads:
        cursor = by_key[key]
        if job_id is None:
            (idle if live else pruned).append(key)
            continue
        j = taken.get(key, 0) + 1
        taken[key] = j
        tagged.append((cursor.vtime + j / cursor.weight, rank[key], int(job_id), key))
    tagged.sort()
    return FairPlan(
        [(job_id, key) for _, _, job_id, key in tagged],
        {job_id: tag for tag, _, job_id, _ in tagged},
        idle,
        pruned,
    )


def advance(
    cursors: Sequence[Cursor], fair: FairPlan, claimed_ids: Iterable[int]
) -> tuple[list[str], list[float]]:
    """Each served or idle key's new ``vtime`` after the claim took ``claimed_ids``."""
    keys_of = dict(fair.order)
    counts: dict[str, int] = {}
    latest = None
    for job_id in claimed_ids:
        key = keys_of.get(job_id)
        if key is None:
            continue
        counts[key] = counts.get(key, 0) + 1
        tag = fair.tags[job_id]
        latest = tag if latest is None else max(latest, tag)
    keys: list[str] = []
    vtimes: list[float] = []
    for c in cursors:
        if c.key in counts:
            keys.append(c.key)
            vtimes.append(c.vtime + counts[c.key] / c.weight)
        elif c.key in fair.idle and latest is not None and latest > c.vtime:
            keys.append(c.key)
            vtimes.append(latest)
    return keys, vtimes


def fair_claim(n: int, partition_limit: int | None) -> Flow[Rows]:
    """Claim up to ``n`` jobs of a fair queue (within a per-partition limit, if any)."""
    read = yield ("fair_cursors", {"window": n + FAIR_SLACK})
    if not read:  # every key is being served by another claim: wait for the first one
        read = yield ("fair_cursors_wait", {"window": n + FAIR_SLACK})
    cursors = [Cursor(str(k), float(v), float(w)) for k, v, w in read]
    claimed: Rows = []
    busy: dict[str, int] | None = None
    keys_of: dict[int, str] = {}
    if cursors:
        read = [(c.key, lim) for c, lim in zip(cursors, head_limits(cursors, n), strict=True)]
        keys, limits = [k for k, lim in read if lim], [lim for _, lim in read if lim]
        heads = yield ("fair_heads", {"keys": keys, "limits": limits})
        fair = plan(cursors, heads)
        keys_of = dict(fair.order)
        if partition_limit is not None and fair.order:
            busy = {k: int(c) for k, c in (yield ("running_partitions", {}))}
            ids = pick_partitions(fair.order, busy, partition_limit, n)
        else:
            ids = [job_id for job_id, _ in fair.order[:n]]
        if ids:
            claimed = yield ("claim_ids", {"ids": ids})
        new_keys, vtimes = advance(cursors, fair, (int(row[0]) for row in claimed))
        if new_keys or fair.pruned:
            yield ("fair_update", {"keys": new_keys, "vtimes": vtimes, "pruned": fair.pruned})
    rest = n - len(claimed)
    if rest > 0:  # the plain order for what the keys read could not give
        if partition_limit is None:
            claimed = [*claimed, *(yield ("claim", {"n": rest}))]
        else:
            candidates = yield ("claim_candidates", {"window": rest + CANDIDATE_WINDOW})
            if busy is None:
                busy = {k: int(c) for k, c in (yield ("running_partitions", {}))}
            else:  # what this claim took counts against the limit too
                for row in claimed:
                    key = keys_of[int(row[0])]
                    busy[key] = busy.get(key, 0) + 1
            mine = {int(row[0]) for row in claimed}
            free = [(i, k) for i, k in candidates if i not in mine]
            more = pick_partitions(free, busy, partition_limit, rest)
            if more:
                claimed = [*claimed, *(yield ("claim_ids", {"ids": more}))]
    return claimed
