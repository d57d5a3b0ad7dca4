"""``alkstore copy``: the progress bar and the verification table of a store copy."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from alkstore.copy import CopyReport, copy_store, source_counts
from alkstore.store import Store

__all__ = ["copy_with_progress", "report_table"]


async def copy_with_progress(
    source: Store, dest: Store, *, force: bool, console: Console
) -> CopyReport:
    """Run :func:`alkstore.copy.copy_store` with one progress bar per table."""
    totals = await source_counts(source)
    columns = (
        TextColumn("{task.description:<14}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as bar:
        tasks = {name: bar.add_task(name, total=n or 1) for name, n in totals.items()}
        for name, n in totals.items():
            if not n:
                bar.update(tasks[name], completed=1)

        def advanced(table: str, done: int) -> None:
            bar.update(tasks[table], completed=done)

        return await copy_store(source, dest, force=force, progress=advanced)


def report_table(report: CopyReport) -> Table:
    """Counts and checksums of each table on both sides."""
    out = Table(title="verification", title_justify="left")
    for column in ("table", "source rows", "dest rows", "copied", "skipped", "checksum", ""):
        out.add_column(column, justify="right" if "rows" in column else "left")
    for t in report.tables:
        same = t.source_checksum == t.dest_checksum
        checksum = t.source_checksum if same else f"{t.source_checksum} ≠ {t.dest_checksum}"
        out.add_row(
            t.table,
            str(t.source_rows),
            str(t.dest_rows),
            str(t.copied),
            str(t.skipped),
            checksum,
            "ok" if t.ok else "MISMATCH",
        )
    return out
