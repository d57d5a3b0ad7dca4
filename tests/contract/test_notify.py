"""store.notify / store.listen across stores; names and the payload limit."""

from __future__ import annotations

import asyncio

import pytest

import alkstore
from alkstore import InvalidArgumentError, InvalidNameError, Notification, PayloadError

WAIT = 20.0
QUIET = 0.4


async def next_note(sub: alkstore.Subscription) -> Notification:
    return await asyncio.wait_for(sub.__anext__(), WAIT)


async def test_notify_reaches_a_listener_on_another_store(open_store) -> None:  # type: ignore[no-untyped-def]
    sender, receiver = await open_store(), await open_store()
    async with receiver.listen("alpha", "beta") as sub:
        await sender.notify("alpha", "hello")
        await sender.notify("gamma", "not subscribed")
        await sender.notify("beta")
        await sender.notify("alpha", "é ✓ 'quoted'")
        assert await next_note(sub) == Notification("alpha", "hello")
        assert await next_note(sub) == Notification("beta", "")
        assert await next_note(sub) == Notification("alpha", "é ✓ 'quoted'")
        await sender.notify("gamma", "not subscribed either")
        await sender.notify("alpha", "last")  # committed after every gamma note
        assert await next_note(sub) == Notification("alpha", "last")  # so none came


async def test_notify_reaches_a_listener_on_the_same_store(store: alkstore.Store) -> None:
    async with store.listen("self") as sub:
        await store.notify("self", "me")
        assert await next_note(sub) == Notification("self", "me")


async def test_every_subscription_gets_every_note(open_store) -> None:  # type: ignore[no-untyped-def]
    sender, receiver = await open_store(), await open_store()
    async with receiver.listen("ch") as a, receiver.listen("ch") as b:
        await sender.notify("ch", "x")
        assert (await next_note(a)).payload == "x"
        assert (await next_note(b)).payload == "x"
    async with receiver.listen("ch") as c:  # re-listening after the others left
        await sender.notify("ch", "y")
        assert (await next_note(c)).payload == "y"


async def test_notes_sent_before_listening_are_not_delivered(open_store) -> None:  # type: ignore[no-untyped-def]
    sender, receiver = await open_store(), await open_store()
    await sender.notify("late", "before")
    async with receiver.listen("late") as sub:
        await sender.notify("late", "after")
        assert (await next_note(sub)).payload == "after"


async def test_enqueue_wakes_the_queues_channel_with_an_empty_payload(
    open_store,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    producer, receiver = await open_store(), await open_store()
    async with receiver.listen(qname) as sub:
        await producer.queue(qname).enqueue(b"job payload is not the note")
        assert await next_note(sub) == Notification(qname, "")
        await producer.queue(qname).enqueue_many([b"1", b"2", b"3"])
        assert await next_note(sub) == Notification(qname, "")  # one wake for the batch
        # Real time: a batch's wake is sent after commit by a background waker (PostgreSQL,
        # coalesced), so no later note of ours is ordered after a stray second wake.
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(sub.__anext__(), QUIET)


async def test_notify_payload_limit_is_under_8000_bytes(open_store) -> None:  # type: ignore[no-untyped-def]
    sender, receiver = await open_store(), await open_store()
    async with receiver.listen("big") as sub:
        await sender.notify("big", "x" * 7999)
        assert (await next_note(sub)).payload == "x" * 7999
        with pytest.raises(PayloadError):
            await sender.notify("big", "x" * 8000)
        with pytest.raises(PayloadError):
            await sender.notify("big", "é" * 4000)  # 8000 UTF-8 bytes
        async with sender.transaction() as tx:
            with pytest.raises(PayloadError):
                await tx.notify("big", "y" * 8000)
            await tx.notify("big", "small")
        assert (await next_note(sub)).payload == "small"  # the oversized one never went


@pytest.mark.parametrize("payload", [b"bytes", 5, None, "nul\x00", "\ud800"])
async def test_bad_notify_payloads_are_rejected(store: alkstore.Store, payload: object) -> None:
    with pytest.raises(PayloadError):
        await store.notify("ch", payload)  # type: ignore[arg-type]


@pytest.mark.parametrize("channel", ["", "_reserved", "a b", "x" * 64, "é", None])
async def test_bad_channels_are_rejected(store: alkstore.Store, channel: object) -> None:
    with pytest.raises(InvalidNameError):
        await store.notify(channel, "")  # type: ignore[arg-type]
    with pytest.raises(InvalidNameError):
        store.listen("fine", channel)  # type: ignore[arg-type]
    async with store.transaction() as tx:
        with pytest.raises(InvalidNameError):
            await tx.notify(channel, "")  # type: ignore[arg-type]


async def test_listen_needs_a_channel(store: alkstore.Store) -> None:
    with pytest.raises(InvalidArgumentError):
        store.listen()


async def test_a_subscription_ends_when_its_store_closes(open_store) -> None:  # type: ignore[no-untyped-def]
    store = await open_store()
    async with store.listen("ch") as sub:
        got: list[Notification] = []
        iterating = asyncio.Event()

        async def drain() -> list[Notification]:
            async for note in sub:
                got.append(note)
                iterating.set()  # the loop goes straight back to waiting in __anext__
            return got

        task = asyncio.create_task(drain())
        await store.notify("ch", "first")
        await asyncio.wait_for(iterating.wait(), WAIT)  # the drain now waits for a note
        await store.close()
        assert await asyncio.wait_for(task, WAIT) == [Notification("ch", "first")]
