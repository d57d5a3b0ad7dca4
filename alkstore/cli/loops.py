"""The worker command's event loop (``--loop``): asyncio's own, or uvloop when asked
for and installed (the ``uvloop`` extra; never a requirement)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from alkstore.errors import InvalidArgumentError

__all__ = ["LOOPS", "loop_factory"]

LOOPS = ("asyncio", "uvloop")

LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def loop_factory(name: str) -> LoopFactory | None:
    """What makes the ``name`` loop (``None``: asyncio's default); a loop whose package
    is missing is an error naming the package to install, not a traceback."""
    if name == "asyncio":
        return None
    if name == "uvloop":
        try:
            import uvloop
        except ImportError as e:
            raise InvalidArgumentError(
                f"--loop uvloop needs uvloop: pip install 'alkstore[uvloop]' ({e})"
            ) from None
        factory: LoopFactory = uvloop.new_event_loop
        return factory
    raise InvalidArgumentError(f"unknown event loop {name!r}: use one of {', '.join(LOOPS)}")
