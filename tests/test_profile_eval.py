"""The ServeGen replay: legal held curves, the baselines, and the written table and plot."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from forecasting.profile_eval import metrics, replay
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
    result = CliRunner().invoke(app, [
        "profile-eval", "--traffic", str(DATA / "servegen_traffic.csv"),
        "--services", str(DATA / "services.json"), "--out-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    for name in ("profile_eval.md", "profile_eval.csv", "profile_eval.png",
                 "profile_targets.csv"):
        assert (tmp_path / name).stat().st_size > 0
    assert "| m-large | profile |" in (tmp_path / "profile_eval.md").read_text()
