"""Writes to a database's files, heard from the kernel instead of polled (Linux inotify).

Another process's commit to a WAL-mode database appends its frames to the
``-wal`` file; a rollback-journal database writes the main file. Watching the
directory for ``IN_MODIFY`` of those names tells an idle listener that a commit
is under way, so it sleeps without polling between commits. The event comes
when the frames are written, before the commit is synced and visible: the
listener polls ``PRAGMA data_version`` closely for a short while after each
event (``Listener``), never between them.

A commit that wrote wake notes also says so once it is visible:
:func:`signal_commit` touches the ``-wal`` file's times (``IN_ATTRIB``, heard
on a second descriptor), which ends the listener's close polling at once
instead of at its next look (``wait_commit``).

``FileWatch.open`` returns ``None`` where inotify is not available (another
OS, no libc symbol, the watch limit reached): the listener then polls.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import math
import os
import select
import struct
import sys
import threading
from typing import Any

__all__ = ["FileWatch", "signal_commit"]

_LINUX = sys.platform.startswith("linux")
_FD_SETSIZE = 1024  # select() takes descriptors below this only


def signal_commit(path: str) -> None:
    """After a commit to ``path`` that wrote wake notes: other processes' watches hear
    it now (``wait_commit``). Best effort: a listener still polls without it."""
    if _LINUX:
        with contextlib.suppress(OSError):
            os.utime(path + "-wal")


_IN_MODIFY = 0x00000002
_IN_ATTRIB = 0x00000004
_IN_Q_OVERFLOW = 0x00004000
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = 0o2000000  # O_CLOEXEC on Linux
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of name


def _inotify() -> tuple[Any, Any]:
    """libc's ``inotify_init1`` and ``inotify_add_watch``: from the symbols the process
    already has (``CDLL(None)``: the libc the interpreter runs on), else from the libc
    ``find_library`` names, which imports ``ctypes.util`` and runs ``ldconfig -p``
    (~5 ms of a SQLite worker's start)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.inotify_init1, libc.inotify_add_watch
    except (OSError, AttributeError):
        from ctypes.util import find_library

        libc = ctypes.CDLL(find_library("c") or None, use_errno=True)
        return libc.inotify_init1, libc.inotify_add_watch


class FileWatch:
    """An inotify descriptor watching one directory for writes to some of its files."""

    def __init__(self, fd: int, names: frozenset[bytes], commit_fd: int | None = None) -> None:
        self.fd = fd
        self.commit_fd = commit_fd  # IN_ATTRIB of the names: a commit's signal_commit()
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
        self._commit_fds = [self._wake_r]  # what ends a wait_commit()
        if commit_fd is not None:
            self._poller.register(commit_fd, select.POLLIN)
            self._commit_fds.append(commit_fd)
        self._commit_poller = select.poll()
        for each in self._commit_fds:
            self._commit_poller.register(each, select.POLLIN)

    @classmethod
    def open(cls, path: str) -> FileWatch | None:
        """A watch of writes to ``path`` and ``path-wal``; ``None`` if unavailable."""
        if not sys.platform.startswith("linux"):
            return None
        try:
            init, add = _inotify()
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
        commit_fd: int | None = init(_IN_NONBLOCK | _IN_CLOEXEC)
        if commit_fd is not None and commit_fd >= 0:
            if add(commit_fd, os.fsencode(directory or "."), _IN_ATTRIB) < 0:
                os.close(commit_fd)
                commit_fd = None
        else:  # no commit signals: the close polling alone
            commit_fd = None
        return cls(fd, frozenset({name, name + b"-wal"}), commit_fd)

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

    def wait_commit(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` (sub-millisecond) for a commit's signal or a
        ``poke()``; the events stay queued for :meth:`drain`."""
        fds = self._commit_fds
        if max(fds) < _FD_SETSIZE:
            select.select(fds, [], [], timeout_s)
        else:  # poll() waits whole milliseconds
            self._commit_poller.poll(max(1, math.ceil(timeout_s * 1000)))

    def drain(self) -> bool:
        """Read every queued event and poke without waiting; whether one concerns us."""
        hit = False
        if self._poked:
            self._poked = False
            hit = True
            with contextlib.suppress(OSError):  # BlockingIOError: the pipe is empty
                while os.read(self._wake_r, 4096):
                    pass
        if self.commit_fd is not None and self._read_events(self.commit_fd):
            hit = True
        return self._read_events(self.fd) or hit

    def _read_events(self, fd: int) -> bool:
        """Read ``fd``'s queued events; whether one concerns us."""
        hit = False
        while True:
            try:
                data = os.read(fd, 65536)
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
            for fd in (self.fd, self.commit_fd, self._wake_r, self._wake_w):
                if fd is not None:
                    os.close(fd)
