"""Dependencies between jobs: the engine-neutral steps (docs/contract.md, "Dependencies").

A job enqueued ``after`` parents is stored ``blocked`` with a counter of the
parents not yet finished; each parent's end (an ack, a dead-letter move, a
cancel) changes its children in that same transaction, in the database: a
trigger on the live table of each engine (migration 0008) decrements the
counter under the child's row lock (so exactly one parent's transaction sees
it reach 0 and makes the child ``pending``), or dead-letters the children of
a parent that died. What is written here are the flows the engines run as
steps (``core.steps``): enqueuing a graph, and reviving the children a dead
parent took down when it is requeued.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, NamedTuple

from alkstore.core.options import Stamps
from alkstore.core.steps import Flow
from alkstore.errors import DependencyError, InvalidArgumentError

__all__ = [
    "POLICIES",
    "DEPS_CHILDREN",
    "DEPS_PARENTS",
    "GraphNode",
    "Policy",
    "check_policy",
    "died_error",
    "enqueue_graph",
    "revive",
]

Policy = Literal["success", "complete"]
POLICIES: tuple[Policy, ...] = ("success", "complete")

# The bits of a row's ``deps`` column.
DEPS_CHILDREN = 1  # has dependents: its end changes them
DEPS_PARENTS = 2  # has parents: its edges are dropped when it finishes


class GraphNode(NamedTuple):
    """One job of a graph to enqueue: its parents are existing jobs (``after``) and
    earlier nodes of the same graph (``after_nodes``, indices), so no cycle can be built."""

    queue: str
    payload: bytes
    stamps: Stamps
    after: tuple[int, ...] = ()
    after_nodes: tuple[int, ...] = ()
    policy: Policy = "success"


def check_policy(policy: object) -> Policy:
    """``after_policy``: 'success' (default) or 'complete' (run whatever became of them)."""
    if policy is None:
        return "success"
    if policy == "success" or policy == "complete":
        return policy
    raise InvalidArgumentError(f"after_policy must be 'success' or 'complete', got {policy!r}")


def died_error(parent: int, error: str | None) -> str:
    """The ``last_error`` of a child dead-lettered because ``parent`` died."""
    return f"dependency {parent} died: {error or 'dead'}"


def enqueue_graph(nodes: Sequence[GraphNode]) -> Flow[list[int]]:
    """Insert every node in order, in the caller's one transaction; the new ids.

    Steps: ``insert`` (queue, payload, stamps → one row: the id), ``mark_parents``
    (ids, in id order: lock the live ones and set their dependents bit → their
    ids), ``kept_results`` (ids → the ids with a kept result), ``dead_rows``
    (ids → (id, last_error)), ``block`` (id, waiting, deps), ``edges`` (child,
    parents, policy, killed) and ``kill`` (id, error: move the new row to dead).
    A parent that is neither live, nor kept, nor dead raises DependencyError
    (the engine rolls the whole graph back).
    """
    ids: list[int] = []
    for node in nodes:
        parents = sorted(set(node.after) | {ids[j] for j in node.after_nodes})
        rows = yield (
            "insert",
            {"queue": node.queue, "payload": node.payload, "stamps": node.stamps},
        )
        child = int(rows[0][0])
        ids.append(child)
        if not parents:
            continue
        live = {int(r[0]) for r in (yield ("mark_parents", {"ids": parents}))}
        rest = [p for p in parents if p not in live]
        dead: dict[int, str | None] = {}
        if rest:
            kept = {int(r[0]) for r in (yield ("kept_results", {"ids": rest}))}
            rest = [p for p in rest if p not in kept]
        if rest:
            dead = {int(r[0]): r[1] for r in (yield ("dead_rows", {"ids": rest}))}
            unknown = [p for p in rest if p not in dead]
            if unknown:
                raise DependencyError(
                    f"after: job {unknown[0]} is not live and left no kept outcome "
                    "(unknown, acked without a kept result, or purged)",
                    unknown[0],
                )
        killer = min(dead) if dead and node.policy == "success" else None
        yield ("block", {"id": child, "waiting": len(live), "deps": DEPS_PARENTS})
        yield (
            "edges",
            {"child": child, "parents": parents, "policy": node.policy, "killed": killer},
        )
        if killer is not None:
            yield ("kill", {"id": child, "error": died_error(killer, dead[killer])})
    return ids


def revive(root: int) -> Flow[int]:
    """After dead job ``root`` was requeued: bring back, transitively, the children its
    death dead-lettered (blocked again, counting their live parents); how many.

    Steps: ``flags`` (id: set its deps bits from its edges), ``killed_children``
    (parent → child ids dead by its death), ``dead_parents`` (child → ids of its
    'success' parents still dead), ``move_kill`` (child, parent, to: another dead
    parent now holds it down), ``live_parents`` (child → one row: the count) and
    ``revive`` (id, waiting: dead row back to live, blocked if waiting)."""
    yield ("flags", {"id": root})
    frontier, revived = [root], 0
    while frontier:
        parent = frontier.pop()
        for (child,) in (yield ("killed_children", {"parent": parent})):
            others = yield ("dead_parents", {"child": child})
            if others:
                yield ("move_kill", {"child": child, "parent": parent, "to": others[0][0]})
                continue
            waiting = (yield ("live_parents", {"child": child}))[0][0]
            yield ("revive", {"id": child, "waiting": int(waiting)})
            revived += 1
            frontier.append(int(child))
    return revived
