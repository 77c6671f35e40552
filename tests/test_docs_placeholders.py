"""The shipped documents hold no unfilled placeholder: a line that is one UPPER_SNAKE_CASE token (``TTFR_TIMING``)
is a figure someone meant to fill in, and a reader would see it as text."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOKEN = re.compile(r"^\s*[A-Z][A-Z0-9]*(_[A-Z0-9]+)+\s*$")


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "benchmarks").glob("*.md"))]


def test_the_token_pattern_tells_a_placeholder_from_prose() -> None:
    assert TOKEN.match("TTFR_TIMING") and TOKEN.match("  RESULTS_TABLE_2 ")
    assert not TOKEN.match("CKA_LINEAR is a measure") and not TOKEN.match("`MODEL_A`") and not TOKEN.match("OK")


def test_no_page_has_a_placeholder_line() -> None:
    found = [
        f"{page.relative_to(ROOT)}:{i}: {line.strip()}"
        for page in _pages()
        for i, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1)
        if TOKEN.match(line)
    ]
    assert found == [], found
