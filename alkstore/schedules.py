"""Periodic tasks: cron schedules whose ticks every worker may enqueue, each exactly once.

No leader: each worker's scheduler computes the ticks due since the
schedule's mark (``alk_schedules``) and enqueues each as a job whose dedupe
key names the tick, with a dedupe window, so the database turns every
second enqueue of a tick (another worker, a restart, a stale read) into a
duplicate. The mark then moves forward (never back), so a restarted worker
knows what it missed. Cron is parsed and iterated by ``cronsim``, in the
schedule's time zone: a tick that falls in a DST gap or repeat is whatever
cronsim yields (e.g. ``30 2 * * *`` in Europe/Paris on the spring-forward day
runs at 03:00; on the fall-back day it runs once, at the first 02:30).

>>> @app.periodic(cron="*/5 * * * *", timezone="Europe/Paris")
... @app.task(queue="reports")
... async def report() -> None: ...
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from alkstore.bookkeeping import Bookkeeping
from alkstore.core.dedupe import Enqueued
from alkstore.core.options import EnqueueOpts
from alkstore.core.payload import encode_payload
from alkstore.errors import InvalidArgumentError

if TYPE_CHECKING:
    from alkstore.store import Store
    from alkstore.tasks import Task

__all__ = ["MISSED_POLICIES", "Schedule", "Tick", "enqueue_due", "tick_of"]

Missed = Literal["latest", "skip", "all"]
MISSED_POLICIES: tuple[Missed, ...] = ("latest", "skip", "all")
NAME_MAX = 200


def _zone(name: object) -> ZoneInfo:
    if type(name) is not str or not name:
        raise InvalidArgumentError(f"timezone must be an IANA zone name, got {name!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as e:
        raise InvalidArgumentError(f"unknown timezone {name!r}: {e}") from None


@dataclass(frozen=True)
class Tick:
    """What the scheduler did for one tick: the job (``None``: skipped, the previous
    tick's job was still live)."""

    schedule: str
    at: datetime
    enqueued: Enqueued | None


@dataclass(frozen=True)
class Schedule:
    """One cron schedule of a task, with its own arguments."""

    task: Task[Any, Any]
    cron: str
    timezone: str = "UTC"
    args: Mapping[str, Any] = field(default_factory=dict)
    name: str = ""
    missed: Missed = "latest"
    max_missed: int = 10
    grace_s: float = 60.0
    overlap: bool = False

    def __post_init__(self) -> None:
        zone = _zone(self.timezone)
        if type(self.cron) is not str:
            raise InvalidArgumentError(f"cron must be a str, got {self.cron!r}")
        try:
            CronSim(self.cron, datetime.now(zone))
        except CronSimError as e:
            raise InvalidArgumentError(f"invalid cron {self.cron!r}: {e}") from None
        if self.missed not in MISSED_POLICIES:
            raise InvalidArgumentError(
                f"invalid missed={self.missed!r}: use one of {', '.join(MISSED_POLICIES)}"
            )
        if type(self.max_missed) is not int or self.max_missed < 1:
            raise InvalidArgumentError(f"max_missed must be an int >= 1, got {self.max_missed!r}")
        self.task.payload(**self.args)  # the arguments must fit (TypeError / PayloadError)
        if not self.name:
            args = json.dumps(dict(self.args), sort_keys=True, separators=(",", ":"))
            suffix = "" if not self.args else f" {args}"
            object.__setattr__(
                self, "name", f"{self.task.name} {self.cron} {self.timezone}{suffix}"
            )
        if type(self.name) is not str or len(self.name) > NAME_MAX:
            raise InvalidArgumentError(
                f"schedule name must be a str of at most {NAME_MAX} characters, got {self.name!r}"
            )

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def latest_at_or_before(self, now: float) -> datetime:
        """The newest tick at or before ``now``."""
        return next(iter(CronSim(self.cron, datetime.fromtimestamp(now, self.zone), reverse=True)))

    def next_after(self, moment: float) -> datetime:
        """The first tick after ``moment``."""
        return next(iter(CronSim(self.cron, datetime.fromtimestamp(moment, self.zone))))

    def due(self, last: float, now: float) -> list[datetime]:
        """The ticks in ``(last, now]`` this schedule's missed-tick policy runs, oldest first,
        and (last item of the second list) the newest due tick, run or not."""
        newest: list[datetime] = []
        bound = self.max_missed if self.missed == "all" else 1
        for tick in CronSim(self.cron, datetime.fromtimestamp(now, self.zone), reverse=True):
            if tick.timestamp() <= last or len(newest) >= bound:
                break
            newest.append(tick)
        if self.missed == "skip":
            newest = [t for t in newest if now - t.timestamp() <= self.grace_s]
        return newest[::-1]

    def window_s(self, tick: datetime) -> float:
        """How long a tick's dedupe key outlives its job: ten periods, 1 minute to 1 day."""
        period = (self.next_after(tick.timestamp()) - tick).total_seconds()
        return min(max(10 * period, 60.0), 86400.0)

    def payload(self, tick: datetime) -> bytes:
        """The tick's job: the task call plus the tick time (``current_tick()``)."""
        call = {
            "task": self.task.name,
            "args": self.task.bind(**self.args),
            "tick": tick.astimezone(UTC).isoformat(),
        }
        return encode_payload(call)

    def key(self, tick: datetime) -> str:
        return f"tick:{self.name}:{tick.timestamp():.6f}"


def tick_of(payload: bytes) -> datetime | None:
    """The tick time in a scheduled job's payload, else ``None``."""
    try:
        data = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return None
    tick = data.get("tick") if isinstance(data, dict) else None
    return datetime.fromisoformat(tick) if isinstance(tick, str) else None


async def enqueue_due(
    store: Store, schedules: list[Schedule], now: float | None = None
) -> list[Tick]:
    """Enqueue every due tick of ``schedules`` once (any number of callers may race)."""
    books = Bookkeeping(store)
    marks = {
        name: (tick, job)
        for name, tick, job in await books.schedule_marks([s.name for s in schedules])
    }
    moment = time.time() if now is None else now
    done: list[Tick] = []
    for schedule in schedules:
        mark = marks.get(schedule.name)
        if mark is None:  # a new schedule starts from here: the next tick is its first
            start = schedule.latest_at_or_before(moment).timestamp()
            await books.mark_schedule(schedule.name, start, None)
            continue
        last, last_job = mark
        newest = schedule.latest_at_or_before(moment).timestamp()
        if newest <= last:
            continue
        ticks = schedule.due(last, moment)
        task = schedule.task
        queue = store.queue(task.queue, task.opts)
        job_id = None
        busy = False  # the previous round's tick job still live: no pile-up
        if ticks and not schedule.overlap and last_job is not None:
            outcome = await queue.outcome(last_job)
            busy = outcome is not None and outcome.outcome in ("pending", "processing")
        for tick in ticks:
            if busy:
                done.append(Tick(schedule.name, tick, None))
                continue
            opts = EnqueueOpts(
                run_at=tick,
                dedupe_key=schedule.key(tick),
                dedupe_window_s=schedule.window_s(tick),
            )
            got = await queue.enqueue_unique(schedule.payload(tick), opts)
            done.append(Tick(schedule.name, tick, got))
            job_id = got.id
        await books.mark_schedule(schedule.name, newest, job_id)
    return done
