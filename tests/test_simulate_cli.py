"""`gpuplan simulate` and the Philly mapping: reports written, bad input refused, rules kept."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from pipelines import commands_simulate
from pipelines import simulate as sim
from pipelines.philly import (
    PHILLY_CSV,
    PhillyConfig,
    hourly_traffic,
    issued_forecasts,
    kind_of,
    map_jobs,
    philly_world,
    read_philly,
    services,
)

ROOT = Path(__file__).resolve().parents[1]


def app() -> typer.Typer:
    a = typer.Typer()
    a.callback()(lambda: None)  # keep `simulate` a subcommand, as in the real CLI
    commands_simulate.register(a)
    return a


def run(*args: str):
    return CliRunner().invoke(app(), ["simulate", *args, "--no-track", "--workers", "1"])


def test_one_world_writes_report_plot_metrics_and_config(tmp_path: Path) -> None:
    result = run("--world", "low-00", "--days", "1", "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    where = tmp_path / "low-00"
    text = (where / "report.md").read_text()
    assert "| fast |" in text and "| fifo |" in text and "Gains over online fifo" in text
    assert "gpuplan simulate --world low-00" in text
    assert (where / "utilization_shortfall.png").read_bytes()[:4] == b"\x89PNG"
    metrics = json.loads((where / "metrics.json").read_text())
    assert set(metrics) == {"fast", "fifo", "priority"}
    assert json.loads((where / "config.json").read_text())["sim"]["horizon"] == 24


def test_the_overrun_share_reaches_the_replay_and_its_command_line(tmp_path: Path) -> None:
    result = run("--world", "low-00", "--days", "1", "--policies", "fast",
                 "--overrun-share", "0.3", "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "low-00" / "config.json").read_text()
                      )["sim"]["overrun_share"] == 0.3
    assert "--overrun-share 0.3" in (tmp_path / "low-00" / "report.md").read_text()


def test_sweep_writes_one_row_per_horizon_and_decay(tmp_path: Path) -> None:
    result = run("--world", "medium-03", "--days", "1", "--policies", "fast",
                 "--sweep-horizon", "2,6", "--sweep-decay", "0.97,1.0", "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    rows = json.loads((tmp_path / "medium-03" / "sweep" / "sweep.json").read_text())
    assert sorted((r["horizon"], r["decay"]) for r in rows) == [
        (2, 0.97), (2, 1.0), (6, 0.97), (6, 1.0)]
    assert all(r["violations"] == 0 for r in rows)


@pytest.mark.parametrize("args", [
    ["--world", "nowhere-01"],
    ["--world", "low-00", "--suite"],
    ["--world", "low-00", "--policies", "fast,magic"],
    ["--world", "low-00", "--sweep-horizon", "2,x"],
    ["--world", "low-00", "--horizon", "0"],
    ["--world", "low-00", "--overrun-share", "-0.5"],
    ["--world", "low-00", "--overrun-share", "nan"],
    ["--philly", "--philly-start", "2016-01-04"],
])
def test_bad_input_exits_2_and_writes_nothing(tmp_path: Path, args: list[str]) -> None:
    result = run(*args, "--out", str(tmp_path / "out"))
    assert result.exit_code == 2
    assert not (tmp_path / "out").exists()


# -- the Philly mapping -------------------------------------------------------------------

def frame(rows: list[tuple[str, float, int]]) -> pd.DataFrame:
    return pd.DataFrame({"timestamp": pd.to_datetime([r[0] for r in rows]),
                         "duration": [r[1] for r in rows], "num_gpus": [r[2] for r in rows],
                         "cluster": "vc1"})


def test_mapping_rounds_gpus_and_hours_up_and_drops_what_cannot_fit() -> None:
    rows = [("2017-11-06 00:10:00", 60.0, 3), ("2017-11-06 05:59:00", 3601.0, 1),
            ("2017-11-07 01:00:00", 30000.0, 12), ("2017-11-13 00:00:00", 60.0, 1),
            ("2017-11-05 23:00:00", 60.0, 1), ("2017-11-06 02:00:00", 60.0, 64),
            ("2017-11-06 03:00:00", 600.0, 2)]
    cfg = PhillyConfig(vc="vc1", gpus=32)
    jobs = map_jobs(frame(rows), cfg)
    got = [(j.arrival, j.gpus, j.true_steps, j.kind) for j in jobs]
    assert got == [(0, 4, 1, "batch_inference"), (3, 2, 1, "quantization"),
                   (5, 1, 2, "batch_inference"), (25, 16, 9, "training")]
    assert all(j.priority in (1, 2, 3, 5, 8) and j.predicted_steps >= 1 for j in jobs)
    assert map_jobs(frame(rows), cfg) == jobs  # seeded: the same week maps the same way


def test_kind_rule() -> None:
    assert kind_of(8, 1) == "training" and kind_of(1, 6) == "training"
    assert kind_of(2, 1) == "quantization" and kind_of(4, 1) == "batch_inference"


def rates(tmp_path: Path) -> Path:
    hours = 24 * 14
    t = np.arange(hours * 6) * 600
    wave = 100 + 50 * np.sin(2 * np.pi * (t / 3600 % 24) / 24)
    raw = pd.DataFrame({"window_start_s": t, "m-large_rate_rps": wave,
                        "m-mid_rate_rps": 2 * wave, "m-small_rate_rps": 3 * wave})
    path = tmp_path / "rates.csv"
    raw.to_csv(path, index=False)
    return path


def test_servegen_pools_become_scaled_demand(tmp_path: Path) -> None:
    cfg = PhillyConfig(gpus=30, realtime_share=0.3)
    pools = services(hourly_traffic(rates(tmp_path)), cfg, 168)
    assert [p.id for p in pools] == ["m-large", "m-mid", "m-small"]
    for p in pools:
        assert p.actual.max() == pytest.approx(3.0, rel=0.02)  # 0.3 * 30 / 3 pools
        assert len(p.expected) >= 168 + cfg.lookahead
        assert np.allclose(p.expected[:24], p.actual[:24], rtol=0.02)  # a repeating day


def test_the_bundled_extract_holds_the_default_week() -> None:
    trace = read_philly(ROOT / PHILLY_CSV)
    cfg = PhillyConfig()
    jobs = map_jobs(trace, cfg)
    assert len(jobs) > 500
    assert max(j.arrival for j in jobs) < 168
    assert {j.gpus for j in jobs} <= {1, 2, 4, 8, 16, 32}


@pytest.mark.skipif(not (ROOT / PhillyConfig().servegen_csv).exists(),
                    reason="ServeGen traffic copy (data/traffic/) not present")
def test_philly_world_builds_from_the_repo_files() -> None:
    w = philly_world(PhillyConfig(philly_csv=ROOT / PHILLY_CSV,
                                  servegen_csv=ROOT / PhillyConfig().servegen_csv))
    assert w.steps == 168 and len(w.services) == 3


def test_the_profile_estimator_issues_a_forecast_every_hour(tmp_path: Path) -> None:
    cfg = PhillyConfig(gpus=30, realtime_share=0.3, lookahead=30)
    traffic = hourly_traffic(rates(tmp_path))
    issued = issued_forecasts(traffic, cfg, 12)
    pools = services(traffic, cfg, 12)
    for p in pools:
        rows = issued[p.id]
        assert rows.shape == (12, 30) and np.isfinite(rows).all()
        # an upper band on a clean repeating wave: at or above the actual load, not wild
        assert (rows[:, 0] >= 0.95 * p.actual[:12]).all()
        assert (rows[:, 0] <= 2.0 * p.actual[:12]).all()
        with_issued = replace(p, issued=rows)
        got = sim.forecast(with_issued, 5, 4, sim.SimConfig(margin=0.0, lead=0))
        assert got == tuple(int(v) for v in np.maximum(np.ceil(rows[5, :4] - 1e-9), 1))
