"""Requests per hour -> the GPU `demand` list a realtime job can follow under its swap limit.

The allocator's swap constraint lets a realtime job change its GPU count by at most
`swap_limit` per step, so a demand list that jumps faster would be short by construction.
We shape it here, rising early before a peak and falling slowly after, never below the
raw need: forecast and optimiser then agree on switching cost.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from allocator.core.envelope import swap_envelope
from allocator.core.errors import InputError
from allocator.core.limits import MAX_DEMAND
from allocator.core.timeparse import to_utc
from forecasting.traffic import ServiceConfig

if TYPE_CHECKING:
    from forecasting.profile import DemandProfile

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


def capped_gpus(upper_requests: np.ndarray | Sequence[float], config: ServiceConfig,
                ceiling: int | np.ndarray | Sequence[int] | None) -> np.ndarray:
    """GPUs for a forecast's upper curve, never above `ceiling` unless the service is growing.

    `ceiling` is the trailing week's peak need (the static reservation a baseline would
    make), one number or one per step: a forecast that asks for more than the busiest hour
    of the last week is extrapolating, and on sparse, bursty traffic that extrapolation is
    what blew a day's reservation up to several times the peak. A per-step ceiling that
    falls (an old peak leaving the week) is first lowered to a curve the swap limit can
    follow (`ceiling_curve`), so the shaped demand stays under it at every step. A service
    marked `growing` lifts the cap.
    """
    raw = gpus_needed(upper_requests, config)
    if ceiling is None or config.growing:
        return raw
    cap = np.broadcast_to(np.maximum(np.asarray(ceiling, dtype=np.int64), config.min_gpus),
                          raw.shape)
    return np.minimum(raw, ceiling_curve(cap, config.swap_limit))


def ceiling_curve(cap: np.ndarray | Sequence[int], swap_limit: int) -> np.ndarray:
    """The largest list <= `cap` whose steps change by at most `swap_limit`.

    The lower envelope min_j(cap[j] + swap_limit * |t - j|), the mirror of `shape_demand`
    (the swap envelope of -cap, negated): any curve under it, shaped by `shape_demand`,
    stays under it (and so under `cap`).
    """
    flipped = [-int(c) for c in np.asarray(cap, dtype=np.int64).tolist()]
    return -np.array(swap_envelope(flipped, swap_limit), dtype=np.int64)


def shape_demand(raw: Sequence[int] | np.ndarray, swap_limit: int,
                 current: int | None = None) -> list[int]:
    """The smallest list >= `raw` whose steps change by at most `swap_limit`.

    It is the swap envelope max_j(raw[j] - swap_limit * |t - j|) (allocator.core.envelope,
    the curve the allocator follows too): rising early before a peak, falling slowly
    after, and with `current` (GPUs held just before step 0) falling from it no faster
    than the limit allows.
    """
    if swap_limit < 0:
        raise ValueError("swap_limit must be >= 0")
    out = [int(x) for x in raw]
    if any(x < 0 for x in out):
        raise ValueError("raw demand must be >= 0")
    return swap_envelope(out, swap_limit, current)


def hold_next(raw: np.ndarray, swap_limit: int, previous: int | None) -> int:
    """Receding horizon: shape the next hours from what is held now, hold the first step."""
    first = shape_demand(raw, swap_limit, previous)[0]
    if previous is None:
        return first
    return int(np.clip(first, previous - swap_limit, previous + swap_limit))


def demand_for_services(model: DemandProfile, services: Mapping[str, ServiceConfig]
                        | Iterable[ServiceConfig], start: pd.Timestamp | str, steps: int,
                        step_minutes: int = 60,
                        current: Mapping[str, int] | None = None) -> dict[str, list[int]]:
    """Per service, the shaped GPU demand for a plan's steps from a fitted DemandProfile.

    The upper-quantile forecast is converted to GPUs, capped at the trailing week's peak
    need (unless the service is `growing`) and shaped under the service's swap_limit;
    `current` gives GPUs held before step 0 where known.
    """
    configs = list(services.values()) if isinstance(services, Mapping) else list(services)
    _, upper = model.forecast(start, steps, step_minutes)
    index = {s: i for i, s in enumerate(model.services_)}
    step = pd.Timedelta(minutes=step_minutes)
    when = to_utc(start, "start")
    ahead = [int((when + step * j - model.last_hour_) / pd.Timedelta(hours=1)) - 1
             for j in range(steps)]
    peaks = np.stack([model.trailing_peak(a) for a in ahead], axis=1)
    current = current or {}
    out = {}
    for config in configs:
        if config.service not in index:
            raise InputError("no traffic history for this service", job=config.service,
                             field="service")
        i = index[config.service]
        raw = capped_gpus(upper[i], config, gpus_needed(peaks[i], config))
        out[config.service] = shape_demand(raw, config.swap_limit,
                                           current.get(config.service))
    return out


def fit_services(traffic: str | os.PathLike[str], services: str | os.PathLike[str],
                 quantile: float, warn: Callable[[str], None] | None = None):
    """The services' configs and a profile fitted on their traffic: one way for every command.

    A service with no traffic rows is bad input, named by the traffic file and service.
    `warn`, when given, receives one line per thing a user should know but that is not an
    error (`input_warnings`).
    """
    from forecasting.profile import DemandProfile
    from forecasting.traffic import hourly, load_services, load_traffic

    configs = load_services(services)
    rows = load_traffic(traffic)
    if warn is not None:
        for line in input_warnings(rows, configs, traffic, services):
            warn(line)
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


def input_warnings(rows: pd.DataFrame, configs: Mapping[str, ServiceConfig],
                   traffic: str | os.PathLike[str],
                   services: str | os.PathLike[str]) -> list[str]:
    """One line each: traffic with no service entry, settings left to defaults, short history.

    None of these stops a plan, but each changes what it holds: an unlisted service gets no
    GPUs, a default setting (headroom, min_gpus, swap limit, priority)
    may not be the team's, and under a week of history leaves hour-of-week effects and the
    trailing-week ceiling resting on less than a week.
    """
    import json

    from forecasting.traffic import ServiceConfig as Config

    lines = []
    for name in sorted(set(rows["service"]) - set(configs)):
        lines.append(f"warning: {traffic}: service {name!r} has traffic but no entry in "
                     f"{services}; it gets no GPUs")
    try:
        entries = json.loads(Path(services).read_text(encoding="utf-8"))["services"]
    except (OSError, ValueError, KeyError, TypeError):
        entries = []
    defaults = Config(service="", requests_per_gpu_hour=1.0)
    for entry in entries:
        name = str(entry.get("service", "")).strip() if isinstance(entry, Mapping) else ""
        if name not in configs:
            continue
        unset = [f for f in ("headroom", "min_gpus", "swap_limit", "priority") if f not in entry]
        if unset:
            used = ", ".join(f"{f} {getattr(defaults, f):g}" for f in unset)
            lines.append(f"warning: {services}: service {name!r} does not set "
                         f"{', '.join(unset)}; the defaults apply ({used})")
    for name, part in rows[rows["service"].isin(list(configs))].groupby("service"):
        span = (part["timestamp"].max() - part["timestamp"].min()) / pd.Timedelta(hours=1) + 1
        if span < 168:
            lines.append(f"warning: {traffic}: service {name!r} has {span:.0f} hours of "
                         "history, less than a week; its weekly profile and trailing-week "
                         "ceiling rest on what there is")
    return lines
