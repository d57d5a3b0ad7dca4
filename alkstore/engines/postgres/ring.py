"""The ring: ``alk_jobs``' partitions turned and truncated (docs/postgres.md, "The ring").

Plain jobs go to the ring's current partition (``alk_ring.slot``, read by the
insert). :meth:`PostgresRing.ring_step` is the maintenance step; any process
of the store may run it, one at a time (the ring's row, locked ``SKIP
LOCKED``):

1. when the current partition took :data:`RING_CAP` jobs (and the last turn is
   :data:`RING_MIN_TURN_S` old), the pending rows of
   the next partition that are not due yet (retries in backoff) move forward
   to the current one;
2. every partition that holds no row but has a file (``pg_relation_size``) is
   truncated, each in its own transaction: its lock asked for with a 50-ms
   ``lock_timeout`` (a claim queues behind the request for at most that),
   emptiness checked again under the lock, skipped on timeout and tried again
   after a pause that doubles up to a minute (a session holding a lock on
   ``alk_jobs`` pins every partition until it ends);
3. the ring turns onto the next partition once that one is empty and truncated.

A partition holding a processing row, a due pending row or a row with
dependency bits is neither truncated nor turned onto: the ring waits (the
current partition grows past the cap, vacuum clears it as before the ring).

The step runs in the background after every :data:`RING_CHECK_EVERY` jobs this
store claimed or enqueued (at most every :data:`RING_CHECK_PAUSE_S`), and at
each sweep. A role that may not lock the
ring's row (a producer's grants) skips it quietly from then on; one that may not
truncate (the worker's grants without ``TRUNCATE``) turns it off for the store
with one warning.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any, NamedTuple

import psycopg

from alkstore.engines.postgres.connections import PostgresConnections, privilege_hint
from alkstore.errors import StoreClosedError

__all__ = [
    "RING_CAP",
    "RING_CHECK_EVERY",
    "RING_MIN_TURN_S",
    "RING_SIZE",
    "PostgresRing",
    "RingStep",
]

log = logging.getLogger("alkstore.postgres")

RING_SIZE = 8  # partitions alk_jobs_p0 .. p7 (schema.sql)
RING_CAP = 1_000  # jobs the current partition takes before the ring turns
# ... and not sooner than this after the last turn: each turn truncates a partition,
# which invalidates every session's cached plans over alk_jobs (each plans its
# claim again, ~1.5 ms); at 50,000 jobs/s a turn per 1,000 jobs was 50 a second
RING_MIN_TURN_S = 1.0
RING_CHECK_EVERY = 256  # jobs claimed or enqueued by this store between two steps
RING_CHECK_PAUSE_S = 0.25  # ... and seconds between two steps it starts so
MOVE_LIMIT = 5_000  # straggler rows moved forward by one step
PAUSE_S = 1.0  # first pause after a truncation's lock timed out; doubles
PAUSE_MAX_S = 60.0


class RingStep(NamedTuple):
    """What one maintenance step did."""

    busy: bool  # another process held the ring's row: nothing done
    slot: int  # the current partition after the step
    moved: int  # straggler rows moved forward
    truncated: tuple[int, ...]  # partitions truncated
    skipped: tuple[int, ...]  # partitions whose lock was not granted in time


class PostgresRing(PostgresConnections):
    """The ring's maintenance step and its triggers."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._ring_ops = 0
        self._ring_kicked = 0.0
        self._ring_task: asyncio.Task[None] | None = None
        self._ring_off = False
        self._ring_pause: dict[int, tuple[float, float]] = {}  # part -> (until, pause)
        self.ring_min_turn_s = RING_MIN_TURN_S  # (tests turn it faster)

    def _ring_q(self, name: str, part: int) -> bytes:
        return self.q[name].replace(b"{part}", b"%d" % part)

    def _ring_tick(self, jobs: int) -> None:
        """Count ``jobs`` claimed or enqueued; start a step in the background when due
        (and the last one started :data:`RING_CHECK_PAUSE_S` ago: the ring turns at
        most once a second, so stepping more often finds nothing to do)."""
        self._ring_ops += jobs
        if self._ring_ops >= RING_CHECK_EVERY:
            now = time.monotonic()
            if now - self._ring_kicked >= RING_CHECK_PAUSE_S:
                self._ring_ops = 0
                self._ring_kicked = now
                self._ring_kick()

    def _ring_kick(self) -> None:
        """A step in the background, unless one is running or the ring is off here."""
        task = self._ring_task
        if self._ring_off or self._closed or (task is not None and not task.done()):
            return
        self._ring_task = asyncio.get_running_loop().create_task(self._ring_background())

    async def _ring_background(self) -> None:
        try:
            await self.ring_step()
        except StoreClosedError:
            pass
        except psycopg.errors.InsufficientPrivilege as e:
            self._ring_off = True
            log.warning(
                "alkstore: the ring's maintenance is off for this store: %s%s", e, privilege_hint(e)
            )
        except (psycopg.Error, OSError) as e:
            log.warning("alkstore: the ring's maintenance step failed: %s", e)

    async def close(self) -> None:
        task = self._ring_task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        await super().close()

    async def ring_step(self) -> RingStep:
        """One maintenance step (the module's docstring); driver errors propagate."""
        pool = self.check_open()
        moved = 0
        async with pool.connection() as conn:
            try:
                async with conn.transaction():
                    cur = await conn.execute(self.q["ring_state"])
                    row = await cur.fetchone()
                    if row is None:
                        return RingStep(True, -1, 0, (), ())
                    slot, taken, age = int(row[0]), int(row[1]), float(row[2])
                    sizes = [int(s) for s in row[3]]
                    nxt = (slot + 1) % RING_SIZE
                    full = taken >= RING_CAP and age >= self.ring_min_turn_s
                    if full:
                        params = self.timed({"slot": slot, "limit": MOVE_LIMIT})
                        cur = await conn.execute(self._ring_q("ring_move", nxt), params)
                        moved = max(cur.rowcount, 0)
            except psycopg.errors.InsufficientPrivilege as e:  # no UPDATE on alk_ring
                self._ring_off = True  # a producer's role: not one of the maintainers
                log.debug("alkstore: the ring's maintenance is not this role's: %s", e)
                return RingStep(True, -1, 0, (), ())
            truncated: list[int] = []
            skipped: list[int] = []
            now = asyncio.get_running_loop().time()
            for part in range(RING_SIZE):
                if part == slot or sizes[part] == 0:
                    continue
                until, pause = self._ring_pause.get(part, (0.0, 0.0))
                if now < until:
                    skipped.append(part)
                    continue
                done = await self._truncate(conn, part)
                if done is None:  # the lock was not granted in time
                    pause = min(max(pause * 2, PAUSE_S), PAUSE_MAX_S)
                    self._ring_pause[part] = (now + pause, pause)
                    skipped.append(part)
                    continue
                self._ring_pause.pop(part, None)
                if done:
                    truncated.append(part)
                    sizes[part] = 0
            if full and sizes[nxt] == 0 and not await self._has_rows(conn, nxt):
                async with conn.transaction():
                    cur = await conn.execute(self.q["ring_state"])
                    row = await cur.fetchone()
                    if row is not None and int(row[0]) == slot:
                        await conn.execute(self.q["ring_turn"], {"slot": nxt})
                        slot = nxt
        return RingStep(False, slot, moved, tuple(truncated), tuple(skipped))

    async def _has_rows(self, conn: Any, part: int) -> bool:
        cur = await conn.execute(self._ring_q("ring_has_rows", part))
        row = await cur.fetchone()
        return bool(row is not None and row[0])

    async def _truncate(self, conn: Any, part: int) -> bool | None:
        """Truncate ``part`` if it holds no row: whether it did; None if its lock was
        not granted within the timeout."""
        if await self._has_rows(conn, part):  # unlocked first: most often the answer
            return False
        try:
            async with conn.transaction():
                await conn.execute(self.q["ring_lock_timeout"])
                await conn.execute(self._ring_q("ring_lock", part))
                if await self._has_rows(conn, part):
                    return False
                await conn.execute(self._ring_q("ring_truncate", part))
        except psycopg.errors.LockNotAvailable:
            return None
        return True
