"""Bulk actions by filter: what each action reaches and the checks of a request.

I/O-free. An action touches only the states listed in :data:`ACTION_STATES`
(a running job is never retried, moved or re-prioritised under its worker; a
dead row is never "cancelled"), so its dry-run count is the count of the
filter narrowed to those states. ``alkstore.bulk`` drives it; the engines run
one bounded batch per transaction.
"""

from __future__ import annotations

from dataclasses import dataclass

from alkstore.core.filters import JobFilter
from alkstore.core.names import check_name
from alkstore.core.options import describe
from alkstore.errors import InvalidArgumentError, InvalidNameError

__all__ = [
    "ACTION_STATES",
    "BULK_ACTIONS",
    "PHASES",
    "BulkRequest",
    "BulkStep",
    "PRIORITY_MAX",
    "REQUEUE_ATTEMPTS",
    "REQUEUE_EXPIRY_CUTOFF_S",
]

# retry: a dead job back to pending now with a fresh attempt budget (as
#   Admin.requeue), a delayed job due now; cancel: delete live jobs (a running one
#   is told to stop, as Queue.cancel; a blocked one takes its dependents down with it,
#   as a cancelled parent does); delete: delete dead jobs; priority: set the
#   priority of waiting and dead jobs; move: put waiting and dead jobs in another queue.
ACTION_STATES: dict[str, tuple[str, ...]] = {
    "retry": ("delayed", "dead"),
    "cancel": ("pending", "delayed", "processing", "blocked"),
    "delete": ("dead",),
    "priority": ("pending", "delayed", "dead"),
    "move": ("pending", "delayed", "dead"),
}
BULK_ACTIONS: tuple[str, ...] = tuple(ACTION_STATES)
# An action walks the live table, then the dead one, each in id order; its cursor is
# (phase, last id done). A dead row a retry moves to the live table is behind it.
PHASES: tuple[str, ...] = ("live", "dead", "done")
PRIORITY_MAX = 2**31 - 1
# What a requeue (Admin.requeue, a bulk retry of a dead job) sets, decided here once
# for every engine (the engines take the values):
REQUEUE_ATTEMPTS = 0  # a fresh attempt budget
# an expiry at or before now + this is cleared (else the job would expire again at
# once); a later one is kept
REQUEUE_EXPIRY_CUTOFF_S = 0.0


@dataclass(frozen=True)
class BulkRequest:
    """One bulk action: ``action`` on the jobs ``filter`` matches (within the action's
    states), with its argument (``priority`` for "priority", ``to_queue`` for "move")."""

    action: str
    filter: JobFilter
    priority: int | None = None
    to_queue: str | None = None

    def __post_init__(self) -> None:
        if self.action not in ACTION_STATES:
            raise InvalidArgumentError(
                f"invalid bulk action {describe(self.action)}: use one of {', '.join(BULK_ACTIONS)}"
            )
        if not isinstance(self.filter, JobFilter):
            raise InvalidArgumentError(f"filter must be a JobFilter, got {describe(self.filter)}")
        if self.action == "priority":
            p = self.priority
            if type(p) is not int or not -PRIORITY_MAX <= p <= PRIORITY_MAX:
                raise InvalidArgumentError(f"priority must be an int, got {describe(p)}")
        elif self.priority is not None:
            raise InvalidArgumentError(
                f"priority is only for the priority action, not {self.action}"
            )
        if self.action == "move":
            try:
                check_name(self.to_queue)
            except InvalidNameError as e:
                raise InvalidArgumentError(f"invalid target queue: {e}") from None
        elif self.to_queue is not None:
            raise InvalidArgumentError(f"to_queue is only for the move action, not {self.action}")

    def reach(self) -> JobFilter | None:
        """The filter narrowed to the states this action touches (``None``: nothing)."""
        return self.filter.narrowed(ACTION_STATES[self.action])

    def phases(self) -> tuple[str, ...]:
        """The tables this action walks, in order."""
        reach = self.reach()
        if reach is None:
            return ()
        return tuple(
            p
            for p, wanted in (("live", bool(reach.live_states())), ("dead", reach.wants_dead()))
            if wanted
        )


@dataclass(frozen=True)
class BulkStep:
    """What an engine needs to run one batch of an action: the reach (the filter
    narrowed to the action's states), the phases in order, the batch size and the
    values the action writes, all decided by the caller (``alkstore.bulk``)."""

    action: str
    reach: JobFilter
    phases: tuple[str, ...]
    limit: int
    priority: int | None = None
    to_queue: str | None = None
    attempts: int = 0  # a retried dead job's attempts (a fresh budget)
    expiry_cutoff_s: float = 0.0  # a retried job's expiry at or before now + this is cleared
    cancel_note: str = "cancel:"  # sent as note + id on a cancelled running job's queue

    def next_phase(self, phase: str) -> str:
        """The phase after ``phase`` ("done" after the last)."""
        later = self.phases[self.phases.index(phase) + 1 :] if phase in self.phases else ()
        return later[0] if later else "done"

    def first_phase(self) -> str:
        """Where a new action starts ("done" if it reaches nothing)."""
        return self.phases[0] if self.phases else "done"
