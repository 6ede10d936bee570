"""Requests per hour -> the GPU `demand` list a realtime job can follow under its swap limit.

The allocator's swap constraint lets a realtime job change its GPU count by at most
`swap_limit` per step, so a demand list that jumps faster would be short by construction.
We shape it here, rising early before a peak and falling slowly after, never below the
raw need: forecast and optimiser then agree on switching cost.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from allocator.errors import InputError
from allocator.limits import MAX_DEMAND
from forecasting.traffic import ServiceConfig

# A rate a floating-point hair above a whole number of GPUs does not buy another GPU.
_REL = 1e-12


def gpus_needed(requests_per_hour: np.ndarray | Sequence[float],
                config: ServiceConfig) -> np.ndarray:
    """Whole GPUs to serve a rate with `headroom` of capacity kept spare, never below min_gpus.

    One GPU serves `requests_per_gpu_hour`; keeping a fraction `headroom` spare means it is
    loaded to (1 - headroom) of that.
    """
    rate = np.asarray(requests_per_hour, dtype=float)
    if np.any(~np.isfinite(rate)) or np.any(rate < 0):
        raise InputError("request rates must be finite and >= 0", job=config.service,
                         field="requests")
    per_gpu = config.requests_per_gpu_hour * (1.0 - config.headroom)
    with np.errstate(over="ignore", invalid="ignore"):
        wanted = np.ceil(rate / per_gpu * (1 - _REL))
    if np.any(~(wanted <= MAX_DEMAND)):  # also inf and NaN: never cast those to int64
        raise InputError(f"the traffic needs more than {MAX_DEMAND} GPUs at some hour, beyond "
                         "gpuplan's limit (check requests and requests_per_gpu_hour)",
                         job=config.service, field="requests_per_gpu_hour")
    need = wanted.astype(np.int64)
    need = np.where(rate > 0, np.maximum(need, 1), need)  # any traffic needs a GPU
    return np.maximum(need, config.min_gpus)


def shape_demand(raw: Sequence[int] | np.ndarray, swap_limit: int,
                 current: int | None = None) -> list[int]:
    """The smallest list >= `raw` whose steps change by at most `swap_limit`.

    It is the upper envelope max_j(raw[j] - swap_limit * |t - j|): a backward pass raises
    each step to within reach of the next (rising early), a forward pass keeps each step
    within reach of the previous (falling slowly). With `current` (GPUs held just before
    step 0) the list also falls from it no faster than the limit allows.
    """
    if swap_limit < 0:
        raise ValueError("swap_limit must be >= 0")
    out = [int(x) for x in raw]
    if any(x < 0 for x in out):
        raise ValueError("raw demand must be >= 0")
    if not out:
        return out
    for t in range(len(out) - 2, -1, -1):
        out[t] = max(out[t], out[t + 1] - swap_limit)
    previous = current
    for t in range(len(out)):
        if previous is not None:
            out[t] = max(out[t], previous - swap_limit)
        previous = out[t]
    return out


def demand_for_services(model: object, services: Mapping[str, ServiceConfig]
                        | Iterable[ServiceConfig], start: pd.Timestamp | str, steps: int,
                        step_minutes: int = 60,
                        current: Mapping[str, int] | None = None) -> dict[str, list[int]]:
    """Per service, the shaped GPU demand for a plan's steps from a fitted DemandProfile.

    The upper-quantile forecast is converted to GPUs and shaped under the service's
    swap_limit; `current` gives GPUs held before step 0 where known.
    """
    configs = list(services.values()) if isinstance(services, Mapping) else list(services)
    _, upper = model.forecast(start, steps, step_minutes)
    index = {s: i for i, s in enumerate(model.services_)}
    current = current or {}
    out = {}
    for config in configs:
        if config.service not in index:
            raise InputError("no traffic history for this service", job=config.service,
                             field="service")
        raw = gpus_needed(upper[index[config.service]], config)
        out[config.service] = shape_demand(raw, config.swap_limit,
                                           current.get(config.service))
    return out


def fit_services(traffic: str | os.PathLike[str], services: str | os.PathLike[str],
                 quantile: float):
    """The services' configs and a profile fitted on their traffic: one way for every command.

    A service with no traffic rows is bad input, named by the traffic file and service.
    """
    from forecasting.profile import DemandProfile
    from forecasting.traffic import hourly, load_services, load_traffic

    configs = load_services(services)
    rows = load_traffic(traffic)
    rows = rows[rows["service"].isin(list(configs))]
    missing = [name for name in configs if name not in set(rows["service"])]
    if missing:
        raise InputError("no traffic rows for this service", file=str(traffic),
                         job=missing[0], field="service")
    model = DemandProfile(quantile=quantile)
    try:
        model.fit_hourly(hourly(rows, model.gap_fraction))
    except InputError as err:
        raise err.located(str(traffic)) from None
    return model, configs
