"""The SQLite listener is woken by the kernel (inotify) on another process's commit,
with no polling between commits, and polls where the kernel cannot tell it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

import alkstore
from alkstore.engines.sqlite import filewatch, listener
from alkstore.engines.sqlite.filewatch import FileWatch

WAIT = 60.0
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")


def _notify_from_another_process(url: str, channel: str, payload: str) -> None:
    code = (
        "import sys; from alkstore import sync\n"
        "with sync.connect(sys.argv[1]) as s: s.notify(sys.argv[2], sys.argv[3])\n"
    )
    subprocess.run([sys.executable, "-c", code, url, channel, payload], check=True, timeout=WAIT)


async def _first_note(store: alkstore.Store, channel: str, send: object) -> str:
    async with store.listen(channel) as sub:
        await asyncio.to_thread(send)  # type: ignore[arg-type]
        async with asyncio.timeout(WAIT):
            async for note in sub:
                return note.payload
    raise AssertionError("the subscription ended")


@linux_only
def test_a_watch_hears_writes_to_the_database_and_its_wal_only(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    watch = FileWatch.open(str(db))
    assert watch is not None
    try:
        (tmp_path / "other.txt").write_text("x")  # a neighbour: not ours
        assert watch.wait(0.2) is False
        with open(f"{db}-wal", "ab") as f:
            f.write(b"frames")
        assert watch.wait(WAIT) is True
        assert watch.drain() is False  # consumed
        watch.poke()  # another thread's wake
        assert watch.wait(WAIT) is True
    finally:
        watch.close()
    watch.close()  # idempotent
    watch.poke()  # after close: ignored, never writes to a reused descriptor


@linux_only
async def test_another_processs_commit_wakes_an_idle_listener_without_polling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Neither the idle re-look nor a poll could deliver the note within an hour:
    # only the kernel's event can.
    monkeypatch.setattr(listener, "IDLE_POLL_S", 3600.0)
    url = f"sqlite:///{tmp_path}/q.db"
    async with await alkstore.connect(url, wake_poll_ms=3_600_000) as store:
        payload = await _first_note(
            store, "ch", lambda: _notify_from_another_process(url, "ch", "from afar")
        )
        engine_listener = store._engine._listener  # type: ignore[attr-defined]
        assert engine_listener.watching
    assert payload == "from afar"


async def test_without_a_watch_the_listener_polls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(filewatch.FileWatch, "open", classmethod(lambda cls, path: None))
    url = f"sqlite:///{tmp_path}/q.db"
    async with await alkstore.connect(url, wake_poll_ms=5) as store:
        payload = await _first_note(
            store, "ch", lambda: _notify_from_another_process(url, "ch", "polled")
        )
        assert not store._engine._listener.watching  # type: ignore[attr-defined]
    assert payload == "polled"


@linux_only
def test_a_commit_signal_ends_a_wait_for_commits(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    (tmp_path / "q.db-wal").write_bytes(b"")
    watch = FileWatch.open(str(db))
    assert watch is not None and watch.commit_fd is not None
    try:
        watch.drain()
        with open(f"{db}-wal", "ab") as f:  # a write alone does not end it
            f.write(b"frames")
        watch.wait_commit(0.05)
        assert watch.drain() is True
        filewatch.signal_commit(str(tmp_path / "other.db"))  # a neighbour: not ours
        filewatch.signal_commit(str(db))
        watch.wait_commit(WAIT)
        assert watch.drain() is True
        assert watch.drain() is False
    finally:
        watch.close()


@linux_only
async def test_another_processs_commit_signal_ends_the_close_polling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # After the frames' write is heard, only the commit's signal can make the
    # listener look within an hour.
    for name in ("IDLE_POLL_S", "FAST_POLL_S", "SLOW_POLL_S"):
        monkeypatch.setattr(listener, name, 3600.0)
    url = f"sqlite:///{tmp_path}/q.db"
    async with await alkstore.connect(url, wake_poll_ms=3_600_000) as store:
        payload = await _first_note(
            store, "ch", lambda: _notify_from_another_process(url, "ch", "signalled")
        )
    assert payload == "signalled"


@linux_only
def test_a_watch_is_refused_cleanly_where_the_directory_is_missing(tmp_path: Path) -> None:
    assert FileWatch.open(str(tmp_path / "missing" / "q.db")) is None
    assert os.path.exists(tmp_path)
