"""The ServeGen replay: legal held curves, the baselines, and the written table and plot."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from benchmarks.profile_eval import metrics, replay
from forecasting.traffic import hourly, load_services, load_traffic
from pipelines.commands_profile import register

DATA = Path(__file__).resolve().parents[1] / "data" / "traffic"


@pytest.fixture(scope="module")
def servegen():
    wide = hourly(load_traffic(DATA / "servegen_traffic.csv"))
    return wide, load_services(DATA / "services.json")


def test_replay_holds_legal_curves_and_beats_seasonal_naive(servegen):
    wide, services = servegen
    results = replay(wide, services)
    assert [r.service for r in results] == ["m-large", "m-mid", "m-small"]
    for r in results:
        limit = services[r.service].swap_limit
        assert len(r.actual) == 168
        for method, held in r.held.items():
            assert np.all(np.abs(np.diff(held)) <= limit), method
        assert np.all(r.held["static-peak"] >= r.need)
    table = metrics(results, 0.95)
    for service, part in table.groupby("service"):
        p = part.set_index("method")
        assert p.loc["profile", "pinball"] < p.loc["seasonal-naive", "pinball"], service
        assert p.loc["profile", "gpu_hours_held"] < p.loc["static-peak", "gpu_hours_held"]
        assert p.loc["static-peak", "shortfall_gpu_hours"] == 0


def test_profile_eval_command_writes_table_and_plot(tmp_path):
    app = typer.Typer()
    register(app)
    rows = load_traffic(DATA / "servegen_traffic.csv")
    short = tmp_path / "nine_days.csv"  # fit 7 days, replay 2: the same code, less time
    rows[rows["timestamp"] < rows["timestamp"].min() + pd.Timedelta(days=9)].to_csv(
        short, index=False)
    result = CliRunner().invoke(app, [
        "profile-eval", "--traffic", str(short),
        "--services", str(DATA / "services.json"), "--out-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    for name in ("profile_eval.md", "profile_eval.csv", "profile_eval.png",
                 "profile_targets.csv"):
        assert (tmp_path / name).stat().st_size > 0
    assert "| m-large | profile |" in (tmp_path / "profile_eval.md").read_text()


@pytest.mark.slow
def test_selection_and_method_comparison_run_on_small_data():
    from benchmarks.profile_eval import best, compare_methods, select, synthetic_hourly
    from forecasting.traffic import ServiceConfig

    wide = synthetic_hourly(1, 8, seed=2)
    services = {"svc-000": ServiceConfig("svc-000", float(wide["svc-000"].max()) / 4)}
    grid = select(wide.iloc[:168], services, 0.9,
                  grid={"alpha": (0.1,), "adapt": (0.0, 0.1), "shrink": (2.0,),
                        "shrink_days": (1.0,)})
    assert len(grid) == 2 and best(grid, 0.9)["alpha"] == 0.1
    table = compare_methods(wide, 0.9)
    assert set(table["method"]) == {"profile", "holt-winters", "stl-ets", "seasonal-naive"}
    assert table["pinball"].notna().all()
