"""THE SEAM: one method per storage operation.

The store (``store.py``) validates and resolves every input in ``core/`` and
then makes exactly one call here. An engine implements storage only: it never
decides a semantic the core could decide once (defaults, backoff, the
retry-or-dead choice, error strings). Rows come back in the layout of
``core.job.ROW_FIELDS``.

Fencing: single-job operations take ``(queue, job_id, attempts)``; they act
only if the row is ``processing``, its claim deadline has not passed and its
``attempts`` still equals the handle's (so a stale handle never touches a
later claim).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from alkstore.core.dedupe import Enqueued
from alkstore.core.deps import GraphNode
from alkstore.core.flow import Claimed
from alkstore.core.job import Row
from alkstore.core.options import Stamps

if TYPE_CHECKING:
    from alkstore.core.bulk import BulkStep
    from alkstore.core.filters import JobFilter
    from alkstore.core.health import HealthFacts  # the doctor's types: not imported at start

__all__ = ["Engine", "EngineTransaction", "NoteSink", "SupportsHandoff", "SupportsOutbox"]

# Called by an engine's listener, on the store's event loop, with each batch of
# (channel, payload) notes; an empty batch means "a gap: notes may have been
# lost, re-poll" (a reconnect, or a lagging listener).
NoteSink = Callable[[Sequence[tuple[str, str]]], None]
# One queue's counts (Engine.stats): queue, due, delayed, processing, dead, oldest due age, blocked.
StatsRow = tuple[str, int, int, int, int, float | None, int]


class EngineTransaction(Protocol):
    """An open transaction on one engine connection."""

    async def enqueue(self, queue: str, payloads: Sequence[bytes], stamps: Stamps) -> list[int]:
        """Insert rows inside the transaction; their wake is sent only on commit."""

    async def enqueue_keyed(
        self,
        queue: str,
        payloads: Sequence[bytes],
        keys: Sequence[str | None],
        window_s: float | None,
        stamps: Stamps,
    ) -> list[Enqueued]:
        """Deduplicated insert inside the transaction (``core.dedupe.keyed_enqueue``)."""

    async def enqueue_graph(self, nodes: Sequence[GraphNode]) -> list[int]:
        """``core.deps.enqueue_graph`` inside the transaction (all or nothing); wakes on
        commit."""

    async def notify(self, channel: str, payload: str) -> None:
        """Queue a notification delivered on commit, never on rollback."""

    async def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] | None) -> list[Row]:
        """Run the caller's own SQL in the transaction; rows if it returns any."""

    async def commit(self) -> None:
        """Commit, then send the wakes of the queues enqueued into."""

    async def rollback(self) -> None:
        """Roll back; nothing is left behind and no wake is sent."""


@runtime_checkable
class SupportsOutbox(Protocol):
    """A capability: enqueue inside a transaction the caller holds on their own connection."""

    async def enqueue_on(
        self, conn: Any, queue: str, payloads: Sequence[bytes], stamps: Stamps
    ) -> list[int]:
        """Insert rows on the caller's async connection, in their transaction; no wake."""

    def enqueue_on_sync(
        self, conn: Any, queue: str, payloads: Sequence[bytes], stamps: Stamps
    ) -> list[int]:
        """The same on the caller's blocking connection, in the caller's thread."""

    async def enqueue_keyed_on(
        self,
        conn: Any,
        queue: str,
        payloads: Sequence[bytes],
        keys: Sequence[str | None],
        window_s: float | None,
        stamps: Stamps,
    ) -> list[Enqueued]:
        """Deduplicated insert on the caller's async connection, in their transaction."""

    def enqueue_keyed_on_sync(
        self,
        conn: Any,
        queue: str,
        payloads: Sequence[bytes],
        keys: Sequence[str | None],
        window_s: float | None,
        stamps: Stamps,
    ) -> list[Enqueued]:
        """The same on the caller's blocking connection."""


@runtime_checkable
class SupportsHandoff(Protocol):
    """A capability: an enqueue may insert its job already claimed by an idle worker,
    which hears of it on a channel of its own (docs/postgres.md "Hand-offs").

    A worker opens a slot (``handoff_open``: its channel, or ``None`` when this
    store hands nothing off), listens on the channel, says when it is idle
    (``handoff_idle``: its last claim found its queues empty and it has a free
    slot) and closes the slot when it stops. A note on the channel is a row
    (``handoff_row`` decodes it; ``None``: fetch it with ``handed_row``)."""

    async def handoff_open(self, worker_id: str, queues: Sequence[str]) -> tuple[int, str] | None:
        """Register ``worker_id`` for hand-offs of ``queues``: (slot, channel), or None."""

    def handoff_idle(self, slot: int, idle: bool) -> None:
        """Take (``idle``) or drop the slot's idle mark; not waited for."""

    async def handoff_close(self, slot: int) -> None:
        """Drop the idle mark and the slot (a worker's stop)."""

    def handoff_row(self, payload: str) -> Row | int:
        """A hand-off note's row, or the job id alone when it did not fit in the note."""

    async def handed_row(self, job_id: int, worker_id: str) -> Row | None:
        """The row of a job handed to ``worker_id`` (still its first claim), or None."""


class Engine(Protocol):
    """Storage for one store: the operations of docs/contract.md, nothing decided here."""

    name: str

    @property
    def listens(self) -> bool:
        """A capability: whether :meth:`subscribe` delivers notes. ``False`` is a
        poll-only store (PostgreSQL ``listen=off``): the store never subscribes,
        ``store.listen()`` refuses, and claim loops rely on their re-poll."""

    async def open(self) -> None:
        """Connect and create or upgrade the schema (idempotent, safe concurrently)."""

    async def close(self) -> None:
        """Release every resource; idempotent."""

    async def enqueue(self, queue: str, payloads: Sequence[bytes], stamps: Stamps) -> list[int]:
        """Insert one row per payload in one transaction, then wake the queue's channel."""

    async def enqueue_debounced(
        self, queue: str, payload: bytes, key: str, push: bool, stamps: Stamps
    ) -> Enqueued:
        """Insert a job holding debounce ``key``, or, if a pending job holds it, replace
        that job's payload (and with ``push`` its run_at, from the stamps), atomically
        against a claim; ``Enqueued(id, replaced)``. Wake the queue."""

    async def enqueue_keyed(
        self,
        queue: str,
        payloads: Sequence[bytes],
        keys: Sequence[str | None],
        window_s: float | None,
        stamps: Stamps,
    ) -> list[Enqueued]:
        """Deduplicated insert, one transaction (``core.dedupe.keyed_enqueue`` drives the
        steps); then wake the queue's channel."""

    async def enqueue_graph(self, nodes: Sequence[GraphNode]) -> list[int]:
        """Insert the nodes in one transaction (``core.deps.enqueue_graph`` drives the
        steps; a DependencyError writes nothing); then wake their queues. A parent's
        end changes its dependents in its own transaction (migration 0008's trigger)."""

    async def job_edges(self, job_id: int) -> list[Row]:
        """``(parent, child, policy, killed)`` of every dependency edge touching the job."""

    async def ack_staged(
        self,
        items: Sequence[tuple[str, int, int]],
        staged: Mapping[int, Sequence[GraphNode]],
        receipt: tuple[str, str] | None = None,
        result: tuple[str, float] | None = None,
    ) -> set[tuple[int, int]]:
        """``ack_many`` (with ``receipt`` = (owner, token): ``ack_receipted``; with
        ``result`` = (value, keep_s), one item: ``ack_result``) that also inserts, in
        the same transaction, the staged follow-ups (``core.followups``) of the rows
        this very call deleted; the acked pairs, as the plain call answers."""

    async def claim(self, queue: str, worker_id: str, n: int, exhausted_error: str) -> Claimed:
        """Pre-claim exhausted sweep (dead rows get ``exhausted_error``) plus claim of up
        to ``n`` rows, in one atomic unit; in any order (the store sorts them).

        The unit reads the queue's settings row: a paused queue claims nothing; a
        limited one counts and spends its limits race-free by running the steps of
        ``core.limited_claim.limited_claim`` (which decides, through ``core.flow``,
        in what order and how much), all inside that unit. While a queue's
        claims come back limited, an outcome that frees one of its slots (ack,
        retry, dead letter, release) also wakes its channel; a lapsed claim taken
        over is announced on it (``core.flow.RECLAIMED_NOTE``)."""

    async def ack_many(self, items: Sequence[tuple[str, int, int]]) -> set[tuple[int, int]]:
        """Delete each fenced ``(queue, job_id, attempts)`` row in one transaction;
        return the ``(job_id, attempts)`` pairs that were deleted."""

    async def ack_receipted(
        self, items: Sequence[tuple[str, int, int]], owner: str, token: str
    ) -> set[tuple[int, int]]:
        """``ack_many`` that also writes ``owner``'s receipt in the same transaction
        (docs/contract.md, "Ack receipts"): batch ``token`` and the ids not deleted. A
        retry with the same token answers for every attempt of the batch: the pairs
        that this call or an earlier committed one with ``token`` deleted."""

    async def drop_ack_receipts(self, owner: str, older_s: float) -> None:
        """Delete ``owner``'s receipt and every receipt older than ``older_s`` seconds."""

    async def ack_result(
        self, queue: str, job_id: int, attempts: int, value: str, keep_s: float
    ) -> bool:
        """Fenced delete plus the kept result (``outcome`` success, finish time, attempts,
        expiry ``now + keep_s``) in one transaction; on commit, ``str(job_id)`` is sent on
        ``core.results.RESULTS_CHANNEL``."""

    async def outcomes(self, queue: str | None, ids: Sequence[int]) -> list[Row]:
        """``core.results.OUTCOME_FIELDS`` rows of the listed jobs (of ``queue``, or of any
        queue if None) that are live, dead or have a kept result (else absent)."""

    async def retry(
        self, queue: str, job_id: int, attempts: int, delay_s: float, error: str | None
    ) -> bool:
        """Fenced row back to pending at ``now + delay_s`` with ``last_error``."""

    async def release(self, queue: str, job_id: int, attempts: int, delay_s: float | None) -> bool:
        """Fenced row back to pending with ``attempts - 1``: at its place in line
        (``delay_s`` None: a claim that never ran) or at ``now + delay_s`` (a snooze)."""

    async def release_batch(self, queue: str, items: Sequence[tuple[int, int]]) -> set[int]:
        """``release`` (``delay_s`` None) of each fenced ``(job_id, attempts)`` claim of
        ``queue``, in one transaction; the ids released (a stale claim is not)."""

    async def dead_letter(self, queue: str, job_id: int, attempts: int, error: str) -> bool:
        """Move the fenced row to the dead table in one transaction."""

    async def heartbeat(
        self, queue: str, job_id: int, attempts: int, extend_s: float | None
    ) -> bool:
        """Fenced reset of the claim deadline to ``now + extend_s`` (or the row's timeout)."""

    async def ack_batch(self, queue: str, ids: Sequence[int]) -> int:
        """Delete each listed processing row with an unexpired claim; count them."""

    async def cancel(self, queue: str, job_id: int) -> bool:
        """Delete the live row in either state."""

    async def get_job(self, queue: str, job_id: int) -> Row | None:
        """Read a live or dead row."""

    async def sweep(
        self, queue: str, retention_s: float | None, expired_error: str
    ) -> tuple[int, int, int, int]:
        """Move expired live rows to dead (with ``expired_error``); purge dead rows
        older than ``retention_s``, kept results and dedupe windows past their expiry;
        the four counts."""

    async def next_wake_in(self, queue: str, within_s: float) -> float | None:
        """Seconds until the next delayed row becomes due or a claim lapses, if that is
        within ``within_s`` (the caller looks again by then; docs/contract.md, "Wakes")."""

    async def schedule_marks(self, names: Sequence[str]) -> list[tuple[str, float, int | None]]:
        """``(name, last tick as POSIX seconds, last job id)`` of the listed schedules."""

    async def mark_schedule(self, name: str, tick: float, job_id: int | None) -> None:
        """Move the schedule's mark to ``tick`` if that is later than its mark (or create it)."""

    async def notify(self, channel: str, payload: str) -> None:
        """Send a notification (auto-commit)."""

    async def wake(self, channel: str) -> None:
        """Best-effort wake of ``channel`` (may coalesce; a failure is only logged)."""

    async def queue_settings(self, queue: str | None) -> list[Row]:
        """``alk_queues`` rows (layout of ``core.flow.QueueSettings``): one queue's, or all."""

    async def set_paused(self, queue: str, paused: bool) -> None:
        """Upsert the queue's ``paused``; on resume, wake its channel at commit. A pause
        returns only when no claim that began before it is still running."""

    async def set_limits(
        self,
        queue: str,
        concurrency: int | None,
        partition_concurrency: int | None,
        rate: tuple[int, float] | None,
        burst: int | None,
    ) -> None:
        """Upsert the queue's limits (replacing all of them, resetting the rate state);
        wake its channel at commit."""

    async def set_fair(self, queue: str, fair: bool, weights: dict[str, float] | None) -> None:
        """Upsert the queue's ``fair`` flag: on, seed a key cursor per partition key
        with live jobs; off, drop them. ``weights`` (not None) replace the key
        weights. Wake its channel at commit."""

    async def fair_weights(self, queue: str) -> dict[str, float]:
        """The queue's key weights (keys without one weigh 1)."""

    async def set_aging(self, queue: str, aging_s: float | None) -> None:
        """Upsert the queue's aging interval (``None``: no aging)."""

    async def subscribe(self, channels: Sequence[str], sink: NoteSink) -> None:
        """Start delivering notes of ``channels`` (store channels included) to ``sink``;
        called only when :attr:`listens`."""

    async def unsubscribe(self, channels: Sequence[str]) -> None:
        """Stop listening on ``channels``."""

    async def begin(self) -> EngineTransaction:
        """Open a transaction for ``store.transaction()``."""

    # -- admin (alkstore/admin.py): reads and repairs beyond the queue contract -----
    async def list_jobs(
        self, queue: str, state: str | None, limit: int, after: int = 0, before: int | None = None
    ) -> list[Row]:
        """Rows of ``queue``, live and dead (or only ``state``), at most ``limit``: with id
        > ``after`` in id order, or (``before`` given) with id < ``before``, nearest first."""

    async def list_key_jobs(
        self, queue: str, key: str, state: str | None, limit: int, cursor: int, before: bool
    ) -> list[Row]:
        """Pending and processing rows of ``queue`` with partition key ``key`` (or only
        ``state``, one of those two), at most ``limit``: id > ``cursor`` in id order, or
        (``before``) id < ``cursor``, nearest first. Read from the indexes that hold
        those rows by key; blocked and dead rows have none and are not listed."""

    async def find_job(self, job_id: int) -> Row | None:
        """The live or dead row with this id, in any queue."""

    async def list_dead(self, after: int | None, before: int | None, limit: int) -> list[Row]:
        """Dead rows of every queue: ``limit`` with id > ``after`` in id order, or
        (``before`` given) ``limit`` with id < ``before``, nearest first."""

    async def list_outcomes(self, queue: str, limit: int) -> list[Row]:
        """The latest finished jobs of ``queue`` (kept results and dead rows), newest first,
        as ``OUTCOME_FIELDS`` rows, at most ``limit``."""

    async def requeue_dead(
        self, job_id: int, attempts: int, delay_s: float, expiry_cutoff_s: float
    ) -> bool:
        """One transaction: dead row back to live ``pending`` with ``attempts`` as given,
        ``run_at = now + delay_s``, and its ``expires_at`` cleared if it is not later
        than ``now + expiry_cutoff_s`` (kept otherwise); then wake its queue. The
        values are the caller's (``alkstore.admin``): the engine decides none of them."""

    async def stats(self) -> list[StatsRow]:
        """Per queue, by name: ``(queue, pending due now, pending delayed, processing,
        dead, seconds since the oldest due pending row's run_at or None, blocked)``."""

    # -- live workers and outcome history (alkstore/admin.py) -----------------------
    async def upsert_worker(
        self,
        worker_id: str,
        host: str,
        pid: int,
        queues: Sequence[str],
        concurrency: int,
        running: int,
    ) -> None:
        """Register the worker or refresh its row; ``last_seen = now``."""

    async def delete_worker(self, worker_id: str) -> bool:
        """Remove the worker's row (it stopped)."""

    async def purge_workers(self, older_than_s: float) -> int:
        """Delete workers not seen for ``older_than_s``; count them."""

    async def list_workers(self) -> list[Row]:
        """``(id, host, pid, queues, concurrency, running, started_at, last_seen,
        seconds since last_seen)`` per worker, by start time."""

    async def list_workers_page(
        self, after: str | None, before: str | None, limit: int
    ) -> list[Row]:
        """``list_workers`` rows by id, a keyset page: ``limit`` with id > ``after`` in id
        order, or (``before`` given) ``limit`` with id < ``before``, nearest first."""

    async def add_outcomes(self, counts: Sequence[tuple[str, str, int]], keep_s: float) -> None:
        """Add each ``(queue, outcome, n)`` to the current minute (one transaction);
        drop minutes older than ``keep_s``."""

    async def outcome_history(self, seconds: float) -> list[tuple[str, float, str, int]]:
        """``(queue, minute start as POSIX seconds, outcome, n)`` of the last ``seconds``."""

    async def outcome_series(
        self, seconds: float, bucket_s: int, queue: str | None
    ) -> list[tuple[str, float, str, int]]:
        """``(queue, bucket start as POSIX seconds, outcome, n)`` of the last ``seconds``
        summed per ``bucket_s`` (a multiple of 60), of one ``queue`` or all."""

    # -- store copy (alkstore/copy.py): the tables of core.tables, engine-neutral rows --
    async def copy_counts(self) -> dict[str, int]:
        """Rows of each table of ``core.tables.COPIED_TABLES``, by table name."""

    async def copy_read(self, table: str, after: Sequence[Any], limit: int) -> list[Row]:
        """Up to ``limit`` rows of ``table`` with a key above ``after``, in key order
        (text by code point), columns and kinds as ``core.tables`` lists them."""

    async def copy_write(self, table: str, rows: Sequence[Row]) -> None:
        """Insert the rows as given (ids included), in one transaction."""

    async def last_job_id(self) -> int:
        """The highest job id this store ever handed out (0: none)."""

    async def advance_job_ids(self, last: int) -> None:
        """Make the next new job's id ``last + 1`` (called only above :meth:`last_job_id`)."""

    # -- alkstore doctor (alkstore/admin.py, Admin.health) ---------------------------
    async def health_facts(self) -> HealthFacts:
        """One read-only look at the store for ``core.health``: schema version, claims
        past their deadline, and what only this engine has (PostgreSQL's table
        statistics, xmin horizon holders and blind spots; SQLite's WAL); workers
        and clock offset are left for the caller."""

    # -- a job's life (#24; alkstore/life.py, worker/job_life.py) ---------------------
    # Attempt rows are ``(job_id, queue, attempt, worker_id, host, claimed_at,
    # finished_at, outcome, error)`` with POSIX-second times.
    async def add_attempts(self, rows: Sequence[Row], keep: int) -> None:
        """Insert finished attempts and keep each listed job's newest ``keep``; one
        transaction."""

    async def attempts(self, queue: str, job_id: int) -> list[Row]:
        """``(attempt, worker_id, host, claimed_at, finished_at, outcome, error, trimmed)`` of
        the job's stored attempts, oldest first."""

    async def put_progress(
        self, queue: str, job_id: int, attempts: int, value: float, message: str | None
    ) -> bool:
        """Fenced upsert of the job's progress; ``False`` if the claim is not the writer's."""

    async def progress(self, queue: str, job_id: int) -> Row | None:
        """``(attempt, value, message, updated_at)`` of the job's latest progress."""

    async def put_step(self, queue: str, job_id: int, attempts: int, name: str, value: str) -> bool:
        """Fenced insert of a step's JSON result; ``False`` if the claim is not the
        writer's (or the key is taken)."""

    async def steps(self, queue: str, job_id: int) -> dict[str, str]:
        """The job's stored step results (JSON text) by key."""

    async def put_signal(self, job_id: int, name: str, payload: str) -> str | None:
        """Store the signal of a live job (the first of a name stays), then make the
        job due now if it is parked on it and wake its queue; the job's queue, or
        ``None`` if no live job has that id."""

    async def get_signal(self, queue: str, job_id: int, name: str) -> str | None:
        """The payload (JSON text) of the job's signal ``name``, if it was sent."""

    async def poke_parked(self, queue: str, job_id: int, name: str) -> bool:
        """After a park's give-back committed: make the job due now (and wake its
        queue) if signal ``name`` came meanwhile."""

    async def purge_life(self, queue: str) -> int:
        """Drop the life rows of the queue's jobs that are gone; count them."""

    # -- search and bulk actions (alkstore/bulk.py, Admin.find) ------------------------
    async def search_jobs(self, f: JobFilter, after: int, limit: int) -> list[Row]:
        """Live and dead rows matching ``f`` with id > ``after``, in id order, at most
        ``limit`` (a keyset page: each table's arm walks an index from the cursor)."""

    async def count_jobs(self, f: JobFilter) -> int:
        """How many live and dead rows match ``f`` now."""

    async def bulk_create(
        self,
        action: str,
        filter_text: str,
        priority: int | None,
        to_queue: str | None,
        actor: str,
        matched: int,
        phase: str,
    ) -> int:
        """Insert an action's audit row (its cursor at the start of ``phase``); its id."""

    async def bulk_step(self, action_id: int, step: BulkStep) -> Row | None:
        """One batch of the action, in one transaction that also moves its cursor and
        ``done`` (two runners take turns on the action's row); the row after it
        (``None``: no such action). A finished action's row is returned unchanged."""

    async def bulk_get(self, action_id: int) -> Row | None:
        """One action's audit row."""

    async def bulk_list(self, before: int | None, limit: int) -> list[Row]:
        """Actions' audit rows, newest first, with id < ``before`` if given."""
