"""The profile on sparse, bursty, low-volume traffic: each cause of the blow-up, then properties.

On ServeGen's per-client series the profile once held thousands of times the static
peak. Each test below rebuilds one cause on a small synthetic series (a switch-on, a real
drop, an idle day, a burst) and fails on the model as it was; the properties then hold on
any sparse, bursty, zero-heavy or extreme series hypothesis draws.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.client_eval import known_peaks, metrics, replay, trailing_peak
from forecasting.clients import (
    Selection,
    client_services,
    clients_wide,
    load_clients,
    services_json,
    subset_csv,
)
from forecasting.demand import (
    capped_gpus,
    ceiling_curve,
    demand_for_services,
    gpus_needed,
    shape_demand,
)
from forecasting.profile import DemandProfile, mann_kendall_z, theil_sen
from forecasting.traffic import ServiceConfig, load_services

CLIENTS = Path(__file__).resolve().parents[1] / "data" / "traffic" / "clients"
START = pd.Timestamp("2025-03-03", tz="UTC")  # a Monday


def frame(values: np.ndarray, name: str = "svc") -> pd.DataFrame:
    hours = pd.date_range(START, periods=len(values), freq="h")
    return pd.DataFrame({name: np.asarray(values, float)}, index=hours)


def daily(level: float, days: int, seed: int = 0, swing: float = 0.3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(days * 24)
    return level * (1 + swing * np.sin(2 * np.pi * (t - 8) / 24)) * rng.lognormal(0, 0.1, len(t))


def next_day_centre(model: DemandProfile) -> np.ndarray:
    hours = pd.date_range(model.last_hour_ + pd.Timedelta(hours=1), periods=24, freq="h")
    return model.forecast_hours(hours)[0][0]


# ---------------------------------------------------------------- the causes


def test_a_switch_on_is_not_a_trend():
    """Idle for two days, then a steady 20k/h: the old Theil-Sen slope over those days
    (0.05 log/h) put the centre at 77,000x the rate a week later (the trend was re-read
    from the model's own extrapolated level, which confirmed it); now 0.9x."""
    y = np.concatenate([np.zeros(48), daily(20_000, 12, seed=1)])
    model = DemandProfile().fit_hourly(frame(y[:168]))
    model.update_hourly(frame(y)[168: 168 + 5 * 24])  # Monday to Friday of week 2
    centre = next_day_centre(model)  # a Saturday: not one of the idle weekdays
    assert np.median(centre) < 3 * 20_000
    assert np.median(centre) > 20_000 / 3


def test_a_real_drop_is_not_read_as_a_gap_forever():
    """A service falls from 100k/h to 1k/h and stays there. Judged against the forecast,
    every new hour was below 5 % of it, so a gap, so never seen: four days on the old model
    still said 94x the new rate. Now 0.16x: the count floor, set at fit (5,000 here), is
    coarse for a rate 100x lower until the next fit."""
    y = np.concatenate([daily(100_000, 7, seed=2), daily(1_000, 4, seed=3)])
    model = DemandProfile().fit_hourly(frame(y[:168]))
    model.update_hourly(frame(y)[168:])
    assert np.median(next_day_centre(model)) < 5_000


def test_an_idle_day_does_not_become_a_weekday_effect_of_minus_ten_logs():
    """One idle Wednesday in the fit week: in log1p space a 0 sits ~11 logs below 50k/h, so
    the weekday effect was -6.7 and the next Wednesday's normal hours drove the level to
    e^16.8: the next day's forecast was 1,756x the rate. With the count floor the idle day
    sits 3 logs down; the level still takes in a day of misfit (7.6x for a day), then
    comes back."""
    y = daily(50_000, 14, seed=4)
    y[48:72] = 0.0  # Wednesday of week 1
    model = DemandProfile().fit_hourly(frame(y[:168]))
    model.update_hourly(frame(y)[168: 168 + 3 * 24])  # through the next Wednesday
    assert np.median(next_day_centre(model)) < 10 * 50_000
    model.update_hourly(frame(y)[168 + 3 * 24: 168 + 4 * 24])  # a normal Thursday
    assert np.median(next_day_centre(model)) < 2 * 50_000


def test_count_floor_bounds_how_far_below_a_busy_hour_an_idle_one_sits():
    y = np.where(np.arange(168) % 3 == 0, 0.0, 10_000.0)
    model = DemandProfile().fit_hourly(frame(y))
    assert model.floor_[0] == pytest.approx(0.05 * 10_000)
    assert np.log(10_000 + model.floor_[0]) - np.log(model.floor_[0]) < np.log(25)
    tiny = DemandProfile().fit_hourly(frame(np.where(np.arange(168) % 5 == 0, 2.0, 0.0)))
    assert tiny.floor_[0] == 1.0  # never below one request: counts of 0-5 stay additive


def test_mann_kendall_keeps_consistent_trends_only():
    rising = np.log(np.array([[100, 130, 170, 220, 290, 370, 480]], float))
    assert mann_kendall_z(rising)[0] > 1.645
    bursty = np.log(np.array([[100, 900, 80, 120, 1500, 90, 110]], float))
    assert abs(mann_kendall_z(bursty)[0]) < 1.645
    model = DemandProfile()
    assert model._trend(bursty)[0] == 0.0
    assert model._trend(rising)[0] == pytest.approx(theil_sen(rising)[0])
    assert mann_kendall_z(np.array([[1.0, np.nan]]))[0] == 0.0


# ---------------------------------------------------------------- the ceiling


def cfg(**kw) -> ServiceConfig:
    base = {"service": "svc", "requests_per_gpu_hour": 100.0, "headroom": 0.2,
            "min_gpus": 1, "swap_limit": 4}
    return ServiceConfig(**{**base, **kw})


@given(st.lists(st.floats(0, 1e7), min_size=1, max_size=48), st.integers(0, 60),
       st.booleans())
def test_capped_gpus_never_above_the_ceiling_unless_growing(upper, ceiling, growing):
    config = cfg(growing=growing)
    out = capped_gpus(np.array(upper), config, ceiling)
    raw = gpus_needed(np.array(upper), config)
    if growing:
        assert np.array_equal(out, raw)
    else:
        assert np.all(out <= max(ceiling, config.min_gpus))
        assert np.all(out == np.minimum(raw, max(ceiling, config.min_gpus)))


@given(st.lists(st.integers(0, 80), min_size=1, max_size=30), st.integers(0, 8))
def test_ceiling_curve_is_the_largest_swap_feasible_curve_under_the_cap(cap, swap):
    out = ceiling_curve(cap, swap)
    brute = [min(c + swap * abs(t - j) for j, c in enumerate(cap)) for t in range(len(cap))]
    assert out.tolist() == brute
    assert np.all(out <= np.array(cap))
    assert np.all(np.abs(np.diff(out)) <= swap)


@given(st.lists(st.integers(0, 80), min_size=1, max_size=30),
       st.lists(st.integers(0, 80), min_size=30, max_size=30), st.integers(0, 8))
def test_shaped_demand_under_a_falling_ceiling_stays_under_it(raw, cap, swap):
    """An old peak leaving the trailing week lowers the ceiling within the plan: shaping a
    demand capped by `capped_gpus` never lifts it back above the ceiling at any step."""
    cap = np.array(cap[: len(raw)])
    config = cfg(requests_per_gpu_hour=1.0, headroom=0.0, min_gpus=0, swap_limit=swap)
    capped = capped_gpus(np.array(raw, float), config, cap)
    shaped = shape_demand(capped, swap)
    assert np.all(np.array(shaped) <= cap)


def test_known_peaks_are_the_seen_part_of_each_future_trailing_week():
    need = np.arange(400, dtype=float)
    need[100] = 1000.0
    out = known_peaks(need, 300, 24)
    # hour 300 + k looks back to 132 + k: the 1000 at hour 100 is gone, the rest rises to 299
    assert out.tolist() == [299] * 24
    need[140] = 5000.0
    out = known_peaks(need, 300, 24)
    assert out[:9].tolist() == [5000] * 9 and out[9:].tolist() == [299] * 15


@st.composite
def sparse_series(draw) -> np.ndarray:
    """8 days of hourly counts: mostly idle, small counts, bursts, up to a billion."""
    n = 8 * 24
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    idle = draw(st.floats(0.0, 0.98))
    scale = draw(st.sampled_from([1.0, 5.0, 300.0, 1e5, 1e9]))
    base = rng.poisson(scale * rng.lognormal(0, 1, n)) if scale < 1e6 else \
        scale * rng.lognormal(0, 1, n)
    bursts = rng.random(n) < draw(st.floats(0.0, 0.1))
    y = np.where(rng.random(n) < idle, 0.0, base.astype(float))
    y = np.where(bursts, y * draw(st.floats(1.0, 1000.0)), y)
    y[rng.integers(0, n)] = max(y.max(), 1.0)  # at least one request somewhere
    return y


@settings(max_examples=25, deadline=None)
@given(sparse_series(), st.integers(1, 6), st.sampled_from([0.9, 0.95, 0.99]))
def test_demand_never_exceeds_the_trailing_week_peak(y, swap, quantile):
    """Any sparse, bursty, zero-heavy or extreme history: finite demand, within the swap
    limit, never above the static reservation of the trailing week's peak."""
    config = cfg(requests_per_gpu_hour=max(float(y.max()), 1.0) / 20, swap_limit=swap)
    model = DemandProfile(quantile=quantile).fit_hourly(frame(y))
    centre, upper = model.forecast_hours(pd.date_range(model.last_hour_, periods=25,
                                                       freq="h")[1:])
    assert np.all(np.isfinite(centre)) and np.all(np.isfinite(upper))
    assert np.all(upper >= centre)
    demand = demand_for_services(model, [config], model.last_hour_ + pd.Timedelta(hours=1),
                                 24)["svc"]
    static = int(gpus_needed([np.nanmax(y[-168:])], config)[0])
    assert max(demand) <= static
    assert min(demand) >= config.min_gpus
    assert np.all(np.abs(np.diff(demand)) <= swap)


def test_growing_lifts_the_ceiling():
    """A service doubling every few days: capped, demand stops at last week's peak; marked
    growing, it follows the forecast above it."""
    y = 1_000 * np.exp(np.arange(14 * 24) / 90.0) * daily(1.0, 14, seed=5, swing=0.1)
    model = DemandProfile().fit_hourly(frame(y))
    start = model.last_hour_ + pd.Timedelta(hours=1)
    config = cfg(requests_per_gpu_hour=float(y.max()) / 20, swap_limit=60)
    capped = demand_for_services(model, [config], start, 24)["svc"]
    lifted = demand_for_services(model, [replace(config, growing=True)], start, 24)["svc"]
    static = int(gpus_needed([y[-168:].max()], config)[0])
    assert max(capped) == static
    assert max(lifted) > static


# ---------------------------------------------------------------- the replay


def test_bundled_client_sizing_is_the_written_rule():
    """services.json is rebuilt, byte for byte in values, from the bundled rows (SELECTION.md
    step 4), and every client's peak needs 4-60 GPUs."""
    wide = clients_wide(load_clients(str(CLIENTS / "servegen_clients.csv")))
    selection = json.loads((CLIENTS / "selection.json").read_text())
    names = selection["reported"] + selection["tuning"]
    assert len(selection["reported"]) == 50 and len(selection["tuning"]) == 20
    assert not set(selection["reported"]) & set(selection["tuning"])
    assert client_services(wide, names) == load_services(CLIENTS / "services.json")
    for name, config in client_services(wide, names).items():
        assert 4 <= gpus_needed([wide[name].max()], config)[0] <= 60


def test_the_rebuild_recipe_writes_the_bundled_files_byte_for_byte():
    """SOURCE.md's recipe: services_json and subset_csv, given the bundled rows and the
    selection, write services.json and servegen_clients.csv exactly as bundled."""
    rows = load_clients(str(CLIENTS / "servegen_clients.csv"))
    chosen = json.loads((CLIENTS / "selection.json").read_text())
    selection = Selection(tuple(chosen["reported"]), tuple(chosen["tuning"]))
    configs = client_services(clients_wide(rows), [*selection.reported, *selection.tuning])
    assert services_json(configs) == (CLIENTS / "services.json").read_text()
    assert subset_csv(rows, selection) == (CLIENTS / "servegen_clients.csv").read_text()


def test_replay_holds_at_most_the_static_peak_or_a_swap_limited_fall():
    wide = clients_wide(load_clients(str(CLIENTS / "servegen_clients.csv")))
    names = json.loads((CLIENTS / "selection.json").read_text())["tuning"][:4]
    configs = load_services(CLIENTS / "services.json")
    results = replay(wide[names], {n: configs[n] for n in names})
    for r in results:
        held, static = r.held["profile"], r.held["static-peak"]
        swap = configs[r.service].swap_limit
        assert np.all(held <= static)
        assert np.all(np.abs(np.diff(held)) <= swap)
        full_need = np.concatenate([np.full(168, np.nan), r.need])
        assert static[30] == trailing_peak(
            _need_all(wide[r.service].to_numpy(), configs[r.service]), 168 + 30)
        assert full_need.shape[0] == 336
    table = metrics(results)
    assert set(table.method) == {"profile", "seasonal-max", "seasonal-naive", "static-peak"}
    static_rows = table[table.method == "static-peak"]
    assert np.allclose(static_rows.held_vs_static, 1.0)


def _need_all(requests: np.ndarray, config: ServiceConfig) -> np.ndarray:
    return gpus_needed(requests, config).astype(float)


def test_profile_warns_once_per_thing_and_still_writes(tmp_path):
    """Unlisted traffic, defaulted settings, under a week of history: one stderr line each."""
    import typer
    from typer.testing import CliRunner

    from pipelines.commands_profile import register

    app = typer.Typer()
    register(app)
    hours = pd.date_range(START, periods=96, freq="h")
    rows = pd.concat([pd.DataFrame({"timestamp": hours.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                    "service": name, "requests": daily(500, 4, seed=i)})
                      for i, name in enumerate(["chat", "extra"])])
    traffic = tmp_path / "traffic.csv"
    rows.to_csv(traffic, index=False)
    services = tmp_path / "services.json"
    services.write_text(json.dumps({"services": [
        {"service": "chat", "requests_per_gpu_hour": 100, "swap_limit": 2}]}))
    out = tmp_path / "PROFILE.json"
    result = CliRunner().invoke(app, ["profile", str(traffic), "--services", str(services),
                                      "--start", "2025-03-07T00:00:00Z", "--out", str(out)])
    assert result.exit_code == 0, result.output
    warnings = [x for x in result.stderr.splitlines() if x.startswith("warning:")]
    assert len(warnings) == 3
    assert "'extra' has traffic but no entry" in warnings[0]
    assert "does not set headroom, min_gpus, priority" in warnings[1]
    assert "96 hours of history, less than a week" in warnings[2]
    entry = json.loads(out.read_text())["services"][0]
    assert entry["service"] == "chat"
    assert max(entry["demand"]) <= entry["ceiling_gpus"]
    assert entry["ceiling_gpus"] == gpus_needed([rows[rows.service == "chat"].requests.max()],
                                                cfg(requests_per_gpu_hour=100))[0]


def test_day_ahead_replay_plans_each_day_once_and_stays_under_the_static_peak():
    from benchmarks.client_eval import replay_day_ahead

    wide = clients_wide(load_clients(str(CLIENTS / "servegen_clients.csv")))
    names = json.loads((CLIENTS / "selection.json").read_text())["tuning"][-3:]
    configs = load_services(CLIENTS / "services.json")
    results = replay_day_ahead(wide[names].iloc[: 168 + 48], {n: configs[n] for n in names})
    for r in results:
        static = r.held["static-peak"]
        assert len(static) == 48
        assert len(set(static[:24])) == 1 and len(set(static[24:])) == 1  # one per day
        assert np.all(r.held["profile"] <= static)
        assert np.all(np.abs(np.diff(r.held["profile"])) <= configs[r.service].swap_limit)


@pytest.mark.parametrize("args, field", [(["--set", "everything"], "set"),
                                         (["--clients", "nowhere"], "selection.json")])
def test_profile_clients_bad_input_is_one_line_and_no_output(tmp_path, args, field):
    import typer
    from typer.testing import CliRunner

    from pipelines.commands_profile import register

    app = typer.Typer()
    register(app)
    result = CliRunner().invoke(app, ["profile-clients", *args, "--out-dir", str(tmp_path)])
    assert result.exit_code == 2
    lines = [x for x in result.output.splitlines() if x.strip()]
    assert len(lines) == 1 and field in lines[0]
    assert not list(tmp_path.iterdir())
