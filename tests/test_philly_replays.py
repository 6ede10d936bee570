"""benchmarks/philly_replays.py: the paired comparison it prints."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import typer

from benchmarks.philly_replays import (
    WEEKS,
    Run,
    compare,
    main,
    read_table,
    stored_base,
    variant_named,
)
from benchmarks.replay_seeds import VARIANTS


def test_compare_pairs_each_replay_with_its_base() -> None:
    base = [Run(100.0, 90.0, 1.0), Run(200.0, 180.0, 2.0)]
    runs = [Run(110.0, 95.0, 0.5), Run(190.0, 190.0, 3.0)]
    line = compare(runs, base)
    # value: +10% and -5% per replay, 300 -> 300 summed; net: +5% and +5% of the base value
    assert "value +0.00% summed, per replay +2.50% (se 7.50), 1 up / 1 down" in line
    assert "net value +5.00% (se 0.00)" in line
    # shortfall: -0.5 and +1.0 point per pair, the paired change the decision rules read
    assert ("shortfall mean 1.75% (base 1.50%; paired change +0.25 point (se 0.75), "
            "1 up / 1 down), worst 3.00% (base 2.00%)") in line
    assert "not granted 0.00% (base 0.00%)" in line  # Runs made without that part


def test_compare_prints_the_shortfall_not_granted() -> None:
    base = [Run(100.0, 90.0, 2.0, 0.5), Run(100.0, 90.0, 2.0, 1.5)]
    runs = [Run(100.0, 90.0, 1.5, 0.25), Run(100.0, 90.0, 1.5, 0.25)]
    assert "not granted 0.25% (base 1.00%)" in compare(runs, base)


TABLE = """\
| week | GPUs | seed | p value | p net | p rt % | p ng % | h value | h net | h rt % | h ng % |
|---|---|---|---|---|---|---|---|---|---|---|
| 2017-10-30 | 14 | 7 | 6,764 | 5,740 | 2.43 | 0.65 | 6,782 | 5,918 | 1.94 | 0.16 |
| 2017-11-06 | 16 | 8 | 8,307 | 7,523 | 1.78 | 0.00 | 8,381 | 7,597 | 1.78 | 0.00 |
p - ...
"""


def test_a_printed_table_reads_back_per_replay(tmp_path: Path) -> None:
    path = tmp_path / "base.md"
    path.write_text(TABLE, encoding="utf-8")
    assert read_table(path, "h") == {("2017-10-30", 14, 7): Run(6782, 5918, 1.94, 0.16),
                                     ("2017-11-06", 16, 8): Run(8381, 7597, 1.78, 0.0)}
    # a table from before the not-granted column: that part unknown, and said so
    old = "\n".join("|".join(line.split("|")[:7]) + "|" if line.startswith("|") else line
                    for line in TABLE.splitlines())
    path.write_text(old, encoding="utf-8")
    runs = read_table(path, "p")
    assert runs[("2017-10-30", 14, 7)].value == 6764 and math.isnan(
        runs[("2017-10-30", 14, 7)].granted)
    assert "not granted 0.00% (base n/a)" in compare([Run(1.0, 1.0, 1.0)],
                                                     [runs[("2017-10-30", 14, 7)]])
    with pytest.raises(ValueError, match="no columns for 'h'"):
        read_table(path, "h")


def test_a_stored_base_must_hold_every_replay_asked_for(tmp_path: Path) -> None:
    path = tmp_path / "base.md"
    path.write_text(TABLE, encoding="utf-8")
    assert stored_base(f"{path}:p", [("2017-11-06", 16, 8)]) == [Run(8307, 7523, 1.78, 0.0)]
    with pytest.raises(typer.BadParameter, match=r"no p replay of \('2017-11-13', 16, 8\)"):
        stored_base(f"{path}:p", [("2017-11-06", 16, 8), ("2017-11-13", 16, 8)])
    with pytest.raises(typer.BadParameter, match="No such file"):
        stored_base(f"{tmp_path / 'missing.md'}:p", [])
    (tmp_path / "empty.md").write_text("a run cut short\n", encoding="utf-8")
    with pytest.raises(typer.BadParameter, match="no table"):
        stored_base(f"{tmp_path / 'empty.md'}:p", [])
    (tmp_path / "cut.md").write_text(TABLE.replace("1.78 | 0.00 |\np -", "1.7"),
                                     encoding="utf-8")
    with pytest.raises(typer.BadParameter, match="table row 3 is not a replay's figures"):
        stored_base(f"{tmp_path / 'cut.md'}:h", [])
    with pytest.raises(typer.BadParameter, match="give FILE:NAME"):
        stored_base(str(path), [])


def test_replays_spread_over_tables_read_as_one(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A base (or a variant) replayed in two runs, one table each, pairs as one run; with
    `--tables` nothing is replayed, and the sizes are pooled too."""
    named = TABLE.replace(" p ", " pairs@0.3 ").replace(" h ", " hotpin@0.3 ")
    head, rule, first, second = named.splitlines()[:4]
    (tmp_path / "a.md").write_text("\n".join([head, rule, first]), encoding="utf-8")
    (tmp_path / "b.md").write_text("\n".join([head, rule, second]), encoding="utf-8")
    cases = [("2017-10-30", 14, 7), ("2017-11-06", 16, 8)]
    spread = ",".join(f"{tmp_path / f}:pairs@0.3" for f in ("a.md", "b.md"))
    assert stored_base(spread, cases) == [Run(6764, 5740, 2.43, 0.65),
                                          Run(8307, 7523, 1.78, 0.0)]
    with pytest.raises(typer.BadParameter, match="one base"):
        stored_base(f"{spread},{tmp_path / 'a.md'}:hotpin@0.3", cases[:1])
    with pytest.raises(typer.BadParameter, match=r"no pairs@0\.3 replay"):
        stored_base(f"{tmp_path / 'a.md'}:pairs@0.3", cases)
    # (a run's replays are every week x size x seed asked for: a table of both sizes)
    (tmp_path / "c.md").write_text("\n".join([head, rule, first, first.replace(
        "| 14 |", "| 16 |")]), encoding="utf-8")
    main(variants="pairs@0.3,hotpin@0.3", gpus="14,16", seeds="7", weeks="2017-10-30",
         base="", tables=f"{tmp_path / 'c.md'}:pairs@0.3,{tmp_path / 'c.md'}:hotpin@0.3")
    out = capsys.readouterr().out
    assert "hotpin@0.3 - pairs@0.3, 14 GPUs, 1 replays: value +0.27% summed" in out
    assert "hotpin@0.3 - pairs@0.3, all sizes, 2 replays: value +0.27% summed" in out
    with pytest.raises(typer.BadParameter, match=r"'hotpin@0\.3' is not among --variants"):
        main(variants="pairs@0.3", gpus="14", seeds="7", weeks="2017-10-30", base="",
             tables=f"{tmp_path / 'c.md'}:hotpin@0.3")


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


def test_the_committed_replay_tables_read_back() -> None:
    """The tables BENCHMARKS.md's replay rules pool (benchmarks/replays/) parse, each with
    a row per week and seed of its size and range, so their commands run as written."""
    from pathlib import Path

    from benchmarks.philly_replays import WEEKS, read_table

    folder = Path(__file__).resolve().parents[1] / "benchmarks" / "replays"
    tables = sorted(folder.glob("*.md"))
    tables = [t for t in tables if t.name != "README.md"]
    assert tables
    for table in tables:
        names, gpus, seeds = table.stem.split("_")
        first, last = (int(s) for s in seeds.removeprefix("s").split("-"))
        for name in names.split("-"):
            runs = read_table(table, f"{name}@0.3")
            assert set(runs) == {(w, int(gpus), s) for w in WEEKS
                                 for s in range(first, last + 1)}, table.name
            assert all(r.value > 0 and r.shortfall >= 0 for r in runs.values()), table.name
