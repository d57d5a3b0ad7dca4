"""Workflows: whole graphs of jobs enqueued in one transaction (docs/workflows.md).

Two layers, one mechanism (``EnqueueOpts.after`` underneath, docs/contract.md
"Dependencies"):

- :class:`Graph`, on queues: ``node = graph.add(queue, payload, after=[...])``
  where ``after`` names earlier nodes of the graph or existing job ids, then
  ``await graph.enqueue(store)`` (or ``enqueue_in(tx)``, or ``enqueue_on(store,
  conn)`` inside your own PostgreSQL transaction: the outbox). Edges only point
  to earlier nodes or existing jobs, so no cycle can be built.
- The canvas, on tasks, as a Celery user knows it: ``task.s(...)`` (or
  :func:`sig`), :func:`chain`, :func:`group`, :func:`chord` (a group, then a
  callback) and :func:`batch` (members with ``on_success`` / ``on_complete``
  callbacks: each callback is a child of every member, with a policy).
  ``await flow.defer()`` enqueues it all at once and answers a :class:`FlowRun`.

A child reads its parents' results with ``queue.parent_outcomes(job_id)`` (or
:func:`parent_results`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from alkstore.core.deps import GraphNode, Policy, check_policy
from alkstore.core.names import check_name
from alkstore.core.options import EnqueueOpts, QueueOpts, describe, resolve
from alkstore.core.payload import check_size, encode_payload
from alkstore.engine import SupportsOutbox
from alkstore.engine_door import engine_of
from alkstore.errors import InvalidArgumentError

if TYPE_CHECKING:
    from alkstore.store import Store
    from alkstore.transaction import Transaction


class _Connects(Protocol):
    async def connect(self) -> Store: ...


class TaskLike(Protocol):
    """What the canvas reads of a task (``alkstore.tasks.Task`` has it)."""

    @property
    def queue(self) -> str: ...

    @property
    def opts(self) -> QueueOpts: ...

    @property
    def app(self) -> _Connects: ...

    def payload(self, *args: Any, **kwargs: Any) -> bytes: ...


__all__ = [
    "Batch",
    "Chain",
    "FlowRun",
    "Graph",
    "Group",
    "Node",
    "Sig",
    "TaskLike",
    "batch",
    "chain",
    "chord",
    "group",
    "parent_results",
    "sig",
]


@dataclass(frozen=True)
class Node:
    """A job of a :class:`Graph` not yet enqueued: its position in the graph."""

    index: int


@dataclass
class _Entry:
    queue: str
    queue_opts: QueueOpts
    payload: object
    opts: EnqueueOpts | None
    after_nodes: tuple[int, ...]
    after_ids: tuple[int, ...]
    policy: Policy


class Graph:
    """A DAG of jobs on queues, enqueued atomically (all or nothing)."""

    def __init__(self) -> None:
        self._entries: list[_Entry] = []

    def __len__(self) -> int:
        return len(self._entries)

    def add(
        self,
        queue: str,
        payload: object,
        *,
        after: Iterable[Node | int] = (),
        policy: str = "success",
        opts: EnqueueOpts | None = None,
        queue_opts: QueueOpts | None = None,
    ) -> Node:
        """Add a job waiting for ``after`` (nodes of this graph or existing job ids).

        ``policy="complete"`` runs it whatever became of those parents (an on-complete
        callback); the default ``"success"`` dead-letters it if one dies."""
        check_name(queue)
        if opts is not None and not isinstance(opts, EnqueueOpts):
            raise InvalidArgumentError(f"opts must be an EnqueueOpts, got {describe(opts)}")
        if opts is not None and (opts.after or opts.dedupe_key or opts.debounce_key):
            raise InvalidArgumentError(
                "a graph's opts take no after, dedupe_key or debounce_key: give after= to add()"
            )
        if isinstance(after, (str, bytes, Node, int)):
            raise InvalidArgumentError(f"after must be a list of nodes or job ids, got {after!r}")
        nodes: list[int] = []
        ids: list[int] = []
        for item in after:
            if isinstance(item, Node):
                if not 0 <= item.index < len(self._entries):
                    raise InvalidArgumentError(
                        f"after: {item!r} is not an earlier node of this graph"
                    )
                nodes.append(item.index)
            else:
                ids.extend(EnqueueOpts(after=(item,)).after or ())
        self._entries.append(
            _Entry(
                queue,
                queue_opts or QueueOpts(),
                payload,
                opts,
                tuple(dict.fromkeys(nodes)),
                tuple(dict.fromkeys(ids)),
                check_policy(policy),
            )
        )
        return Node(len(self._entries) - 1)

    def _nodes(self, limit: int | None) -> list[GraphNode]:
        out = []
        for e in self._entries:
            data = encode_payload(e.payload)
            check_size("payload", len(data), limit)
            stamps = resolve(e.queue_opts, e.opts)
            out.append(GraphNode(e.queue, data, stamps, e.after_ids, e.after_nodes, e.policy))
        return out

    async def enqueue(self, store: Store) -> list[int]:
        """Enqueue every job in one transaction (inside ``store.transaction()`` if one is
        open in this task); the ids, in node order."""
        if not self._entries:
            return []
        nodes = self._nodes(store.max_payload_bytes)
        return await store.queue(nodes[0].queue)._writer().enqueue_graph(nodes)

    async def enqueue_in(self, tx: Transaction) -> list[int]:
        """Enqueue inside ``tx``: invisible until it commits, gone if it rolls back."""
        if not self._entries:
            return []
        nodes = self._nodes(tx._store.max_payload_bytes)
        return await tx._open().enqueue_graph(nodes)

    async def enqueue_on(self, store: Store, conn: Any) -> list[int]:
        """Enqueue on your own PostgreSQL connection, in the transaction it holds (the
        outbox): commits or rolls back with your writes; no wake is sent."""
        engine = engine_of(store)
        if not isinstance(engine, SupportsOutbox) or not hasattr(engine, "enqueue_graph_on"):
            raise InvalidArgumentError(
                f"enqueue_on needs the PostgreSQL engine; this store is {engine.name}"
            )
        if not self._entries:
            return []
        nodes = self._nodes(store.max_payload_bytes)
        ids: list[int] = await engine.enqueue_graph_on(conn, nodes)
        return ids


# -- the canvas ---------------------------------------------------------------------


class _Part:
    """Something the canvas can place in a graph after ``incoming`` nodes."""

    def _place(self, graph: Graph, incoming: list[Node], policy: Policy) -> list[Node]:
        raise NotImplementedError

    def graph(self) -> tuple[Graph, list[Node]]:
        """The graph of this canvas, and its last nodes (what a callback would wait for)."""
        g = Graph()
        return g, self._place(g, [], "success")

    async def defer(self, store: Store | None = None) -> FlowRun:
        """Enqueue the whole flow in one transaction; a :class:`FlowRun`."""
        g, last = self.graph()
        if store is None:
            store = await self._app_store()
        ids = await g.enqueue(store)
        return FlowRun(ids, [ids[n.index] for n in last])

    async def defer_in(self, tx: Transaction) -> FlowRun:
        """Enqueue the whole flow inside ``tx`` (commits or rolls back with it)."""
        g, last = self.graph()
        ids = await g.enqueue_in(tx)
        return FlowRun(ids, [ids[n.index] for n in last])

    async def _app_store(self) -> Store:
        first = self._first()
        return await first.task.app.connect()

    def _first(self) -> Sig:
        raise NotImplementedError


@dataclass(frozen=True)
class FlowRun:
    """An enqueued flow: every job id (in placement order) and the last ones."""

    ids: list[int]
    last: list[int]

    @property
    def id(self) -> int:
        """The flow's first job: ``alkstore flows show`` draws the graph from any of them."""
        return self.ids[0]


@dataclass
class Sig(_Part):
    """One task call in a flow: ``task.s(*args, **kwargs)``."""

    task: TaskLike
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    opts: EnqueueOpts | None = None

    def set(self, **options: Any) -> Sig:
        """This call with enqueue options (``priority``, ``delay_s``, ``max_attempts``...)."""
        return Sig(self.task, self.args, self.kwargs, EnqueueOpts(**options))

    def _place(self, graph: Graph, incoming: list[Node], policy: Policy) -> list[Node]:
        payload = self.task.payload(*self.args, **self.kwargs)
        node = graph.add(
            self.task.queue,
            payload,
            after=incoming,
            policy=policy,
            opts=self.opts,
            queue_opts=self.task.opts,
        )
        return [node]

    def _first(self) -> Sig:
        return self


def _parts(parts: Sequence[object], what: str) -> list[_Part]:
    if not parts:
        raise InvalidArgumentError(f"{what} needs at least one part")
    for part in parts:
        if not isinstance(part, _Part):
            raise InvalidArgumentError(
                f"{what} takes task signatures (task.s(...)), chains and groups, "
                f"got {describe(part)}"
            )
    return list(parts)  # type: ignore[arg-type]


class Chain(_Part):
    """Parts run one after the other: each waits for the previous one's last jobs."""

    def __init__(self, *parts: _Part) -> None:
        self.parts = _parts(parts, "chain")

    def _place(self, graph: Graph, incoming: list[Node], policy: Policy) -> list[Node]:
        current = incoming
        for i, part in enumerate(self.parts):
            current = part._place(graph, current, policy if i == 0 else "success")
        return current

    def _first(self) -> Sig:
        return self.parts[0]._first()


class Group(_Part):
    """Parts run side by side, each after the same incoming jobs."""

    def __init__(self, *parts: _Part) -> None:
        self.parts = _parts(parts, "group")

    def _place(self, graph: Graph, incoming: list[Node], policy: Policy) -> list[Node]:
        out: list[Node] = []
        for part in self.parts:
            out.extend(part._place(graph, incoming, policy))
        return out

    def _first(self) -> Sig:
        return self.parts[0]._first()


class Batch(_Part):
    """Members side by side, with callbacks enqueued with them and made claimable once
    when the last member finishes: ``on_success`` only if every member succeeded (else
    dead-lettered naming the member that died), ``on_complete`` whatever happened."""

    def __init__(
        self,
        members: Sequence[_Part],
        on_success: _Part | None = None,
        on_complete: _Part | None = None,
    ) -> None:
        self.members = Group(*members)
        self.on_success = on_success
        self.on_complete = on_complete
        for name, cb in (("on_success", on_success), ("on_complete", on_complete)):
            if cb is not None and not isinstance(cb, _Part):
                raise InvalidArgumentError(f"{name} must be a task signature, got {describe(cb)}")

    def _place(self, graph: Graph, incoming: list[Node], policy: Policy) -> list[Node]:
        last = self.members._place(graph, incoming, policy)
        out: list[Node] = []
        if self.on_success is not None:
            out += self.on_success._place(graph, last, "success")
        if self.on_complete is not None:
            out += self.on_complete._place(graph, last, "complete")
        return out or last

    def _first(self) -> Sig:
        return self.members._first()


def sig(task: TaskLike, *args: Any, **kwargs: Any) -> Sig:
    """One task call in a flow (the same as ``task.s(*args, **kwargs)``)."""
    return Sig(task, args, dict(kwargs))


def chain(*parts: _Part) -> Chain:
    """``chain(a.s(), b.s(), c.s())``: ``b`` after ``a`` succeeded, ``c`` after ``b``."""
    return Chain(*parts)


def group(*parts: _Part) -> Group:
    """``group(a.s(1), a.s(2))``: side by side (after whatever precedes the group)."""
    return Group(*parts)


def chord(header: Iterable[_Part], body: _Part, *, policy: str = "success") -> Chain:
    """``chord([a.s(1), a.s(2)], total.s())``: ``total`` once every header job
    succeeded (``policy="complete"``: once each finished, whatever became of it)."""
    return Chain(Group(*header), _WithPolicy(body, check_policy(policy)))


def batch(
    members: Iterable[_Part], *, on_success: _Part | None = None, on_complete: _Part | None = None
) -> Batch:
    """Members with callbacks (see :class:`Batch`); counts by ``alkstore flows counts ID``."""
    return Batch(list(members), on_success, on_complete)


class _WithPolicy(_Part):
    def __init__(self, part: _Part, policy: Policy) -> None:
        self.part = part
        self.policy = policy

    def _place(self, graph: Graph, incoming: list[Node], policy: Policy) -> list[Node]:
        return self.part._place(graph, incoming, self.policy)

    def _first(self) -> Sig:
        return self.part._first()


async def parent_results(store: Store, job_id: int, queue: str) -> dict[int, Any]:
    """The values of the parents of job ``job_id`` of ``queue`` that succeeded, by
    parent id (``None`` for one that kept no value). In a task:
    ``job = current_job(); await parent_results(store, job.id, job.queue)``."""
    outcomes = await store.queue(queue).parent_outcomes(job_id)
    return {
        parent: o.value
        for parent, o in outcomes.items()
        if o is not None and o.outcome == "success"
    }
