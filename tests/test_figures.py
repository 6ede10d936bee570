"""The published figures cannot go stale: every figure block in README.md, BENCHMARKS.md
and docs/ must equal what `gpuplan figures` regenerates from the current code and data
(about two minutes on 2 cores, the replays of docs/simulate.md included)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import figures


def test_block_markers_are_found_and_replaced_alone(tmp_path: Path) -> None:
    page = ("intro 1.0\n<!-- figures:bench-readme -->\nold | table\n<!-- /figures -->\n"
            "between 2.0\n<!-- figures:optimum-summary -->\n<!-- /figures -->\nend\n")
    assert figures.blocks(page) == ["bench-readme", "optimum-summary"]
    out = figures.render(page, {"optimum-summary": "new sentence."})
    assert out == page.replace("<!-- figures:optimum-summary -->\n",
                               "<!-- figures:optimum-summary -->\nnew sentence.\n")


def test_an_unknown_block_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("<!-- figures:no-such-figure -->\n<!-- /figures -->\n")
    with pytest.raises(KeyError, match="no-such-figure"):
        figures.run(check=True, quick=True, root=tmp_path, log=lambda _: None)


def test_check_reports_a_stale_block_and_writes_nothing(tmp_path: Path) -> None:
    stale = ("<!-- figures:optimum-summary -->\nfast reaches 100% of everything.\n"
             "<!-- /figures -->\n")
    (tmp_path / "BENCHMARKS.md").write_text(stale)
    lines: list[str] = []
    assert figures.run(check=True, quick=True, root=tmp_path, log=lines.append) == 1
    assert (tmp_path / "BENCHMARKS.md").read_text() == stale
    assert any("fast reaches 100% of everything" in line for line in lines)
    assert figures.run(check=False, quick=True, root=tmp_path, log=lines.append) == 0
    assert figures.run(check=True, quick=True, root=tmp_path, log=lines.append) == 0


def test_every_page_uses_only_known_figures() -> None:
    used = {name for page in figures.pages() for name in figures.blocks(page.read_text())}
    assert used and used <= set(figures.FIGURES)
    assert {f.name for f in figures.FIGURES.values() if not f.heavy} <= used


@pytest.mark.slow
def test_the_published_figures_are_current() -> None:
    lines: list[str] = []
    status = figures.run(check=True, quick=False, log=lines.append)
    assert status == 0, "\n".join(lines)
