"""Writes to a database's files, heard from the kernel instead of polled (Linux inotify).

Another process's commit to a WAL-mode database appends its frames to the
``-wal`` file; a rollback-journal database writes the main file. Watching the
directory for ``IN_MODIFY`` of those names tells an idle listener that a commit
is under way, so it sleeps without polling between commits. The event comes
when the frames are written, before the commit is synced and visible: the
listener polls ``PRAGMA data_version`` closely for a short while after each
event (``Listener``), never between them.

``FileWatch.open`` returns ``None`` where inotify is not available (another
OS, no libc symbol, the watch limit reached): the listener then polls.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import os
import select
import struct
import sys
import threading

__all__ = ["FileWatch"]

_IN_MODIFY = 0x00000002
_IN_Q_OVERFLOW = 0x00004000
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = 0o2000000  # O_CLOEXEC on Linux
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of name


class FileWatch:
    """An inotify descriptor watching one directory for writes to some of its files."""

    def __init__(self, fd: int, names: frozenset[bytes]) -> None:
        self.fd = fd
        self._names = names
        # a pipe that poke() writes to: wakes a wait() from another thread
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._poked = False
        self._closed = False
        self._lock = threading.Lock()  # poke() against close(): never a reused fd
        self._poller = select.poll()
        self._poller.register(fd, select.POLLIN)
        self._poller.register(self._wake_r, select.POLLIN)

    @classmethod
    def open(cls, path: str) -> FileWatch | None:
        """A watch of writes to ``path`` and ``path-wal``; ``None`` if unavailable."""
        if not sys.platform.startswith("linux"):
            return None
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
            init, add = libc.inotify_init1, libc.inotify_add_watch
        except (OSError, AttributeError):
            return None
        fd = init(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            return None
        real = os.path.realpath(path)
        directory, base = os.path.split(real)
        if add(fd, os.fsencode(directory or "."), _IN_MODIFY) < 0:
            os.close(fd)
            return None
        name = os.fsencode(base)
        return cls(fd, frozenset({name, name + b"-wal"}))

    def poke(self) -> None:
        """Wake a ``wait()`` now (from any thread); cheap when one is already pending."""
        if self._poked:
            return
        with self._lock:
            if self._closed:
                return
            self._poked = True
            with contextlib.suppress(OSError):  # the pipe is full: a wake is pending anyway
                os.write(self._wake_w, b"\0")

    def wait(self, timeout_s: float | None) -> bool:
        """Wait up to ``timeout_s`` (``None``: no limit) for events; whether one was a
        write to a watched file, a ``poke()``, or events were lost (the kernel's
        queue overflowed)."""
        ms = None if timeout_s is None else max(0, int(timeout_s * 1000))
        if not self._poller.poll(ms):
            return False
        return self.drain()

    def drain(self) -> bool:
        """Read every queued event and poke without waiting; whether one concerns us."""
        hit = False
        if self._poked:
            self._poked = False
            hit = True
            with contextlib.suppress(OSError):  # BlockingIOError: the pipe is empty
                while os.read(self._wake_r, 4096):
                    pass
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return hit
            except OSError as e:
                if e.errno == errno.EINTR:
                    continue
                return True  # unreadable: let the caller look
            offset = 0
            while offset + _EVENT.size <= len(data):
                _wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
                offset += _EVENT.size
                name = data[offset : offset + length].rstrip(b"\0")
                offset += length
                if mask & _IN_Q_OVERFLOW or name in self._names:
                    hit = True

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for fd in (self.fd, self._wake_r, self._wake_w):
                os.close(fd)
