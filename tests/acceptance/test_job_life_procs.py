"""A job's life across real worker processes (#24): a job killed mid-way resumes at
its next step on another process; a job parked on a signal holds no slot."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

import alkstore
from tests.acceptance import life_app
from tests.acceptance.conftest import Target, Workers, wait_until


@pytest.fixture
def life_workers(target: Target, tmp_path: Path) -> Iterator[Workers]:
    w = Workers(target, tmp_path, "tests.acceptance.life_app:app", options=())
    yield w
    w.close()


@pytest.fixture
async def life_store(target: Target) -> alkstore.Store:
    life_app.app.url = target.url
    life_app.app.schema = target.schema
    store = await life_app.app.connect()
    yield store  # type: ignore[misc]
    await life_app.app.close()
    life_app.app.url = None
    life_app.app.schema = "alkstore"


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def test_a_killed_job_resumes_at_its_next_step_on_another_worker(
    life_store: alkstore.Store, life_workers: Workers, tmp_path: Path
) -> None:
    log = tmp_path / "effects.log"
    job_id = await life_app.five_steps.defer(log_path=str(log), stop_after=3)
    first = life_workers.start("--poll-interval", "0.2", grace=None)

    async def hanging() -> bool:
        return any(line.endswith(" hanging") for line in lines(log))

    await wait_until(hanging, timeout=60, what="the first worker past step 3")
    os.kill(first.pid, signal.SIGKILL)  # no outcome, no give-back: the claim just lapses
    first.wait()
    second = life_workers.start("--poll-interval", "0.2", grace=None)
    queue = life_store.queue("life")
    result = await queue.result(job_id, timeout_s=60)
    assert result == ["step1", "step2", "step3", "step4", "step5"]
    effects = [line.split() for line in lines(log)]
    assert [what for _, what in effects] == [
        "step1",
        "step2",
        "step3",
        "hanging",
        "step4",
        "step5",
    ]  # each step's side effect exactly once
    assert {pid for pid, what in effects[:4]} == {str(first.pid)}
    assert {pid for pid, what in effects[4:]} == {str(second.pid)}
    # until the second worker's record is written, the kept result stands for it
    assert [(a.number, a.outcome) for a in await queue.attempts(job_id)] == [
        (1, "lost"),
        (2, "success"),
    ]

    async def recorded() -> bool:
        return any(a.worker_id for a in await queue.attempts(job_id))

    await wait_until(recorded, timeout=30, what="the second attempt's record")
    history = await queue.attempts(job_id)
    assert [(a.number, a.outcome) for a in history] == [(1, "lost"), (2, "success")]
    assert history[1].worker_id is not None and str(second.pid) in history[1].worker_id


async def test_a_job_parked_on_a_signal_holds_no_slot_and_wakes_on_it(
    life_store: alkstore.Store, life_workers: Workers, tmp_path: Path
) -> None:
    log = tmp_path / "effects.log"
    job_id = await life_app.approval.defer(log_path=str(log))
    # concurrency 1, and a re-poll too slow to matter: only the wake brings it back soon
    life_workers.start("--concurrency", "1", "--poll-interval", "30", grace=None)
    queue = life_store.queue("life")

    async def parked() -> bool:
        job = await queue.get_job(job_id)
        return job is not None and job.state == "pending" and "waiting 1" in "\n".join(lines(log))

    await wait_until(parked, timeout=60, what="the job parked on its signal")
    await life_app.mark.defer_many([{"log_path": str(log), "n": n} for n in range(3)])

    async def marked() -> bool:
        return sum(line.split()[1].startswith("mark") for line in lines(log)) == 3

    await wait_until(marked, timeout=60, what="other jobs run on the one slot")
    assert await life_store.signal(job_id, "approval", {"ok": True})
    assert await queue.result(job_id, timeout_s=20) == {"ok": True}
    job_lines = [line.split(maxsplit=1)[1] for line in lines(log)]
    assert job_lines.count("waiting 1") == 2  # woken once, the attempt not spent
