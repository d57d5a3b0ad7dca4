"""Fixtures of the contract suite (engine-neutral; the engines come from ../conftest.py)."""

from __future__ import annotations

import itertools
import time

import pytest

import alkstore

_names = itertools.count()


@pytest.fixture
def qname() -> str:
    """A queue name of its own for each test."""
    return f"q{next(_names)}"


class Clock:
    """A test clock for both engines: "now" starts at the real time and moves only
    by :meth:`advance`, so lapses, expiries and retention are tested without sleeping."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def install(self, *stores: alkstore.Store) -> Clock:
        for store in stores:
            store._engine.set_clock(self)  # type: ignore[attr-defined]
        return self


@pytest.fixture
def clock(store: alkstore.Store) -> Clock:
    """The test clock, installed on ``store`` (``clock.install(other)`` for more stores)."""
    return Clock().install(store)
