"""Cross-process LISTEN/NOTIFY emulation for SQLite.

A notification is a row of ``alk_notes`` written inside the notifying
transaction, so it becomes visible exactly at commit and never after a
rollback. Each store that listens runs one thread with its own read
connection, which waits for a change and then reads ``id > cursor``.

Why the cursor is safe: SQLite has one writer at a time. A note's id is
assigned inside a ``BEGIN IMMEDIATE`` write transaction that holds the
database's write lock until it commits, so notes commit in id order and a
reader that has seen id N has already been able to see every id below N; no
smaller id can appear later. ``AUTOINCREMENT`` keeps ids growing after old
notes are trimmed.

How a change is noticed cheaply: ``PRAGMA data_version`` returns a counter
that changes whenever another connection commits to the file; reading it costs
a few microseconds and no I/O (it reads the WAL index in shared memory).

When does the thread look? On Linux it asks the kernel (``filewatch``): it
sleeps until some process writes the database's ``-wal`` (or main) file, so an
idle listener costs nothing between commits. The write comes just before the
commit is synced and visible, so after each one the thread reads
``data_version`` every ``FAST_POLL_S`` for ``FAST_WINDOW_S``, and once every
``IDLE_POLL_S`` in any case (a re-look that needs no event). A writer whose
commit wrote notes signals it once visible (``filewatch.signal_commit``), which
cuts that close polling's wait short: the thread looks as the commit lands. Elsewhere (no
inotify) it polls ``data_version`` every ``poll_s`` (2 ms by default).
Writers in the same process also poke the thread right after they commit,
which skips the wait either way.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Sequence

from alkstore.engines.sqlite.filewatch import FileWatch, signal_commit

log = logging.getLogger("alkstore.sqlite")

__all__ = ["Listener", "listen_locally", "poke_local"]

Sink = Callable[[Sequence[tuple[str, str]]], None]

FAST_POLL_S = 0.0005  # after a write to the files, look this often...
FAST_WINDOW_S = 0.05  # ...until this long after the last one
IDLE_POLL_S = 1.0  # with a watch: look at least this often, heard or not
SLOW_POLL_S = 0.005  # past the window, a write heard and no commit seen since: this often
UNSEEN_MAX_S = 5.0  # ...for at most this long

# Listeners of this process per database file: a local commit pokes them at once.
_local_listeners: dict[str, weakref.WeakSet[Listener]] = {}
_local_lock = threading.Lock()


def listen_locally(path: str, listener: Listener) -> None:
    """Have commits of this process to ``path`` poke ``listener`` (held weakly)."""
    with _local_lock:
        _local_listeners.setdefault(path, weakref.WeakSet()).add(listener)


def poke_local(path: str) -> None:
    """After a commit to ``path`` that wrote notes: this process's listeners look now,
    and other processes' hear of it from the kernel (``filewatch.signal_commit``)."""
    with _local_lock:
        listeners = list(_local_listeners.get(path, ()))
    for listener in listeners:
        listener.poke()
    signal_commit(path)


class Listener:
    """One thread per listening store, delivering notes of its channels to a sink."""

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        queries: dict[str, str],
        loop: asyncio.AbstractEventLoop,
        sink: Sink,
        cursor: int,
        poll_s: float,
        watch_path: str | None = None,
    ) -> None:
        """``watch_path``: the database file, to be woken by its writes (Linux);
        ``None``: poll every ``poll_s``."""
        self._connect = connect
        self._watch_path = watch_path
        self._watch: FileWatch | None = None
        self._unseen_until = 0.0  # a write was heard and no commit seen since, until then
        self._q = queries
        self._loop = loop
        self._sink = sink
        self._cursor = cursor
        self._poll_s = poll_s
        self.channels: frozenset[str] = frozenset()
        # channel -> the last note id committed before it was subscribed: the
        # thread's cursor may lag behind a later subscription's start, and a note
        # at or below a channel's start is not that subscription's to receive.
        # Both are replaced whole (never mutated), so the thread reads a
        # consistent pair.
        self._starts: dict[str, int] = {}
        self._event = threading.Event()
        self._stop = False
        self._thread = threading.Thread(
            target=self._run, name="alkstore-sqlite-listen", daemon=True
        )

    def start(self) -> None:
        if self._watch_path is not None:
            self._watch = FileWatch.open(self._watch_path)
        self._thread.start()

    @property
    def watching(self) -> bool:
        """Whether the kernel tells this listener of writes (else it polls)."""
        return self._watch is not None

    def add_channels(self, channels: Sequence[str], start: int) -> None:
        """Deliver notes of ``channels`` with ids above ``start`` (the newest note id
        when the subscription was made); channels already listened keep their start."""
        new = [ch for ch in channels if ch not in self.channels]
        if not new:
            return
        self._starts = {**self._starts, **dict.fromkeys(new, start)}  # before the channels
        self.channels = self.channels | frozenset(new)

    def remove_channels(self, channels: Sequence[str]) -> None:
        """Stop delivering notes of ``channels``."""
        self.channels = self.channels - frozenset(channels)

    def poke(self) -> None:
        """A writer in this process committed: look now."""
        self._event.set()
        watch = self._watch
        if watch is not None:
            watch.poke()

    def stop(self) -> None:
        self._stop = True
        self.poke()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)

    def _deliver(self, notes: Sequence[tuple[str, str]]) -> None:
        try:
            self._loop.call_soon_threadsafe(self._sink, notes)
        except RuntimeError:  # the loop is closed: the store is going away
            self._stop = True

    def _wait(self, fast_until: float) -> float:
        """Sleep until it is time to look; the new end of the close-polling window."""
        watch = self._watch
        if watch is None:
            self._event.wait(self._poll_s)
            self._event.clear()
            return 0.0
        now = time.monotonic()
        if now < fast_until:  # a commit's signal (or a poke) ends the wait at once
            watch.wait_commit(FAST_POLL_S)
            heard = watch.drain()
        elif now < self._unseen_until:
            # a write was heard but no commit seen since: its sync is slow (e.g.
            # behind a checkpoint); keep looking, less closely
            watch.wait_commit(SLOW_POLL_S)
            heard = watch.drain()
        else:
            heard = watch.wait(IDLE_POLL_S)
        self._event.clear()
        if not heard:
            return fast_until
        self._unseen_until = time.monotonic() + UNSEEN_MAX_S
        return time.monotonic() + FAST_WINDOW_S

    def _run(self) -> None:
        try:
            self._listen()
        finally:
            watch, self._watch = self._watch, None
            if watch is not None:
                watch.close()

    def _listen(self) -> None:
        conn: sqlite3.Connection | None = None
        version = -1
        fast_until = 0.0
        while not self._stop:
            try:
                if conn is None:
                    conn = self._connect()
                    version = -1
                fast_until = self._wait(fast_until)
                if self._stop:
                    break
                now_version = conn.execute("PRAGMA data_version").fetchone()[0]
                if now_version == version:
                    continue
                version = now_version
                self._unseen_until = 0.0
                self._read(conn)
            except sqlite3.Error as e:  # keep listening; a gap makes consumers re-poll
                log.warning("alkstore: SQLite listener error, retrying: %s", e)
                if conn is not None:
                    conn.close()
                    conn = None
                self._deliver(())
                self._event.wait(0.05)
        if conn is not None:
            conn.close()

    def _read(self, conn: sqlite3.Connection) -> None:
        while True:
            rows = conn.execute(self._q["notes_after"], {"cursor": self._cursor}).fetchall()
            if not rows:
                return
            gap = rows[0][0] != self._cursor + 1
            self._cursor = rows[-1][0]
            channels = self.channels
            starts = self._starts
            notes = [
                (ch, payload)
                for note_id, ch, payload in rows
                if ch in channels and note_id > starts.get(ch, 0)
            ]
            if gap:
                self._deliver(())
            if notes:
                self._deliver(notes)
            if len(rows) < 10000:
                return
