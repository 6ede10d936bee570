"""What demand mapping reports when it refuses input, and `current` in demand_for_services.

Written for the survivors of mutation testing (docs/testing.md): the project promises one
error line naming the job and the field, so the tests check them, not just the exception.
"""

from __future__ import annotations

import pandas as pd
import pytest

from allocator.core.errors import InputError
from benchmarks.profile_eval import synthetic_hourly
from forecasting.demand import demand_for_services, gpus_needed, shape_demand
from forecasting.profile import DemandProfile
from forecasting.traffic import ServiceConfig


def chat(**kw) -> ServiceConfig:
    return ServiceConfig(**{"service": "chat", "requests_per_gpu_hour": 1000.0, **kw})


@pytest.mark.parametrize("rate", [-1.0, float("nan"), float("inf")])
def test_a_bad_rate_names_the_service_and_the_field(rate: float) -> None:
    with pytest.raises(InputError, match="request rates must be finite and >= 0") as err:
        gpus_needed([10.0, rate], chat())
    assert err.value.job == "chat" and err.value.field == "requests"


def test_shape_demand_says_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="swap_limit must be >= 0"):
        shape_demand([1, 2], -1)
    with pytest.raises(ValueError, match="raw demand must be >= 0"):
        shape_demand([1, -2], 1)


@pytest.fixture(scope="module")
def fitted() -> tuple[DemandProfile, pd.Timestamp, dict[str, ServiceConfig]]:
    wide = synthetic_hourly(1, 14, seed=5)
    service = wide.columns[0]
    model = DemandProfile().fit_hourly(wide)
    config = ServiceConfig(service=service, requests_per_gpu_hour=float(wide[service].max()) / 4,
                           swap_limit=1)
    return model, wide.index[-1] + pd.Timedelta(hours=1), {service: config}


def test_a_service_without_history_is_named(fitted) -> None:
    model, start, _ = fitted
    with pytest.raises(InputError, match="no traffic history for this service") as err:
        demand_for_services(model, [chat(service="other")], start, 4)
    assert err.value.job == "other" and err.value.field == "service"


def test_current_gpus_make_the_curve_fall_no_faster_than_the_swap_limit(fitted) -> None:
    model, start, configs = fitted
    (service,) = configs
    free = demand_for_services(model, configs, start, 24)[service]
    held = max(free) + 5
    from_current = demand_for_services(model, configs, start, 24, current={service: held})
    curve = from_current[service]
    assert curve[0] == held - 1  # one GPU released per step, from what is held now
    assert all(a >= b for a, b in zip(curve, free, strict=True))
    assert curve != free


def test_the_step_length_is_passed_to_the_forecast(fitted) -> None:
    model, start, configs = fitted
    (service,) = configs
    hourly = demand_for_services(model, configs, start, 48)[service]
    explicit = demand_for_services(model, configs, start, 48, step_minutes=60)[service]
    half_hours = demand_for_services(model, configs, start, 48, step_minutes=30)[service]
    assert hourly == explicit
    assert half_hours != hourly  # 48 half-hours span one day, 48 hours two
