"""The README's tour, run three times in a row as written, leaves no job processing and
no attempt burnt: its ``break`` out of ``jobs(batch=10)`` gives back the other nine
(issue #21)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from alkstore import sync

ROOT = Path(__file__).resolve().parents[2]


def _tour() -> str:
    text = (ROOT / "README.md").read_text()
    blocks = text.split("```python\n")[1:]
    code = next(b.split("```")[0] for b in blocks if '.jobs("worker-1", batch=10' in b)
    assert "sqlite:///jobs.db" in code  # it writes where it runs: a scratch directory
    return code


def test_the_readme_tour_three_times_leaves_nothing_processing(tmp_path: Path) -> None:
    (tmp_path / "tour.py").write_text(_tour())
    for _ in range(3):
        run = subprocess.run(
            [sys.executable, "tour.py"], cwd=tmp_path, capture_output=True, text=True
        )
        assert run.returncode == 0, run.stderr
    with sync.connect(f"sqlite:///{tmp_path}/jobs.db", migrate="off") as store:
        jobs = store.admin().list_jobs("emails", limit=10_000)
    assert jobs
    states = {(j.state, j.attempts) for j in jobs}
    assert states == {("pending", 0)}, sorted(states)
