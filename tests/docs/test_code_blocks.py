"""Every ```python block of README.md and docs/*.md runs as written, in a scratch
directory (so the SQLite files it names are scratch files). A block that truly
cannot run here is marked just above it with ``<!-- docs-test: skip (why) -->``."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(
    r"(<!-- docs-test: skip \((?P<why>[^)]*)\) -->\n)?```python\n(?P<code>.*?)```", re.S
)


def _blocks() -> list[tuple[str, str, str | None]]:
    found = []
    for doc in DOCS:
        text = doc.read_text()
        for match in BLOCK.finditer(text):
            line = text[: match.start("code")].count("\n")
            found.append((f"{doc.relative_to(ROOT)}:{line}", match["code"], match["why"]))
    return found


BLOCKS = _blocks()


def test_every_doc_has_its_blocks_found() -> None:
    assert len(BLOCKS) >= 10


@pytest.mark.parametrize(("where", "code", "why"), BLOCKS, ids=[b[0] for b in BLOCKS])
def test_a_python_block_of_the_docs_runs_as_written(
    where: str, code: str, why: str | None, tmp_path: Path
) -> None:
    if why is not None:
        pytest.skip(f"marked not runnable: {why}")
    script = tmp_path / "block.py"
    script.write_text(textwrap.dedent(code))  # a block may sit in a list item
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, f"{where} failed:\n{out.stderr}"
