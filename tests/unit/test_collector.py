"""``core.collector.paused``: the collector off in the block, as it was afterwards."""

from __future__ import annotations

import gc

import pytest

from alkstore.core.collector import paused


def test_paused_holds_the_collector_off_then_turns_it_back_on() -> None:
    assert gc.isenabled()
    with paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_paused_restores_the_collector_when_the_block_raises() -> None:
    with pytest.raises(ImportError), paused():
        raise ImportError("no such module")
    assert gc.isenabled()


def test_paused_leaves_a_collector_turned_off_by_the_caller_off() -> None:
    gc.disable()
    try:
        with paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
