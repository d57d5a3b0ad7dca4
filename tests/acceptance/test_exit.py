"""A script that enqueues through ``app.sync_store()`` and just exits: the store is
closed at exit without a traceback (on SQLite its close needs a thread pool, which
``atexit`` handlers can no longer use)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.acceptance.conftest import ROOT, _env

SCRIPT = """
import sys
import alkstore
app = alkstore.App(sys.argv[1], schema=sys.argv[2])
print(app.sync_store().queue("q").enqueue({"n": 1}))
"""


def test_a_script_leaving_its_sync_store_open_exits_without_a_traceback(
    target, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    out = subprocess.run(
        [sys.executable, str(script), target.url, target.schema],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and out.stdout.strip().isdigit(), out.stderr
    assert out.stderr == ""
