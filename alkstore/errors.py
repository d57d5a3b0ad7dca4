"""The alkstore error family (docs/contract.md, "Durability and errors").

Every public entry raises one of these; driver failures are translated at the
engine boundary into :class:`EngineError` with the driver's exception on
``__cause__``.
"""

from __future__ import annotations

__all__ = [
    "AlkstoreError",
    "CopyRefusedError",
    "DependencyError",
    "EngineError",
    "HandleConsumedError",
    "InvalidArgumentError",
    "InvalidNameError",
    "JobDeadError",
    "JobLostError",
    "PayloadError",
    "PayloadTooLargeError",
    "ResultTimeoutError",
    "ResultUnavailableError",
    "SignalTimeoutError",
    "StoreClosedError",
]


class AlkstoreError(Exception):
    """Base of every error alkstore raises."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


class InvalidNameError(AlkstoreError, ValueError):
    """A queue or channel name breaks the naming rule."""


class InvalidArgumentError(AlkstoreError, ValueError):
    """An option or argument has a value outside its allowed range."""


class PayloadError(AlkstoreError):
    """A payload (or notification payload) cannot be encoded."""


class PayloadTooLargeError(PayloadError):
    """A payload or result is larger than the store's ``max_payload_bytes``; nothing
    was written. ``size`` and ``limit`` are in bytes."""

    def __init__(self, what: str, size: int, limit: int) -> None:
        super().__init__(
            f"{what} of {size:,} bytes is larger than the store's limit of {limit:,} bytes "
            "(max_payload_bytes): store large data elsewhere and enqueue a reference to it"
        )
        self.size = size
        self.limit = limit


class StoreClosedError(AlkstoreError):
    """The store is closed (or was inherited across fork); nothing was done."""


class HandleConsumedError(AlkstoreError):
    """The job handle was already consumed by ack, retry or fail."""


class DependencyError(InvalidArgumentError):
    """A parent named in ``after`` is not live and left no kept outcome; ``job_id`` names it."""

    def __init__(self, message: str, job_id: int) -> None:
        super().__init__(message)
        self.job_id = job_id


class EngineError(AlkstoreError):
    """The database failed; the driver's exception is on ``__cause__``.

    ``connection_ended``: the server ended this operation's connection (its shutdown,
    or the backend terminated): that says nothing of whether the database answers
    now, which the next operation, on another connection, finds out."""

    def __init__(self, message: str, *, connection_ended: bool = False) -> None:
        super().__init__(message)
        self.connection_ended = connection_ended


class JobDeadError(AlkstoreError):
    """The awaited job is dead (failed for good); ``last_error`` says why."""

    def __init__(self, job_id: int, last_error: str | None, attempts: int) -> None:
        first = (last_error or "").splitlines()[0] if last_error else "no error recorded"
        super().__init__(f"job {job_id} is dead after {attempts} attempt(s): {first}")
        self.job_id = job_id
        self.last_error = last_error
        self.attempts = attempts


class ResultTimeoutError(AlkstoreError, TimeoutError):
    """The awaited job did not finish within the timeout (it may still finish)."""


class ResultUnavailableError(AlkstoreError):
    """The job is gone without a kept result (no such job, not kept, or purged)."""


class CopyRefusedError(AlkstoreError):
    """A store copy was refused (workers registered, destination not empty) or did not verify."""


class JobLostError(AlkstoreError):
    """Raised inside a handler: the job is no longer this worker's (its claim lapsed
    or was taken, or it was cancelled), so a step result was not stored."""


class SignalTimeoutError(AlkstoreError, TimeoutError):
    """Raised inside a handler by ``current_job().wait_for``: the signal did not
    come within ``timeout_s``."""
