"""benchmarks/full_knob_pairs.py: the cases it takes and the rows it prints."""

from __future__ import annotations

import pytest
import typer

from benchmarks.full_knob_pairs import Run, parse_cases


def test_cases_are_read_as_set_and_seed_in_order() -> None:
    got = parse_cases("replan2:1275,tuning:1028")
    assert [(name, case.seed) for name, case in got] == [("replan2", 1275), ("tuning", 1028)]
    assert got[0][1].held_over and not got[1][1].held_over


@pytest.mark.parametrize("text", ["nosuchset:1", "tuning:", "tuning:abc", "tuning:1275"])
def test_an_unknown_set_or_seed_is_refused_by_name(text: str) -> None:
    with pytest.raises(typer.BadParameter, match=text.split(":")[0]):
        parse_cases(text)


def test_a_row_shows_the_gap_in_percent_and_an_open_gap_as_a_dash() -> None:
    proven = Run("replan-10g-s1275", True, 7.56, "optimal", 1e-4, 291.2728, 23, True)
    assert proven.row() == ("| replan-10g-s1275 | on | optimal | 0.01% | 291.27 | 7.6 | 23 "
                            "| yes |")
    assert "| - |" in Run("x", False, 0.1, "no_solver", None, 1.0, 0, False).row()
