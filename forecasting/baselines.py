"""Baselines the realtime profile must beat, replayed the way the profile is.

`seasonal_max`: each hour's forecast is that hour-of-day's maximum over the trailing 7
days (168 hours) of observed traffic, times (1 + headroom), mapped to GPUs by the service's
own rule (`forecasting.demand.gpus_needed`, which keeps the service's headroom spare too)
and shaped to its swap limit. It is the forecast an operator writes on a whiteboard:
"provision for the worst this hour has been all week". It rarely falls short and holds
many GPU-hours; the profile should hold markedly fewer at a comparable shortfall
(`tests/test_quality.py` checks it on the ServeGen week).

The replay matches `benchmarks/profile_eval.py`'s replay: every hour, forecast the next
`horizon` hours, shape them from what is held now, hold the first step (moving at most
the swap limit), then observe the hour.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from forecasting.demand import gpus_needed, shape_demand
from forecasting.traffic import ServiceConfig

WEEK = 168
DAY = 24


def seasonal_max_rates(history: np.ndarray, horizon: int = DAY, days: int = 7,
                       headroom: float = 0.0) -> np.ndarray:
    """Rates for the `horizon` hours after `history` (hourly, NaN = unknown, oldest first).

    Hour h ahead gets the maximum of the last `days` observations at the same hour of day
    (history[-24 + h % 24], history[-48 + h % 24], ...), times (1 + headroom); an hour with
    no observation in the window falls back on the window's overall maximum (0 if none).
    """
    window = np.asarray(history, dtype=float)[-days * DAY:]
    pad = (-len(window)) % DAY  # align the window's end to a whole day
    window = np.concatenate([np.full(pad, np.nan), window]).reshape(-1, DAY)
    with np.errstate(all="ignore"):
        by_hour = np.nanmax(np.where(np.isnan(window), -np.inf, window), axis=0)
    overall = by_hour.max() if np.isfinite(by_hour).any() else 0.0
    by_hour = np.where(np.isfinite(by_hour), by_hour, max(overall, 0.0))
    return by_hour[np.arange(horizon) % DAY] * (1.0 + headroom)


@dataclass(frozen=True)
class Held:
    """One service's replay: GPUs the actual traffic needed and GPUs held, per hour."""

    service: str
    known: np.ndarray   # the hour has traffic data (gaps are left out of the metrics)
    need: np.ndarray
    held: np.ndarray

    @property
    def gpu_hours(self) -> int:
        return int(self.held[self.known].sum())

    @property
    def shortfall_pct(self) -> float:
        need = self.need[self.known]
        return 100.0 * np.maximum(need - self.held[self.known], 0).sum() / max(need.sum(), 1)


def replay_seasonal_max(wide: pd.DataFrame, services: Mapping[str, ServiceConfig],
                        fit_hours: int = WEEK, horizon: int = DAY,
                        headroom: float = 0.0) -> list[Held]:
    """Replay the hours after `fit_hours` of `wide` (requests per hour, one column each)."""
    out = []
    for name, cfg in services.items():
        if name not in wide.columns:
            continue
        series = wide[name].to_numpy(float)
        actual = series[fit_hours:]
        known = ~np.isnan(actual)
        need = np.where(known, gpus_needed(np.nan_to_num(actual), cfg), 0)
        held = np.zeros(len(actual), dtype=int)
        for t in range(len(actual)):
            rates = seasonal_max_rates(series[: fit_hours + t], horizon, headroom=headroom)
            raw = gpus_needed(rates, cfg)
            previous = int(held[t - 1]) if t else None
            first = shape_demand(raw, cfg.swap_limit, previous)[0]
            if previous is not None:
                first = int(np.clip(first, previous - cfg.swap_limit,
                                    previous + cfg.swap_limit))
            held[t] = first
        out.append(Held(name, known, need.astype(int), held))
    return out


def matched_seasonal_max(wide: pd.DataFrame, services: Mapping[str, ServiceConfig],
                         shortfall_pct: Mapping[str, float], fit_hours: int = WEEK,
                         step: float = 0.05, steps: int = 21) -> dict[str, Held]:
    """Per service, the seasonal maximum at the least headroom (0, step, 2 step, ...) whose
    shortfall is no more than `shortfall_pct[service]`: what the baseline must hold to be
    as safe as the forecast it is compared with. Services it never matches are left out.
    """
    found: dict[str, Held] = {}
    for k in range(steps):
        for held in replay_seasonal_max(wide, services, fit_hours, headroom=k * step):
            if held.service in shortfall_pct and held.service not in found \
                    and held.shortfall_pct <= shortfall_pct[held.service] + 1e-12:
                found[held.service] = held
        if len(found) == len(shortfall_pct):
            break
    return found
