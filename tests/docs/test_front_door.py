"""README is the front door: short, and every link it gives to docs/ lands on a
page and a heading that exist (mkdocs --strict checks the links inside docs/)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
LINK = re.compile(r"\]\((docs/[^)#\s]+)(?:#([^)\s]+))?\)")


def _slug(heading: str) -> str:
    """The anchor Python-Markdown's toc gives a heading (its default slugify)."""
    text = re.sub(r"[^\w\s-]", "", heading.strip().lower())
    return re.sub(r"[-\s]+", "-", text).strip("-")


def test_the_readme_stays_a_front_door() -> None:
    lines = README.read_text().count("\n")
    assert lines <= 250, f"README.md has {lines} lines; move detail to docs/"


def test_every_readme_link_into_docs_lands_on_a_heading_that_exists() -> None:
    links = LINK.findall(README.read_text())
    assert len(links) >= 10
    for page, anchor in links:
        target = ROOT / page
        assert target.is_file(), f"README links {page}, which does not exist"
        if anchor:
            headings = re.findall(r"^#+ (.+)$", target.read_text(), re.M)
            assert anchor in {_slug(h) for h in headings}, f"{page}#{anchor}: no such heading"
