"""Fixtures of the contract suite (engine-neutral; the engines come from ../conftest.py)."""

from __future__ import annotations

import itertools

import pytest

_names = itertools.count()


@pytest.fixture
def qname() -> str:
    """A queue name of its own for each test."""
    return f"q{next(_names)}"
