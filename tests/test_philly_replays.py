"""benchmarks/philly_replays.py: the paired comparison it prints."""

from __future__ import annotations

import pytest
import typer

from benchmarks.philly_replays import WEEKS, Run, compare, variant_named
from benchmarks.replay_seeds import VARIANTS


def test_compare_pairs_each_replay_with_its_base() -> None:
    base = [Run(100.0, 90.0, 1.0), Run(200.0, 180.0, 2.0)]
    runs = [Run(110.0, 95.0, 0.5), Run(190.0, 190.0, 3.0)]
    line = compare(runs, base)
    # value: +10% and -5% per replay, 300 -> 300 summed; net: +5% and +5% of the base value
    assert "value +0.00% summed, per replay +2.50% (se 7.50), 1 up / 1 down" in line
    assert "net value +5.00% (se 0.00)" in line
    assert "shortfall mean 1.75% (base 1.50%), worst 3.00% (base 2.00%)" in line
    assert "not granted 0.00% (base 0.00%)" in line  # Runs made without that part


def test_compare_prints_the_shortfall_not_granted() -> None:
    base = [Run(100.0, 90.0, 2.0, 0.5), Run(100.0, 90.0, 2.0, 1.5)]
    runs = [Run(100.0, 90.0, 1.5, 0.25), Run(100.0, 90.0, 1.5, 0.25)]
    assert "not granted 0.25% (base 1.00%)" in compare(runs, base)


def test_a_variant_name_may_carry_the_replay_s_overrun_share() -> None:
    assert variant_named("pairs") == (VARIANTS["pairs"], 0.0)
    assert variant_named("hotdefer@0.3") == (VARIANTS["hotdefer"], 0.3)
    for bad in ("nosuch@0.3", "pairs@x"):
        with pytest.raises(typer.BadParameter):
            variant_named(bad)


def test_the_weeks_are_mondays_the_bundled_trace_covers() -> None:
    import pandas as pd

    from pipelines.philly import PHILLY_CSV, read_philly

    trace = read_philly(PHILLY_CSV)
    for week in WEEKS:
        monday = pd.Timestamp(week)
        assert monday.dayofweek == 0
        assert trace["timestamp"].min() <= monday + pd.Timedelta(days=1)
        assert trace["timestamp"].max() >= monday + pd.Timedelta(days=6)
