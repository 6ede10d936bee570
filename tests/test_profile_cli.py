"""`gpuplan profile` and friends, end to end: PROFILE.json, bad input -> exit 2, no file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from benchmarks.profile_eval import synthetic_hourly
from forecasting.traffic import to_long
from pipelines.commands_profile import register


@pytest.fixture
def app() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


@pytest.fixture
def files(tmp_path):
    wide = synthetic_hourly(2, 14, seed=1)
    long = to_long(wide).dropna()
    long["timestamp"] = pd.to_datetime(long["timestamp"]).dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    traffic = tmp_path / "traffic.csv"
    long.to_csv(traffic, index=False)
    services = tmp_path / "services.json"
    services.write_text(json.dumps({"services": [
        {"service": s, "requests_per_gpu_hour": float(wide[s].max()) / 5, "headroom": 0.2,
         "min_gpus": 1, "swap_limit": 1, "priority": 5} for s in wide.columns]}))
    return traffic, services, wide


def test_profile_writes_the_contract(app, files, tmp_path):
    traffic, services, wide = files
    out = tmp_path / "PROFILE.json"
    start = "2026-01-19T00:00:00Z"
    result = CliRunner().invoke(app, ["profile", str(traffic), "--services", str(services),
                                      "--start", start, "--steps", "24", "--out", str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert doc["start"] == start and doc["step_minutes"] == 60
    assert [s["service"] for s in doc["services"]] == list(wide.columns)
    for entry in doc["services"]:
        assert len(entry["profile"]) == 168 and len(entry["demand"]) == 24
        demand = entry["demand"]
        assert all(isinstance(d, int) and d >= 1 for d in demand)
        assert max(abs(np.diff(demand))) <= entry["swap_limit"]
        assert {"swap_limit", "priority", "fit"} <= set(entry)
        assert 0 <= entry["fit"]["coverage"] <= 1


def test_profile_half_hour_steps(app, files, tmp_path):
    traffic, services, _ = files
    out = tmp_path / "p.json"
    result = CliRunner().invoke(app, ["profile", str(traffic), "--services", str(services),
                                      "--start", "2026-01-19T06:30", "--steps", "8",
                                      "--step-minutes", "30", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert all(len(s["demand"]) == 8 for s in json.loads(out.read_text())["services"])


@pytest.mark.parametrize("case", ["bad_start", "bad_services", "unknown_service", "bad_rows"])
def test_bad_input_exits_2_with_one_line_and_no_output(app, files, tmp_path, case):
    traffic, services, _ = files
    start = "2026-01-19T00:00:00Z"
    if case == "bad_start":
        start = "next tuesday"
    elif case == "bad_services":
        services.write_text('{"services": [{"service": "svc-000", "swap_limit": -1, '
                            '"requests_per_gpu_hour": 5}]}')
    elif case == "unknown_service":
        services.write_text('{"services": [{"service": "nope", "requests_per_gpu_hour": 5}]}')
    else:
        traffic.write_text("timestamp,service,requests\n2026-01-05T00:00Z,svc-000,-4\n")
    out = tmp_path / "PROFILE.json"
    result = CliRunner().invoke(app, ["profile", str(traffic), "--services", str(services),
                                      "--start", start, "--out", str(out)])
    assert result.exit_code == 2
    lines = [x for x in result.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("gpuplan: error:")
    assert not out.exists()


def test_servegen_command_derives_contract_rows(app, tmp_path):
    src = tmp_path / "sg.csv"
    pd.DataFrame({"window_start_s": [0, 600], "m-large_rate_rps": [1.0, 2.0],
                  "m-mid_rate_rps": [3.0, 4.0], "m-small_rate_rps": [5.0, 6.0]}).to_csv(
        src, index=False)
    out = tmp_path / "traffic.csv"
    result = CliRunner().invoke(app, ["profile-servegen", str(src), "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = pd.read_csv(out)
    assert list(rows.columns) == ["timestamp", "service", "requests"]
    assert rows["requests"].tolist() == [600, 1200, 1800, 2400, 3000, 3600]


def test_bundled_traffic_matches_its_derivation(app, tmp_path):
    out = tmp_path / "traffic.csv"
    result = CliRunner().invoke(app, ["profile-servegen", "--out", str(out)])
    assert result.exit_code == 0, result.output
    bundled = Path(__file__).resolve().parents[1] / "data/traffic/servegen_traffic.csv"
    assert out.read_text() == bundled.read_text()


def test_profile_eval_needs_something_to_replay(app, files, tmp_path):
    traffic, services, _ = files
    result = CliRunner().invoke(app, ["profile-eval", "--traffic", str(traffic),
                                      "--services", str(services), "--fit-days", "14",
                                      "--out-dir", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "nothing to replay" in result.output
    assert not (tmp_path / "out").exists()
