"""Deduplicated enqueue: the algorithm once, as steps every engine runs in its own SQL.

The database is the judge, never a check-then-insert: a unique partial index
over live rows ``(queue, dedupe_key)`` makes a second insert of a live key do
nothing (``ON CONFLICT DO NOTHING``), and a windowed key is a row of
``alk_dedupe`` taken by an upsert that only succeeds once its window is over.
What is left to decide here is the order of those statements and what to
answer for each item; an engine runs each step in one transaction with
:func:`keyed_enqueue` driving it (a generator: it yields ``(step, params)``
and is sent the step's rows), so the SQLite and PostgreSQL engines, the
store transaction and the outbox all share it.

Steps (``params`` always also carry the queue and stamps, from the engine):

- ``take_windows(keys, window_s)`` → rows ``(key,)`` of the windows taken now
- ``window_jobs(keys)`` → rows ``(key, job_id)`` of the windows that hold
- ``insert(payloads, keys)`` → rows ``(id, key)`` of the rows inserted
  (``key`` None for unkeyed items, whose ids ascend in item order)
- ``live_keys(keys)`` → rows ``(key, id)`` of live jobs holding these keys
- ``set_window_jobs(keys, ids)`` → nothing; points taken windows at their job
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import Any, NamedTuple

from alkstore.core.names import is_storable_text
from alkstore.errors import EngineError, InvalidArgumentError

__all__ = [
    "DEDUPE_KEY_MAX",
    "Enqueued",
    "Step",
    "check_dedupe_key",
    "keyed_enqueue",
    "run_flow",
    "run_flow_sync",
]

DEDUPE_KEY_MAX = 512  # characters; a key is an identifier, not a payload
_ROUNDS = 16  # a key whose holder vanishes between two statements is tried again

Step = tuple[str, dict[str, Any]]
KeyedFlow = Generator[Step, list[tuple[Any, ...]], list["Enqueued"]]


class Enqueued(NamedTuple):
    """What a deduplicated enqueue did: the job's id, and whether it already existed."""

    id: int
    duplicate: bool


def check_dedupe_key(name: str, key: object) -> str:
    """Return ``key`` if it is a non-empty storable str of at most 512 characters."""
    if type(key) is not str or not key or len(key) > DEDUPE_KEY_MAX or not is_storable_text(key):
        raise InvalidArgumentError(
            f"{name} must be a non-empty str of at most {DEDUPE_KEY_MAX} characters of "
            f"valid UTF-8 without NUL, got {key!r}"
        )
    return key


def keyed_enqueue(
    payloads: Sequence[bytes], keys: Sequence[str | None], window_s: float | None
) -> KeyedFlow:
    """Enqueue ``payloads`` (``keys[i]`` None: no key) and answer per item.

    A key repeated inside the batch is one job: later items are duplicates of
    the first. Run it inside one transaction (the window steps must commit
    together with the insert).
    """
    first: dict[str, int] = {}
    for i, key in enumerate(keys):
        if key is not None and key not in first:
            first[key] = i
    answer: list[Enqueued | None] = [None] * len(payloads)
    todo = [i for i, key in enumerate(keys) if key is None or first[key] == i]
    owned: set[str] = set()  # windows this transaction took
    for _ in range(_ROUNDS):
        insert = todo
        if window_s is not None:
            wanted = [k for k in (keys[i] for i in todo) if k is not None and k not in owned]
            if wanted:
                rows = yield ("take_windows", {"keys": wanted, "window_s": window_s})
                owned.update(row[0] for row in rows)
                held = [k for k in wanted if k not in owned]
                if held:
                    found: dict[str, Any] = dict((yield ("window_jobs", {"keys": held})))
                    for key in held:
                        if key in found:
                            answer[first[key]] = Enqueued(int(found[key]), True)
            insert = [i for i in todo if keys[i] is None or keys[i] in owned]
        if insert:
            rows = yield (
                "insert",
                {"payloads": [payloads[i] for i in insert], "keys": [keys[i] for i in insert]},
            )
            by_key = {row[1]: int(row[0]) for row in rows if row[1] is not None}
            plain = iter(sorted(int(row[0]) for row in rows if row[1] is None))
            conflicted: list[str] = []
            for i in insert:
                key = keys[i]
                if key is None:
                    answer[i] = Enqueued(next(plain), False)
                elif key in by_key:
                    answer[i] = Enqueued(by_key[key], False)
                else:
                    conflicted.append(key)
            if conflicted:
                live: dict[str, Any] = dict((yield ("live_keys", {"keys": conflicted})))
                for key in conflicted:
                    if key in live:
                        answer[first[key]] = Enqueued(int(live[key]), True)
            if window_s is not None:
                pointed = [(keys[i], answer[i]) for i in insert if keys[i] in owned]
                pairs = [(k, a.id) for k, a in pointed if a is not None and k is not None]
                if pairs:
                    yield (
                        "set_window_jobs",
                        {"keys": [k for k, _ in pairs], "ids": [i for _, i in pairs]},
                    )
        todo = [i for i in todo if answer[i] is None]
        if not todo:
            break
    else:
        raise EngineError(f"dedupe key {keys[todo[0]]!r} kept changing hands; try again")
    result: list[Enqueued] = []
    for i, key in enumerate(keys):
        got = answer[i]
        if got is None:
            assert key is not None
            head = answer[first[key]]
            assert head is not None
            got = Enqueued(head.id, True)
        result.append(got)
    return result


def run_flow_sync(
    flow: KeyedFlow, step: Callable[[str, dict[str, Any]], list[tuple[Any, ...]]]
) -> list[Enqueued]:
    """Drive :func:`keyed_enqueue` with a blocking step runner."""
    try:
        name, params = next(flow)
        while True:
            name, params = flow.send(step(name, params))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def run_flow(
    flow: KeyedFlow, step: Callable[[str, dict[str, Any]], Awaitable[list[tuple[Any, ...]]]]
) -> list[Enqueued]:
    """Drive :func:`keyed_enqueue` with an async step runner."""
    try:
        name, params = next(flow)
        while True:
            name, params = flow.send(await step(name, params))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
