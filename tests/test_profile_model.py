"""The demand profile estimator: shape, gaps, trend, recalibration, and beating the baseline."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from allocator.core.errors import InputError
from benchmarks.profile_eval import synthetic_hourly
from forecasting.profile import DemandProfile, hour_of_week, pinball
from forecasting.traffic import to_long

HOURS = pd.date_range("2026-01-05", periods=21 * 24, freq="h", tz="UTC")  # a Monday


def pattern(hours: pd.DatetimeIndex, base: float = 10_000.0) -> np.ndarray:
    """A daily swing and quieter weekends: the shape the profile should recover."""
    daily = 1 + 0.5 * np.sin(2 * np.pi * (hours.hour - 9) / 24)
    weekend = np.where(hours.dayofweek >= 5, 0.6, 1.0)
    return base * daily * weekend


def noisy(hours: pd.DatetimeIndex, seed: int = 0, sd: float = 0.05, **kw) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"chat": pattern(hours, **kw) * rng.lognormal(0, sd, len(hours))},
                        index=hours)


def test_fit_predict_and_profile_are_consistent():
    wide = noisy(HOURS[:336])
    model = DemandProfile().fit(to_long(wide))
    assert model.services_ == ["chat"]
    assert model.last_hour_ == HOURS[335]
    rows = pd.DataFrame({"timestamp": HOURS[336:340].astype(str), "service": "chat"})
    centre, upper = model.predict(rows), model.predict_upper(rows)
    assert centre.shape == (4,) and np.all(upper > centre)
    profile = model.profile("chat")
    assert profile.shape == (168,)
    truth = pattern(pd.date_range("2026-01-12", periods=168, freq="h", tz="UTC"))
    assert np.median(np.abs(profile / truth - 1)) < 0.06
    assert np.all(model.profile("chat", upper=True) >= profile)
    assert clone(model).get_params()["quantile"] == 0.95


def test_hour_zero_is_monday_midnight_utc():
    stamps = pd.to_datetime(["2026-01-05T00:00Z", "2026-01-11T23:00Z",
                             "2026-01-05T01:00+01:00"], utc=True)
    assert hour_of_week(stamps).tolist() == [0, 167, 0]


def test_gaps_and_zero_windows_do_not_drag_the_profile_down():
    wide = noisy(HOURS[:336])
    clean = DemandProfile().fit_hourly(wide).profile("chat")
    holed = wide.copy()
    holed.iloc[30:42] = 0.0        # a half-day outage recorded as zeros
    holed.iloc[100:110] = np.nan   # and a hole in the trace
    holed.iloc[200] = 3.0          # a near-zero hour
    model = DemandProfile().fit_hourly(holed)
    assert np.max(np.abs(model.profile("chat") / clean - 1)) < 0.1
    assert model.fit_quality_["chat"]["gap_hours"] == 23


def test_update_tracks_a_level_shift_within_a_day():
    model = DemandProfile().fit_hourly(noisy(HOURS[:336]))
    before = model.profile("chat")
    shifted = noisy(HOURS[336:360], seed=1, base=20_000.0)  # traffic doubles
    model.update_hourly(shifted)
    ratio = model.profile("chat") / before
    assert model.last_hour_ == HOURS[359]
    assert 1.8 < np.median(ratio) < 2.2
    nxt = pd.date_range(HOURS[360], periods=24, freq="h")
    centre, _ = model.forecast_hours(nxt)
    assert np.median(centre[0] / pattern(nxt, base=20_000.0)) > 0.9


def test_trend_is_estimated_and_extrapolated():
    rising = noisy(HOURS[:336], sd=0.02)
    growth = np.exp(0.02 * np.arange(336) / 24)  # +2 % a day
    rising["chat"] *= growth
    model = DemandProfile().fit_hourly(rising)
    assert model._state.trend[0] * 24 == pytest.approx(0.02, abs=0.005)
    nxt = pd.date_range(HOURS[336], periods=24, freq="h")
    centre, _ = model.forecast_hours(nxt)
    truth = pattern(nxt) * np.exp(0.02 * np.arange(336, 360) / 24)
    assert np.median(np.abs(centre[0] / truth - 1)) < 0.05


def test_update_from_rows_ignores_old_hours_and_rejects_unknown_services():
    wide = noisy(HOURS[:200])
    model = DemandProfile().fit_hourly(wide)
    state = model._state.level.copy()
    model.update(to_long(wide.iloc[-5:]))  # already seen: nothing changes
    assert np.array_equal(model._state.level, state)
    model.update(to_long(noisy(HOURS[200:203])))
    assert model.last_hour_ == HOURS[202]
    with pytest.raises(InputError) as err:
        model.update(pd.DataFrame({"timestamp": [str(HOURS[210])], "service": ["x"],
                                   "requests": [1.0]}))
    assert err.value.job == "x"


def test_beats_seasonal_naive_at_the_service_level_one_hour_ahead():
    wide = noisy(HOURS, sd=0.1, seed=4)
    wide.iloc[400:] *= 1.3  # a level change a week-old copy cannot know about
    model = DemandProfile(quantile=0.9).fit_hourly(wide.iloc[:336])
    ups, naive, actual = [], [], []
    for t in range(336, len(wide)):
        _, up = model.forecast_hours(wide.index[t: t + 1])
        ups.append(up[0, 0])
        naive.append(wide["chat"].iloc[t - 168])
        actual.append(wide["chat"].iloc[t])
        model.update_hourly(wide.iloc[t: t + 1])
    assert pinball(actual, ups, 0.9) < 0.8 * pinball(actual, naive, 0.9)
    coverage = np.mean(np.array(actual) <= np.array(ups))
    assert 0.8 < coverage < 0.98


def test_fit_rejects_a_service_with_no_usable_hours():
    wide = noisy(HOURS[:48])
    wide["dead"] = np.nan
    with pytest.raises(InputError) as err:
        DemandProfile().fit_hourly(wide)
    assert err.value.job == "dead"


@pytest.mark.slow
def test_fit_and_update_handle_100_services():
    """100 services fitted on two weeks and updated hour by hour (their speed is measured by
    `python benchmarks/speed_targets.py`, not asserted here)."""
    wide = synthetic_hourly(100, 15, seed=0)
    model = DemandProfile().fit(to_long(wide.iloc[:336]))
    assert len(model.services_) == 100
    for t in range(336, 339):
        model.update(to_long(wide.iloc[t: t + 1]))
    assert model.last_hour_ == wide.index[338]
