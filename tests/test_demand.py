"""Requests -> GPUs and swap-limit shaping: the demand list a realtime job can follow exactly."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from allocator.core.envelope import swap_envelope, target_curve
from allocator.core.errors import InputError
from benchmarks.profile_eval import synthetic_hourly
from forecasting.demand import demand_for_services, gpus_needed, shape_demand
from forecasting.profile import DemandProfile
from forecasting.traffic import ServiceConfig

raw_lists = st.lists(st.integers(0, 40), min_size=0, max_size=48)
limits = st.integers(0, 6)


def envelope(raw: list[int], limit: int, current: int | None) -> list[int]:
    """Slow reference: the smallest limit-Lipschitz majorant, by brute force over all pairs."""
    points = list(enumerate(raw))
    if current is not None:
        points.append((-1, current))
    return [max([raw[t]] + [v - limit * abs(t - j) for j, v in points]) for t in range(len(raw))]


@given(raw_lists, limits)
def test_shaped_follows_the_swap_limit_and_never_falls_short(raw, limit):
    shaped = shape_demand(raw, limit)
    assert len(shaped) == len(raw)
    assert all(s >= r for s, r in zip(shaped, raw, strict=True))
    assert all(abs(b - a) <= limit for a, b in itertools.pairwise(shaped))


@given(raw_lists, limits, st.none() | st.integers(0, 40))
def test_shaped_is_the_smallest_such_list(raw, limit, current):
    assert shape_demand(raw, limit, current) == envelope(raw, limit, current)


@given(raw_lists.filter(bool), limits, st.integers(0, 40))
def test_shaped_falls_from_current_no_faster_than_the_limit(raw, limit, current):
    shaped = shape_demand(raw, limit, current)
    assert shaped[0] >= current - limit


def test_rises_ahead_of_a_peak():
    assert shape_demand([1, 1, 1, 1, 7, 1, 1], 2) == [1, 1, 3, 5, 7, 5, 3]
    assert shape_demand([2, 9, 2], 0) == [9, 9, 9]


def test_shape_rejects_negative_input():
    with pytest.raises(ValueError):
        shape_demand([1, 2], -1)
    with pytest.raises(ValueError):
        shape_demand([1, -2], 1)


def cfg(**kw) -> ServiceConfig:
    base = {"service": "chat", "requests_per_gpu_hour": 1000.0, "headroom": 0.2,
            "min_gpus": 1, "swap_limit": 2}
    return ServiceConfig(**{**base, **kw})


@given(st.lists(st.floats(0, 1e6, allow_nan=False), max_size=30), st.floats(0, 0.9),
       st.integers(0, 3))
def test_gpus_cover_the_rate_with_headroom(rates, headroom, min_gpus):
    c = cfg(headroom=headroom, min_gpus=min_gpus)
    gpus = gpus_needed(rates, c)
    capacity = gpus * c.requests_per_gpu_hour * (1 - headroom)
    assert np.all(capacity >= np.asarray(rates) * (1 - 1e-9))
    assert np.all(gpus >= min_gpus)
    # and not a whole GPU more than needed
    spare = (gpus - 1) * c.requests_per_gpu_hour * (1 - headroom)
    assert np.all((spare < np.asarray(rates) * (1 + 1e-9)) | (gpus == min_gpus))


def test_gpus_examples():
    c = cfg()
    assert gpus_needed([0, 800, 801, 8000], c).tolist() == [1, 1, 2, 10]
    with pytest.raises(InputError):
        gpus_needed([float("nan")], c)


def test_demand_for_services_is_shaped_and_ready_for_a_scenario():
    wide = synthetic_hourly(2, 14, seed=3)
    model = DemandProfile().fit_hourly(wide)
    configs = {s: cfg(service=s, requests_per_gpu_hour=float(wide[s].max()) / 6, swap_limit=1)
               for s in wide.columns}
    start = wide.index[-1] + pd.Timedelta(hours=1)
    out = demand_for_services(model, configs, start, 24)
    for service, demand in out.items():
        assert len(demand) == 24 and all(isinstance(d, int) and d >= 1 for d in demand)
        assert all(abs(b - a) <= 1 for a, b in itertools.pairwise(demand))
        _, upper = model.forecast(start, 24)
        raw = gpus_needed(upper[list(wide.columns).index(service)], configs[service])
        assert all(d >= r for d, r in zip(demand, raw, strict=True))
    half = demand_for_services(model, configs, start, 48, step_minutes=30)
    assert all(len(v) == 48 for v in half.values())
    with pytest.raises(InputError, match="no traffic history"):
        demand_for_services(model, [cfg(service="other")], start, 4)


def _capped_by_max_min(raw: list[int], limit: int, start: int | None,
                       cap: list[int]) -> list[int]:
    """`swap_envelope` under a capacity as first written (max/min calls): the reference
    the comparison loops must match."""
    out = [min(x, c) for x, c in zip(raw, cap, strict=True)]
    for t in range(len(out) - 2, -1, -1):
        out[t] = max(out[t], out[t + 1] - limit)
    previous = start
    for t in range(len(out)):
        if previous is not None:
            out[t] = max(out[t], previous - limit)
        out[t] = min(out[t], cap[t])
        previous = out[t]
    return out


@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), max_size=48), limits,
       st.none() | st.integers(0, 40))
def test_envelope_under_a_capacity_is_the_max_min_recurrence(pairs, limit, start):
    raw, cap = [r for r, _ in pairs], [c for _, c in pairs]
    assert swap_envelope(raw, limit, start, cap) == _capped_by_max_min(raw, limit, start, cap)
    assert target_curve(tuple(raw), limit, start, np.array(cap, dtype=np.int64)).tolist() \
        == _capped_by_max_min(raw, limit, start, cap)
