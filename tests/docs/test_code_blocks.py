"""Every ```python block of README.md and docs/*.md runs as written, in a scratch
directory (so the SQLite files it names are scratch files).

A fragment (top-level ``await``, or names the text around it has made) is
marked just above it with ``<!-- docs-test: context NAME -->`` and runs through
``block_runner.py`` with that context's prelude. In a block run in a ``pg``
context every ``postgresql://user@host/db`` URL is the test database and
``schema="jobs"`` a fresh schema of its own, dropped afterwards. A block that
truly cannot run here (it needs a package alkstore does not depend on) is
marked ``<!-- docs-test: skip (why) -->``."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNER = Path(__file__).with_name("block_runner.py")
BLOCK = re.compile(
    r"(<!-- docs-test: (?:skip \((?P<why>[^)]*)\)|context (?P<context>[a-z-]+)) -->\n)?"
    r"```python\n(?P<code>.*?)```",
    re.S,
)
# postgresql://app@db:5432/app (a host the docs name) -> the test database
DOC_PG_URL = re.compile(r"postgresql://[^/\s\"']+/[A-Za-z0-9_]+")


def _blocks() -> list[tuple[str, str, str | None]]:
    found = []
    for doc in DOCS:
        text = doc.read_text()
        for match in BLOCK.finditer(text):
            line = text[: match.start("code")].count("\n")
            why = match["why"]
            if match["context"] is not None:
                why = f"context:{match['context']}"
            found.append((f"{doc.relative_to(ROOT)}:{line}", match["code"], why))
    return found


BLOCKS = _blocks()


def test_every_doc_has_its_blocks_found() -> None:
    assert len(BLOCKS) >= 10


@pytest.mark.parametrize(("where", "code", "why"), BLOCKS, ids=[b[0] for b in BLOCKS])
def test_a_python_block_of_the_docs_runs_as_written(
    where: str,
    code: str,
    why: str | None,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    cleanups: list[Callable[[], None]],
) -> None:
    context = None
    if why is not None:
        if not why.startswith("context:"):
            pytest.skip(f"marked not runnable: {why}")
        context = why.removeprefix("context:")
    code = textwrap.dedent(code)  # a block may sit in a list item
    args: list[str] = []
    if context is not None:
        pg_url, schema = "", ""
        if context.startswith("pg"):
            pg_url = request.getfixturevalue("pg_url")
            schema = f"docs_{uuid.uuid4().hex[:10]}"
            code = DOC_PG_URL.sub(pg_url, code).replace('schema="jobs"', f'schema="{schema}"')
            cleanups.append(lambda: _drop_pg(pg_url, schema))
        args = [str(RUNNER), "block.py", context, pg_url, schema]
    script = tmp_path / "block.py"
    script.write_text(code)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, *(args or [str(script)])],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, f"{where} failed:\n{out.stderr}"


def _drop_pg(pg_url: str, schema: str) -> None:
    """What a pg block made: its schema, the default one an App uses, the orders table."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(pg_url, autocommit=True) as conn:
        for name in (schema, "alkstore"):
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
        conn.execute("DROP TABLE IF EXISTS orders")


@pytest.fixture
def cleanups() -> Iterator[list[Callable[[], None]]]:
    done: list[Callable[[], None]] = []
    yield done
    for cleanup in done:
        cleanup()
