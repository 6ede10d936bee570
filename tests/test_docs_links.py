"""The repo stands alone: every relative link in the README and docs/ resolves inside it,
and no page points at files outside it (../shared, seeds/) or at issue numbers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", ROOT / "BENCHMARKS.md", ROOT / "data" / "README.md",
                *(ROOT / "docs").rglob("*.md")])
LINK = re.compile(r"\]\(([^)\s]+)\)")
OUTSIDE = re.compile(r"\.\./shared|(?<![\w/])seeds/|\bissue \d+(?!\d*\s*[:)]?\s*\()", re.I)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve_inside_the_repo(page):
    text = page.read_text(encoding="utf-8")
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = (page.parent / target.split("#")[0]).resolve()
        assert path.exists(), f"{page.relative_to(ROOT)}: {target} does not exist"
        assert path.is_relative_to(ROOT), f"{page.relative_to(ROOT)}: {target} is outside"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_points_outside_the_repo(page):
    for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if "AutoAWQ" in line:  # AutoAWQ's own GitHub issues are published sources
            continue
        assert not OUTSIDE.search(line), f"{page.relative_to(ROOT)}:{n}: {line.strip()}"
