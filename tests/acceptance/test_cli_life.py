"""``alkstore jobs show`` with a job's attempts and progress, and ``alkstore jobs
signal`` (#24), as real CLI processes."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import alkstore
from alkstore.worker.job_life import JobLife
from tests.acceptance.conftest import run_cli


async def _job_with_a_life(target: Any) -> int:
    async with await alkstore.connect(target.url, **target.connect_kwargs()) as store:
        queue = store.queue("lifeq")
        job_id = await queue.enqueue({"n": 1})
        handle = await queue.claim_one("w-cli")
        assert handle is not None
        await JobLife(handle, asyncio.get_running_loop())._write(0.5, "half way")
        now = time.time()
        await store._engine.add_attempts(
            [(job_id, "lifeq", 1, "w-cli", "box", now - 1, now, "retry", "ValueError: no\nTb")],
            20,
        )
        return job_id


async def test_jobs_show_prints_the_attempts_and_the_progress(target: Any) -> None:
    job_id = await _job_with_a_life(target)
    shown = run_cli(target, "jobs", "show", str(job_id))
    assert shown.returncode == 0, shown.stderr
    assert "progress: [##########----------] 50% half way" in shown.stdout
    assert "attempts" in shown.stdout and "retry" in shown.stdout and "w-cli" in shown.stdout
    assert "ValueError: no" in shown.stdout and "Tb" not in shown.stdout  # first line only
    as_json = run_cli(target, "jobs", "show", str(job_id), "--json")
    data = json.loads(as_json.stdout)
    assert data["progress"]["value"] == 0.5 and data["progress"]["message"] == "half way"
    [attempt] = data["attempt_history"]
    assert (attempt["number"], attempt["outcome"], attempt["host"]) == (1, "retry", "box")
    assert attempt["error"] == "ValueError: no\nTb"


async def test_jobs_signal_sends_and_refuses_cleanly(target: Any) -> None:
    job_id = await _job_with_a_life(target)
    sent = run_cli(target, "jobs", "signal", str(job_id), "approval", "--payload", '{"ok": 1}')
    assert sent.returncode == 0, sent.stderr
    assert f"signal 'approval' sent to job {job_id}" in sent.stdout
    async with await alkstore.connect(target.url, **target.connect_kwargs()) as store:
        assert await store._engine.get_signal("lifeq", job_id, "approval") == '{"ok":1}'
    for args, code, words in [
        ((str(job_id), "x", "--payload", "{nope"), 2, "--payload is not JSON"),
        ((str(job_id), "a#b"), 2, "signal name"),
        (("999999999", "x"), 1, "no live job 999999999"),
        (("0", "x"), 2, "ID"),
    ]:
        bad = run_cli(target, "jobs", "signal", *args)
        assert bad.returncode == code, (args, bad.stdout, bad.stderr)
        assert words in bad.stderr and "Traceback" not in bad.stderr
