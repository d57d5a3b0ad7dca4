"""Reading a workflow back: the graph of jobs around one job, with each node's state.

What ``alkstore flows show`` prints and the dashboard's workflow page draws.
The edges are in the database while their child has not finished (a
finished child drops its edges), so a running workflow reads whole and a
finished one shrinks to what is still live or dead.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from alkstore.core.results import JobOutcome
from alkstore.engine_door import StoreDoor, engine_of

__all__ = ["FLOW_LIMIT", "FlowGraph", "FlowNode", "read_flow"]

FLOW_LIMIT = 500  # nodes read at most (a bigger graph is cut, and says so)


@dataclass(frozen=True)
class FlowNode:
    """One job of a workflow: ``state`` is blocked, pending, processing, dead,
    succeeded (gone with a kept result) or gone (no trace left)."""

    id: int
    queue: str | None
    state: str
    last_error: str | None = None


@dataclass
class FlowGraph:
    """The jobs reachable from ``root`` over dependency edges, both ways."""

    root: int
    nodes: dict[int, FlowNode] = field(default_factory=dict)
    edges: list[tuple[int, int, str, bool]] = field(default_factory=list)
    truncated: bool = False

    def parents(self, job_id: int) -> list[int]:
        return sorted(p for p, c, _, _ in self.edges if c == job_id)

    def children(self, job_id: int) -> list[int]:
        return sorted(c for p, c, _, _ in self.edges if p == job_id)

    def counts(self, job_id: int) -> dict[str, int]:
        """The states of ``job_id``'s parents (a batch's counts: its callback's parents)."""
        return dict(Counter(self.nodes[p].state for p in self.parents(job_id) if p in self.nodes))

    def roots(self) -> list[int]:
        """The jobs without parents in the graph, in id order."""
        return sorted(n for n in self.nodes if not self.parents(n))


async def read_flow(store: StoreDoor, job_id: int, limit: int = FLOW_LIMIT) -> FlowGraph:
    """The workflow around ``job_id`` (``None`` states for ids with no trace are ``gone``)."""
    engine = engine_of(store)
    graph = FlowGraph(job_id)
    seen: set[tuple[int, int]] = set()
    todo, visited = [job_id], {job_id}
    while todo:
        current = todo.pop()
        for parent, child, policy, killed in await engine.job_edges(current):
            if (parent, child) not in seen:
                seen.add((parent, child))
                graph.edges.append((int(parent), int(child), str(policy), bool(killed)))
            for other in (int(parent), int(child)):
                if other not in visited:
                    if len(visited) >= limit:
                        graph.truncated = True
                        continue
                    visited.add(other)
                    todo.append(other)
    ids = sorted(visited)
    outcomes = {int(r[0]): JobOutcome.from_row(r) for r in await engine.outcomes(None, ids)}
    for ident in ids:
        o = outcomes.get(ident)
        if o is None:
            graph.nodes[ident] = FlowNode(ident, None, "gone")
        else:
            state = "succeeded" if o.outcome == "success" else o.outcome
            graph.nodes[ident] = FlowNode(ident, o.queue, state, o.error)
    graph.edges.sort()
    return graph
