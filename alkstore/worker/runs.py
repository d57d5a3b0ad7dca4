"""A claimed job's bookkeeping in the worker: ``Run``, its one ``RunState``, the
heartbeat period and the claim's deadline by the worker's own clock, and the
worker's stop as its parts read it (``StopFlag``)."""

from __future__ import annotations

import asyncio
import enum
from typing import TYPE_CHECKING, Any

from alkstore.tasks import BadCall, decode_call
from alkstore.worker.context import RunningJob

if TYPE_CHECKING:
    from alkstore.job_handle import JobHandle

__all__ = [
    "ACKING",
    "BUFFERED",
    "CANCELLED",
    "DONE",
    "HEARTBEAT_FRACTION",
    "LAPSE_MARGIN_S",
    "LIVE",
    "LOST",
    "RUNNING",
    "Run",
    "RunState",
    "StopFlag",
    "beat_period",
    "lapse_margin",
    "task_name",
]

HEARTBEAT_FRACTION = 1 / 3  # beat when a third of the visibility timeout has passed
LAPSE_MARGIN_S = 1.0  # a handler stops this long before its claim lapses by our clock


class RunState(enum.Enum):
    """Where one held claim is. ``BUFFERED`` → ``RUNNING`` → ``DONE`` (its outcome is
    being written) or ``ACKING`` (a success waiting in the completer's ack batch);
    ``CANCELLED`` / ``LOST`` from ``BUFFERED`` or ``RUNNING``: the job is no longer
    this worker's, its handler is stopped and no outcome is ever written."""

    BUFFERED = "buffered"
    RUNNING = "running"
    DONE = "done"
    ACKING = "acking"
    CANCELLED = "cancelled"
    LOST = "lost"


# module constants: a global load is cheaper than an enum class attribute (hot paths)
BUFFERED = RunState.BUFFERED
RUNNING = RunState.RUNNING
DONE = RunState.DONE
ACKING = RunState.ACKING
CANCELLED = RunState.CANCELLED
LOST = RunState.LOST
LIVE = (BUFFERED, RUNNING)  # still ours and its handler not returned: beat, lapse, revoke


class StopFlag:
    """The worker's stop as its parts read it: ``requested`` (no more claims, the
    grace period runs) and ``forced`` (a second signal: skip the grace period)."""

    __slots__ = ("forced", "requested")

    def __init__(self) -> None:
        self.requested = False
        self.forced = False


class Run:
    """One claimed job in this worker: its handle, state, task and heartbeat schedule."""

    __slots__ = (
        "batched",
        "beating",
        "began",
        "expires",
        "finished",
        "handle",
        "job",
        "name",
        "next_beat",
        "started",
        "state",
        "task",
    )

    def __init__(
        self, handle: JobHandle, now: float, sent: float, poll_beat_s: float | None
    ) -> None:
        self.handle = handle
        self.job = RunningJob(handle.job._row)  # what current_job() gives the handler
        self.state = BUFFERED
        self.started = now  # claimed; reset when the handler starts
        self.finished = 0.0  # when the handler returned and its slot freed (0.0: not yet)
        vt = handle.job.visibility_timeout_s
        self.next_beat = now + beat_period(vt, poll_beat_s)
        # when the claim lapses at the latest, by this worker's clock: the database set
        # its deadline after the request was sent (monotonic)
        self.expires = sent + vt
        self.beating = False  # the heartbeat service's: a heartbeat of it is in flight
        self.name = "?"  # the task's name, once decoded (for an outcome written later)
        # None while buffered; a batch item's is its outcome's future (``batches.py``)
        self.task: asyncio.Future[Any] | None = None
        self.batched = False  # an item of a batch handler: it takes no slot
        # its handler's run began (``Executor``): a task cancelled before its first
        # step would end without running its own cleanup, so a revoke leaves it be
        self.began = False

    @property
    def revoked(self) -> str | None:
        """``"cancelled"`` or ``"lost"`` once the job is no longer ours, else ``None``."""
        state = self.state
        return state.value if state is CANCELLED or state is LOST else None


def lapse_margin(visibility_timeout_s: float) -> float:
    """How long before its claim's lapse (by this worker's clock) a handler is stopped:
    ``LAPSE_MARGIN_S``, at most a quarter of the timeout. It covers the rate drift of
    the two clocks and a late timer; the deadline itself is already early (counted
    from before the claim or heartbeat was sent)."""
    return min(LAPSE_MARGIN_S, visibility_timeout_s / 4)


def beat_period(visibility_timeout_s: float, poll_beat_s: float | None) -> float:
    """Seconds between a held job's heartbeats: a third of its visibility timeout;
    on a poll-only store (no cancel or reclaim announcements) at most
    ``poll_beat_s``, so a refused beat stops a cancelled or reclaimed handler soon."""
    period = visibility_timeout_s * HEARTBEAT_FRACTION
    return period if poll_beat_s is None else min(period, poll_beat_s)


def task_name(run: Run) -> str:
    """The task a run's job names, ``"?"`` when it is not a task call."""
    try:
        return decode_call(run.handle.job.payload)[0]
    except BadCall:
        return "?"
