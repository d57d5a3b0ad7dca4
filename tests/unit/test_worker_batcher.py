"""group_ack.Batcher, the one batching primitive of acks (no database)."""

from __future__ import annotations

import asyncio

import pytest

from alkstore.group_ack import Batcher


async def test_a_lone_item_goes_out_at_once_and_a_burst_shares_the_next_batch() -> None:
    sent: list[list[int]] = []
    gate = asyncio.Event()

    async def send(items: list[int]) -> None:
        sent.append(items)
        if len(sent) == 1:
            await gate.wait()

    batcher: Batcher[int] = Batcher(send)
    batcher.add(1)
    await asyncio.sleep(0)
    assert sent == [[1]]  # no added delay for a lone item
    for i in (2, 3, 4):  # arrive while the first batch is in flight
        batcher.add(i)
    assert len(batcher) == 3 and batcher.flushing is not None
    gate.set()
    await batcher.flushing
    assert sent == [[1], [2, 3, 4]]
    assert batcher.flushing is None and len(batcher) == 0


async def test_items_left_when_the_send_is_cancelled_are_abandoned() -> None:
    abandoned: list[list[str]] = []
    started = asyncio.Event()

    async def send(items: list[str]) -> None:
        started.set()
        await asyncio.Event().wait()

    batcher: Batcher[str] = Batcher(send, abandoned.append)
    batcher.add("a")
    await started.wait()
    batcher.add("b")
    batcher.add("c")
    flushing = batcher.flushing
    assert flushing is not None
    flushing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await flushing
    assert abandoned == [["b", "c"]] and batcher.flushing is None and len(batcher) == 0


async def test_without_abandon_the_items_wait_for_the_next_add() -> None:
    sent: list[list[int]] = []
    started = asyncio.Event()

    async def send(items: list[int]) -> None:
        sent.append(items)
        if len(sent) == 1:
            started.set()
            await asyncio.Event().wait()

    batcher: Batcher[int] = Batcher(send)
    batcher.add(1)
    await started.wait()
    batcher.add(2)
    assert batcher.flushing is not None
    batcher.flushing.cancel()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert batcher.flushing is None and len(batcher) == 1
    batcher.add(3)
    assert batcher.flushing is not None
    await batcher.flushing
    assert sent == [[1], [2, 3]]
