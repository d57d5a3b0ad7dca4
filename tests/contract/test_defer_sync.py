"""``defer_sync`` answers what ``defer`` answers: the job id (an ``int``), ``duplicate``,
and a way to wait for the result, here a blocking one (issue #21)."""

from __future__ import annotations

from typing import Any

import pytest

import alkstore
from alkstore import sync


def test_defer_sync_answers_a_deferred_with_duplicate_and_a_blocking_result(
    target: Any,
) -> None:
    app = alkstore.App(target.url, **target.connect_kwargs())

    @app.task(queue="synced", name="synced.add", keep_result_s=60)
    def add(a: int, b: int) -> int:
        return a + b

    @app.task(queue="synced", name="synced.forget")
    def forget() -> None: ...

    try:
        first = add.configure(dedupe_key="k").defer_sync(2, 40)
        again = add.configure(dedupe_key="k").defer_sync(2, 40)
        assert isinstance(first, int) and isinstance(first, alkstore.SyncDeferred)
        assert (first.duplicate, again.duplicate) == (False, True)
        assert again.id == first.id == int(again)
        with sync.connect(target.url, **target.connect_kwargs()) as store:
            handle = store.queue("synced").claim_one("w")
            assert handle is not None and handle.job.id == first
            assert handle.ack_result(42, 60)
        assert first.result(timeout_s=10) == 42  # blocks, no event loop of the caller's
        with pytest.raises(alkstore.InvalidArgumentError, match="keeps no results"):
            forget.defer_sync().result(timeout_s=1)
    finally:
        app.close_sync()
