"""Traffic and SERVICES.json loading: the contract's columns, gaps, resampling, clear errors."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from allocator.core.errors import InputError
from forecasting.traffic import (
    ServiceConfig,
    hourly,
    load_services,
    load_traffic,
    servegen_to_long,
    validate_traffic,
)


def rows(stamps, service, counts) -> pd.DataFrame:
    return pd.DataFrame({"timestamp": stamps, "service": service, "requests": counts})


def test_ten_minute_counts_become_requests_per_hour():
    stamps = pd.date_range("2026-01-05", periods=12, freq="10min", tz="UTC")
    wide = hourly(validate_traffic(rows(stamps.strftime("%Y-%m-%dT%H:%M:%SZ"), "chat", 100)))
    assert list(wide.columns) == ["chat"]
    assert wide["chat"].tolist() == [600.0, 600.0]


def test_zero_and_near_zero_windows_are_gaps_not_demand():
    stamps = pd.date_range("2026-01-05", periods=18, freq="10min", tz="UTC")
    counts = [100.0] * 18
    counts[2] = 0.0          # one empty window inside hour 0
    counts[6:12] = [1.0] * 6  # hour 1 collapsed to almost nothing: an outage or trace gap
    wide = hourly(validate_traffic(rows(stamps.astype(str), "chat", counts)))
    assert wide["chat"].iloc[0] == pytest.approx(600.0)
    assert np.isnan(wide["chat"].iloc[1])
    assert wide["chat"].iloc[2] == pytest.approx(600.0)


def test_a_small_service_keeps_its_real_zeros():
    stamps = pd.date_range("2026-01-05", periods=48, freq="h", tz="UTC")
    counts = np.where(np.arange(48) % 24 < 6, 0.0, 3.0)
    wide = hourly(validate_traffic(rows(stamps.astype(str), "tiny", counts)))
    assert (wide["tiny"] == 0).sum() == 12


def test_coarser_than_an_hour_spreads_over_the_hours():
    stamps = pd.date_range("2026-01-05", periods=3, freq="2h", tz="UTC")
    wide = hourly(validate_traffic(rows(stamps.astype(str), "batchy", 200.0)))
    assert wide["batchy"].tolist() == [100.0] * 6


def test_missing_hours_are_nan_and_timezones_are_utc():
    stamps = ["2026-01-05T01:00:00+01:00", "2026-01-05T01:00:00Z", "2026-01-05T02:00:00Z",
              "2026-01-05T04:00:00Z"]
    wide = hourly(validate_traffic(rows(stamps, "chat", [5, 6, 7, 8])))
    assert str(wide.index[0]) == "2026-01-05 00:00:00+00:00"
    assert wide["chat"].tolist()[:3] == [5, 6, 7] and np.isnan(wide["chat"].iloc[3])


@pytest.mark.parametrize(("frame", "field", "text"), [
    (pd.DataFrame({"timestamp": ["2026-01-05"], "requests": [1]}), "service", "missing"),
    (rows(["yesterday"], "chat", [1]), "timestamp", "ISO 8601"),
    (rows(["2026-01-05T00:00Z"], "chat", [-1]), "requests", ">= 0"),
    (rows(["2026-01-05T00:00Z"], "chat", ["many"]), "requests", ">= 0"),
    (rows(["2026-01-05T00:00Z"] * 2, "chat", [1, 2]), "timestamp", "second row"),
])
def test_bad_traffic_names_service_and_column(frame, field, text):
    with pytest.raises(InputError, match=text) as err:
        validate_traffic(frame)
    assert err.value.field == field
    if field != "service":
        assert err.value.job == "chat"


def test_load_traffic_reads_csv_and_parquet_and_locates_errors(tmp_path):
    frame = rows(["2026-01-05T00:00:00Z", "2026-01-05T01:00:00Z"], "chat", [1, None])
    frame.to_csv(tmp_path / "t.csv", index=False)
    frame.to_parquet(tmp_path / "t.parquet")
    for name in ("t.csv", "t.parquet"):
        loaded = load_traffic(tmp_path / name)
        assert loaded["requests"].isna().sum() == 1
    (tmp_path / "t.txt").write_text("x")
    with pytest.raises(InputError) as err:
        load_traffic(tmp_path / "t.txt")
    assert "t.txt" in err.value.line()


def write_services(tmp_path, services) -> str:
    path = tmp_path / "services.json"
    path.write_text(json.dumps({"services": services}))
    return str(path)


def test_load_services_gives_frozen_typed_configs(tmp_path):
    path = write_services(tmp_path, [
        {"service": "chat", "requests_per_gpu_hour": 3600, "headroom": 0.2, "min_gpus": 1,
         "swap_limit": 2, "priority": 10},
        {"service": "embed", "requests_per_gpu_hour": 9000.5},
    ])
    configs = load_services(path)
    assert list(configs) == ["chat", "embed"]
    assert configs["chat"] == ServiceConfig("chat", 3600, 0.2, 1, 2, 10)
    assert configs["embed"].swap_limit == 2  # defaults
    with pytest.raises(AttributeError):
        configs["chat"].swap_limit = 5


@pytest.mark.parametrize(("entry", "field"), [
    ({"service": "chat"}, "requests_per_gpu_hour"),
    ({"service": "chat", "requests_per_gpu_hour": 0}, "requests_per_gpu_hour"),
    ({"service": "chat", "requests_per_gpu_hour": 10, "headroom": 1.0}, "headroom"),
    ({"service": "chat", "requests_per_gpu_hour": 10, "swap_limit": 2.0}, "swap_limit"),
    ({"service": "chat", "requests_per_gpu_hour": 10, "min_gpus": True}, "min_gpus"),
    ({"service": "chat", "requests_per_gpu_hour": 10, "priority": 0}, "priority"),
    ({"service": "", "requests_per_gpu_hour": 10}, "service"),
])
def test_bad_services_name_the_service_and_field(tmp_path, entry, field):
    with pytest.raises(InputError) as err:
        load_services(write_services(tmp_path, [entry]))
    assert err.value.field == field
    assert err.value.file.endswith("services.json")


def test_services_reject_nan_and_duplicates(tmp_path):
    path = tmp_path / "s.json"
    path.write_text('{"services": [{"service": "a", "requests_per_gpu_hour": NaN}]}')
    with pytest.raises(InputError):
        load_services(path)
    dup = [{"service": "a", "requests_per_gpu_hour": 1}] * 2
    with pytest.raises(InputError, match="twice"):
        load_services(write_services(tmp_path, dup))


def test_servegen_rows_are_rate_times_window():
    wide = pd.DataFrame({"window_start_s": [0, 600], "m-large_rate_rps": [1.5, 2.0],
                         "m-mid_rate_rps": [0.0, 1.0], "m-small_rate_rps": [3.0, 3.0]})
    long = servegen_to_long(wide, anchor="2025-03-03T00:00:00Z")
    assert len(long) == 6
    first = long.iloc[0]
    assert (first.timestamp, first.service, first.requests) == (
        "2025-03-03T00:00:00Z", "m-large", 900)
    assert pd.Timestamp("2025-03-03").dayofweek == 0  # the documented anchor is a Monday
