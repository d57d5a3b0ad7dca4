"""Copy a whole store to another one, on either engine (``alkstore copy``).

Every row of ``core.tables.COPIED_TABLES`` is copied with its id, stamps,
attempts and errors; a ``processing`` job arrives ``pending`` again (its
claim belonged to a worker of the source), attempts kept. The destination's
job id counter is moved past every id the source handed out. At the end each
table is read again on both sides and compared by count and checksum.

Safe to rerun: a destination that holds only rows of this source (an
interrupted copy) is completed, those rows skipped; a destination holding any
other row is refused before anything is written.

>>> async with await alkstore.connect(old) as src, await alkstore.connect(new) as dst:
...     report = await copy_store(src, dst)
>>> report.ok
True
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from alkstore.core.options import describe
from alkstore.core.tables import COPIED_TABLES, Digest, Table, canonical
from alkstore.engine_door import engine_of
from alkstore.errors import CopyRefusedError, InvalidArgumentError

if TYPE_CHECKING:
    from alkstore.engine import Engine
    from alkstore.store import Store

__all__ = ["PAGE_ROWS", "CopyReport", "Progress", "TableCheck", "copy_store", "source_counts"]

PAGE_ROWS = 500  # rows per read and per write transaction

# Called after each page with (table, rows of it handled so far).
Progress = Callable[[str, int], None]

_JOB_ID_COLUMNS = {"alk_jobs": "id", "alk_dead": "id", "alk_results": "id"}
_JOB_REF_COLUMNS = {"alk_dedupe": "job_id", "alk_schedules": "last_job"}


@dataclass(frozen=True)
class TableCheck:
    """One table after the copy: rows and checksum on each side, rows written now."""

    table: str
    source_rows: int
    dest_rows: int
    source_checksum: str
    dest_checksum: str
    copied: int
    skipped: int  # already in the destination (a rerun)

    @property
    def ok(self) -> bool:
        return (self.source_rows, self.source_checksum) == (self.dest_rows, self.dest_checksum)


@dataclass(frozen=True)
class CopyReport:
    """What ``copy_store`` did: a check per table and the destination's next job id floor."""

    tables: tuple[TableCheck, ...]
    last_id: int  # the destination hands out ids above this one

    @property
    def ok(self) -> bool:
        return all(t.ok for t in self.tables)


def _moved(spec: Table, row: tuple[Any, ...]) -> tuple[Any, ...]:
    """The row as the destination gets it: a claimed job is pending again."""
    if spec.name != "alk_jobs":
        return row
    names = spec.names
    state = names.index("state")
    if row[state] != "processing":
        return row
    out = list(row)
    out[state] = "pending"
    out[names.index("worker_id")] = None
    out[names.index("claim_expires_at")] = None
    return tuple(out)


async def _rows(
    engine: Engine, spec: Table, page_rows: int
) -> AsyncIterator[list[tuple[Any, ...]]]:
    """Pages of the table in key order, as the destination gets them."""
    after = spec.start
    while True:
        page = await engine.copy_read(spec.name, after, page_rows)
        if page:
            yield [_moved(spec, row) for row in page]
        if len(page) < page_rows:
            return
        after = spec.key_of(page[-1])


async def source_counts(store: Store) -> dict[str, int]:
    """Rows per copied table of ``store`` (the progress bar's totals)."""
    return await engine_of(store).copy_counts()


async def _refuse_workers(store: Store, where: str) -> None:
    workers = await engine_of(store).list_workers()
    if workers:
        ids = ", ".join(str(w[0]) for w in workers[:3]) + (", …" if len(workers) > 3 else "")
        raise CopyRefusedError(
            f"{len(workers)} worker(s) registered on the {where} store ({ids}): stop them "
            "first (a crashed worker stays listed until purged), or pass --force (force=True)"
        )


async def _already_copied(
    src: Engine, dst: Engine, spec: Table, page_rows: int
) -> set[tuple[Any, ...]]:
    """Keys of the destination's rows, each of which must be the source's own row."""
    present: set[tuple[Any, ...]] = set()
    source = _rows(src, spec, page_rows)
    pending: list[tuple[Any, ...]] = []
    async for page in _rows(dst, spec, page_rows):
        for raw in page:
            row = canonical(spec, raw)
            key = spec.key_of(row)
            while True:
                if not pending:
                    nxt = await anext(source, None)
                    if nxt is None:
                        break
                    pending = [canonical(spec, r) for r in reversed(nxt)]
                if spec.key_of(pending[-1]) >= key:
                    break
                pending.pop()
            mine = pending[-1] if pending else None
            if mine is None or spec.key_of(mine) != key:
                raise CopyRefusedError(
                    f"the destination is not empty: {spec.name} holds {describe(key)}, which "
                    "is not in the source; copy into an empty store"
                )
            if mine != row:
                raise CopyRefusedError(
                    f"the destination is not empty: its {spec.name} row {describe(key)} "
                    "differs from the source's (not an interrupted copy of this store)"
                )
            present.add(key)
    return present


async def _digest(engine: Engine, spec: Table, page_rows: int) -> Digest:
    digest = Digest()
    async for page in _rows(engine, spec, page_rows):
        for row in page:
            digest.add(canonical(spec, row))
    return digest


def _highest_id(spec: Table, rows: list[tuple[Any, ...]]) -> int:
    column = _JOB_ID_COLUMNS.get(spec.name) or _JOB_REF_COLUMNS.get(spec.name)
    if column is None:
        return 0
    at = spec.names.index(column)
    return max((row[at] for row in rows if row[at] is not None), default=0)


async def copy_store(
    source: Store,
    dest: Store,
    *,
    force: bool = False,
    progress: Progress | None = None,
    page_rows: int = PAGE_ROWS,
) -> CopyReport:
    """Copy every job, dead letter, result, dedupe window, schedule mark, queue
    setting and outcome count of ``source`` into ``dest``, then verify them.

    Refuses (``CopyRefusedError``) while workers are registered on either store
    unless ``force``, and when ``dest`` holds rows that are not ``source``'s.
    Each page is one write transaction; ``progress`` runs after each.
    """
    if type(force) is not bool:
        raise InvalidArgumentError(f"force must be a bool, got {describe(force)}")
    if type(page_rows) is not int or not 1 <= page_rows <= 100_000:
        raise InvalidArgumentError(
            f"page_rows must be an int in 1..100000, got {describe(page_rows)}"
        )
    src, dst = engine_of(source), engine_of(dest)
    if src is dst:
        raise InvalidArgumentError("source and destination are the same store")
    if not force:
        await _refuse_workers(source, "source")
        await _refuse_workers(dest, "destination")
    present: dict[str, set[tuple[Any, ...]]] = {}
    if any((await dst.copy_counts()).values()):
        for spec in COPIED_TABLES:
            present[spec.name] = await _already_copied(src, dst, spec, page_rows)
    last_id = await src.last_job_id()
    written: dict[str, int] = {}
    for spec in COPIED_TABLES:
        done = written[spec.name] = 0
        skip = present.get(spec.name, set())
        async for page in _rows(src, spec, page_rows):
            last_id = max(last_id, _highest_id(spec, page))
            fresh = [row for row in page if spec.key_of(canonical(spec, row)) not in skip]
            if fresh:
                await dst.copy_write(spec.name, fresh)
                written[spec.name] += len(fresh)
            done += len(page)
            if progress is not None:
                progress(spec.name, done)
    if last_id > await dst.last_job_id():
        await dst.advance_job_ids(last_id)
    checks = []
    for spec in COPIED_TABLES:
        mine, theirs = await _digest(src, spec, page_rows), await _digest(dst, spec, page_rows)
        checks.append(
            TableCheck(
                spec.name,
                mine.rows,
                theirs.rows,
                mine.hexdigest(),
                theirs.hexdigest(),
                written[spec.name],
                len(present.get(spec.name, ())),
            )
        )
    return CopyReport(tuple(checks), last_id)
