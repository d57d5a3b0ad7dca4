"""Start child processes at one moment: each says ``ready``, then all hear ``go``."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence


async def start_together(procs: Sequence[asyncio.subprocess.Process], wait_s: float) -> None:
    """Wait for every child's ``ready`` line, then release them all with ``go``
    (so their claims or enqueues race for real)."""
    for p in procs:
        assert p.stdout is not None
        assert (await asyncio.wait_for(p.stdout.readline(), wait_s)).strip() == b"ready"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write(b"go\n")
        await p.stdin.drain()
