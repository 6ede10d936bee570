"""The seasonal-maximum baseline (forecasting/baselines.py), on hand-worked series."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecasting.baselines import (
    Held,
    matched_seasonal_max,
    replay_seasonal_max,
    seasonal_max_rates,
)
from forecasting.traffic import ServiceConfig


def days(*values_by_day: list[float]) -> np.ndarray:
    return np.concatenate([np.asarray(v, dtype=float) for v in values_by_day])


def test_each_hour_gets_its_own_maximum_over_the_trailing_week() -> None:
    hours = np.arange(24, dtype=float)
    history = days(*(hours + 100 * d for d in range(9)))  # 9 days, rising every day
    rates = seasonal_max_rates(history, horizon=30)
    # the trailing 7 days are days 2..8: each hour's maximum is on day 8
    np.testing.assert_array_equal(rates[:24], hours + 800)
    np.testing.assert_array_equal(rates[24:], hours[:6] + 800)  # the next day repeats


def test_headroom_scales_and_a_partial_day_aligns_to_the_end() -> None:
    history = np.concatenate([np.full(24, 1.0), np.arange(5, dtype=float)])  # 29 hours
    rates = seasonal_max_rates(history, horizon=24, headroom=0.5)
    # the last 5 observed hours are hours 19..23 of the day before the forecast
    assert rates[19:].tolist() == [1.5, 1.5, 2 * 1.5, 3 * 1.5, 4 * 1.5]
    assert rates[:19].tolist() == [1.5] * 19


def test_gaps_are_skipped_and_an_hour_never_seen_takes_the_window_maximum() -> None:
    history = np.full(48, np.nan)
    history[3], history[27], history[5] = 2.0, 7.0, 4.0
    rates = seasonal_max_rates(history)
    assert rates[3] == 7.0 and rates[5] == 4.0
    assert rates[0] == 7.0  # never observed: the window's maximum
    assert seasonal_max_rates(np.full(30, np.nan)).tolist() == [0.0] * 24


def test_only_the_last_seven_days_count() -> None:
    history = days([1000.0] * 24, *([1.0] * 24 for _ in range(7)))
    assert seasonal_max_rates(history).max() == 1.0
    assert seasonal_max_rates(history, days=8).max() == 1000.0


def service(swap: int = 1) -> ServiceConfig:
    return ServiceConfig(service="s", requests_per_gpu_hour=10.0, headroom=0.0, min_gpus=0,
                         swap_limit=swap)


def test_replay_holds_the_shaped_maximum_within_the_swap_limit() -> None:
    week = np.tile(np.r_[np.zeros(12), np.full(12, 40.0)], 7)  # 0 or 4 GPUs by hour of day
    test_day = np.r_[np.zeros(12), np.full(12, 40.0)]
    index = pd.date_range("2026-01-05", periods=8 * 24, freq="h", tz="UTC")
    wide = pd.DataFrame({"s": np.r_[week, test_day]}, index=index)
    [held] = replay_seasonal_max(wide, {"s": service(swap=1)}, fit_hours=168)
    assert held.service == "s" and len(held.held) == 24
    assert np.abs(np.diff(held.held)).max() <= 1
    # it rises ahead of the 4-GPU half of the day, one GPU per hour, and is never short
    assert held.held[8:13].tolist() == [0, 1, 2, 3, 4] and (held.held[12:] == 4).all()
    assert held.shortfall_pct == 0.0
    assert held.gpu_hours == int(held.held.sum())


def test_held_counts_only_hours_with_data() -> None:
    h = Held("s", known=np.array([True, False, True]), need=np.array([2, 9, 4]),
             held=np.array([1, 0, 4]))
    assert h.gpu_hours == 5
    assert h.shortfall_pct == pytest.approx(100 * 1 / 6)


def test_matching_raises_headroom_until_the_shortfall_is_no_more_than_asked() -> None:
    rng = np.random.default_rng(0)
    index = pd.date_range("2026-01-05", periods=10 * 24, freq="h", tz="UTC")
    wide = pd.DataFrame({"s": 40 * rng.lognormal(0, 0.3, len(index))}, index=index)
    configs = {"s": service(swap=3)}
    plain = replay_seasonal_max(wide, configs)[0]
    assert plain.shortfall_pct > 0
    matched = matched_seasonal_max(wide, configs, {"s": 0.0})["s"]
    assert matched.shortfall_pct == 0.0 and matched.gpu_hours > plain.gpu_hours
    looser = matched_seasonal_max(wide, configs, {"s": plain.shortfall_pct})["s"]
    assert looser.gpu_hours == plain.gpu_hours
    assert matched_seasonal_max(wide, configs, {"s": 0.0}, steps=1) == {}


def test_after_a_peak_the_replay_falls_from_what_it_holds() -> None:
    """Shaped from the GPUs held now: 4 GPUs in the morning, none after, swap limit 1."""
    day = np.r_[np.full(12, 40.0), np.zeros(12)]
    index = pd.date_range("2026-01-05", periods=8 * 24, freq="h", tz="UTC")
    wide = pd.DataFrame({"s": np.tile(day, 8)}, index=index)
    [held] = replay_seasonal_max(wide, {"s": service(swap=1)}, fit_hours=168)
    assert held.held[:12].tolist() == [4] * 12
    assert held.held[12:17].tolist() == [3, 2, 1, 0, 0]


def test_a_service_without_traffic_is_skipped_not_the_rest() -> None:
    index = pd.date_range("2026-01-05", periods=8 * 24, freq="h", tz="UTC")
    wide = pd.DataFrame({"s": np.full(len(index), 10.0)}, index=index)
    configs = {"absent": ServiceConfig(service="absent", requests_per_gpu_hour=10.0),
               "s": service()}
    assert [h.service for h in replay_seasonal_max(wide, configs)] == ["s"]
