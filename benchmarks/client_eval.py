"""Per-client replay: the profile against the reservations a team would otherwise make.

Each test hour every method forecasts the next 24 hours of GPUs from everything before
it, the curve is shaped under the swap limit from what is held now, and the first step is
held (receding horizon, as `profile_eval.replay`); the profile is recalibrated with each
hour. Methods:

- `static-peak`: the peak need of the 168 hours before the hour (what the baselines reserve);
- `seasonal-max`: each of the next 24 hours gets the maximum need at its hour of day over
  the trailing 7 days (need already carries the service's headroom), shaped;
- `seasonal-naive`: last week's same hour, shaped;
- `profile`: the DemandProfile's upper curve in GPUs, capped at `static-peak` unless the
  service is marked growing (`demand.capped_gpus`), shaped.

Need is the GPU mapping of the actual hour; NaN hours (trace gaps) are left out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from allocator.core.markdown import table as markdown_table
from forecasting.demand import (
    capped_gpus,
    demand_for_services,
    gpus_needed,
    hold_next,
    shape_demand,
)
from forecasting.profile import DAY, WEEK, DemandProfile, _quiet
from forecasting.traffic import ServiceConfig

METHODS = ("profile", "seasonal-max", "seasonal-naive", "static-peak")


@dataclass(frozen=True)
class ClientReplay:
    """One service's replayed hours: the GPUs needed and the GPUs each method held."""

    service: str
    need: np.ndarray              # GPUs the actual hour needed (NaN = trace gap)
    held: dict[str, np.ndarray]   # GPUs held per method


def trailing_peak(need: np.ndarray, t: int) -> int:
    """The peak need over the 168 hours before hour t (0 when none is known)."""
    window = need[max(t - WEEK, 0): t]
    window = window[~np.isnan(window)]
    return int(window.max()) if window.size else 0


def known_peaks(need: np.ndarray, t: int, horizon: int) -> np.ndarray:
    """For each of the next `horizon` hours, the peak need of its trailing week seen by hour t.

    Hour t + k's trailing week is [t + k - 168, t + k); of it, [t + k - 168, t) is known at
    t, and hours not yet seen can only raise the peak: this is the least it will be.
    """
    window = np.nan_to_num(need[max(t - WEEK, 0): t], nan=0.0)
    window = np.concatenate([np.zeros(WEEK - len(window)), window])
    suffix = np.maximum.accumulate(window[::-1])[::-1]  # suffix[k] = max(window[k:])
    keep = np.minimum(np.arange(horizon), WEEK - DAY)
    return suffix[keep].astype(np.int64)


def replay(wide: pd.DataFrame, services: Mapping[str, ServiceConfig],
           fit_hours: int = WEEK, horizon: int = DAY,
           model: DemandProfile | None = None) -> list[ClientReplay]:
    """Fit on the first `fit_hours` of `wide` (requests per hour), replay the rest."""
    model = model if model is not None else DemandProfile()
    names = [s for s in services if s in wide.columns]
    wide = wide.loc[:, names]
    model.fit_hourly(wide.iloc[:fit_hours])
    values = wide.to_numpy(float).T
    need = np.stack([_need(values[i], services[n]) for i, n in enumerate(names)])
    n_test = len(wide) - fit_hours
    held = {m: np.zeros((len(names), n_test), dtype=np.int64) for m in METHODS}
    for k in range(n_test):
        t = fit_hours + k
        _, up24 = model.forecast_hours(pd.date_range(wide.index[t], periods=horizon,
                                                     freq="h"))
        for i, name in enumerate(names):
            cfg = services[name]
            static = trailing_peak(need[i], t)
            ahead = np.arange(t, t + horizon)
            lags = ahead[:, None] - DAY * np.arange(1, 8)[None, :]  # all before t
            with np.errstate(all="ignore"), _quiet():
                smax = np.nan_to_num(np.nanmax(np.where(lags >= 0, need[i][np.maximum(lags, 0)],
                                                        np.nan), axis=1))
            naive = need[i][np.clip(ahead - WEEK, 0, None)]
            raw = {
                "profile": capped_gpus(up24[i], cfg, known_peaks(need[i], t, horizon)),
                "seasonal-max": smax.astype(np.int64),
                "seasonal-naive": np.nan_to_num(naive).astype(np.int64),
            }
            for method, curve in raw.items():
                prev = held[method][i, k - 1] if k else None
                held[method][i, k] = hold_next(curve, cfg.swap_limit, prev)
            held["static-peak"][i, k] = static
        model.update_hourly(wide.iloc[t: t + 1])
    return [ClientReplay(name, need[i, fit_hours:], {m: held[m][i] for m in METHODS})
            for i, name in enumerate(names)]


def replay_day_ahead(wide: pd.DataFrame, services: Mapping[str, ServiceConfig],
                     fit_hours: int = WEEK, quantile: float = 0.95,
                     floor: float = 0.05) -> list[ClientReplay]:
    """As `gpuplan profile` is used for a daily plan: at each midnight, fit on every hour
    before it and hold the day's 24-step demand as planned (no hourly replanning).

    The profile's demand comes from `demand_for_services` (the command's own path,
    ceiling included), shaped from what was held at 23:00; seasonal max and seasonal naive
    are shaped the same way from their own holdings; the static peak is the trailing
    week's peak need at midnight, held all day.
    """
    names = [s for s in services if s in wide.columns]
    wide = wide.loc[:, names]
    values = wide.to_numpy(float).T
    need = np.stack([_need(values[i], services[n]) for i, n in enumerate(names)])
    n_test = len(wide) - fit_hours
    held = {m: np.zeros((len(names), n_test), dtype=np.int64) for m in METHODS}
    for d in range(0, n_test, DAY):
        t = fit_hours + d
        span = min(DAY, n_test - d)
        model = DemandProfile(quantile=quantile, floor=floor).fit_hourly(wide.iloc[:t])
        current = {n: int(held["profile"][i, d - 1]) for i, n in enumerate(names) if d}
        demand = demand_for_services(model, services, wide.index[t], span, current=current)
        for i, name in enumerate(names):
            cfg = services[name]
            ahead = np.arange(t, t + span)
            lags = ahead[:, None] - DAY * np.arange(1, 8)[None, :]
            with np.errstate(all="ignore"), _quiet():
                smax = np.nan_to_num(np.nanmax(need[i][lags], axis=1)).astype(np.int64)
            naive = np.nan_to_num(need[i][ahead - WEEK]).astype(np.int64)
            held["profile"][i, d: d + span] = demand[name]
            for method, curve in (("seasonal-max", smax), ("seasonal-naive", naive)):
                prev = int(held[method][i, d - 1]) if d else None
                held[method][i, d: d + span] = shape_demand(curve, cfg.swap_limit, prev)
            held["static-peak"][i, d: d + span] = trailing_peak(need[i], t)
    return [ClientReplay(name, need[i, fit_hours:], {m: held[m][i] for m in METHODS})
            for i, name in enumerate(names)]


def _need(requests: np.ndarray, cfg: ServiceConfig) -> np.ndarray:
    out = np.full(len(requests), np.nan)
    ok = ~np.isnan(requests)
    out[ok] = gpus_needed(requests[ok], cfg)
    return out


def metrics(results: list[ClientReplay]) -> pd.DataFrame:
    """Per service and method: GPU-hours held, vs static peak, shortfall, worst day."""
    rows = []
    for r in results:
        known = ~np.isnan(r.need)
        need = r.need[known]
        static = r.held["static-peak"]
        days = range(0, len(r.need), DAY)
        for method in METHODS:
            held = r.held[method]
            short = np.maximum(need - held[known], 0).sum()
            day_ratio = [held[d: d + DAY].sum() / max(static[d: d + DAY].sum(), 1)
                         for d in days]
            rows.append({
                "service": r.service, "method": method,
                "gpu_hours_held": int(held[known].sum()),
                "static_gpu_hours": int(static[known].sum()),
                "held_vs_static": held[known].sum() / max(static[known].sum(), 1),
                "needed_gpu_hours": int(need.sum()),
                "shortfall_gpu_hours": int(short),
                "shortfall_pct": 100 * short / max(need.sum(), 1),
                "worst_day_vs_static": float(max(day_ratio)),
                "days_above_static": int(np.sum(np.array(day_ratio) > 1 + 1e-9)),
                "peak_need": int(need.max()) if need.size else 0,
            })
    return pd.DataFrame(rows)


def aggregate(table: pd.DataFrame) -> pd.DataFrame:
    """Per method over all services: GPU-hour weighted ratios, and the worst client-day."""
    rows = []
    for method, part in table.groupby("method", sort=False):
        rows.append({
            "method": method, "services": len(part),
            "gpu_hours_held": int(part.gpu_hours_held.sum()),
            "held_vs_static": part.gpu_hours_held.sum() / part.static_gpu_hours.sum(),
            "mean_held_vs_static": float(part.held_vs_static.mean()),
            "shortfall_pct": 100 * part.shortfall_gpu_hours.sum() / part.needed_gpu_hours.sum(),
            "worst_day_vs_static": float(part.worst_day_vs_static.max()),
            "days_above_static": int(part.days_above_static.sum()),
        })
    return pd.DataFrame(rows)


def markdown(table: pd.DataFrame, summary: pd.DataFrame) -> str:
    """One row per service (held / static peak and shortfall per method), then the aggregate."""
    methods = [m for m in METHODS if m != "static-peak"]
    head = ["service", "test-week peak need", "static GPU-h", "static short"]
    head += [f"{m} {x}" for m in methods for x in ("held/static", "short")]
    head += ["profile worst day"]
    rows = []
    for service, part in table.groupby("service", sort=False):
        p = part.set_index("method")
        cells = [service, str(p.loc["profile", "peak_need"]),
                 str(p.loc["static-peak", "static_gpu_hours"]),
                 f"{p.loc['static-peak', 'shortfall_pct']:.1f}%"]
        for m in methods:
            cells += [f"{p.loc[m, 'held_vs_static']:.3f}", f"{p.loc[m, 'shortfall_pct']:.1f}%"]
        cells.append(f"{p.loc['profile', 'worst_day_vs_static']:.3f}")
        rows.append(cells)
    totals = [[r.method, r.services, r.gpu_hours_held, f"{r.held_vs_static:.3f}",
               f"{r.mean_held_vs_static:.3f}", f"{r.shortfall_pct:.2f}%",
               f"{r.worst_day_vs_static:.3f}", r.days_above_static]
              for _, r in summary.iterrows()]
    return markdown_table(head, rows) + "\n" + markdown_table(
        ["method", "services", "GPU-h held", "held / static (GPU-h weighted)",
         "mean of held / static", "shortfall (of needed GPU-h)", "worst client-day",
         "client-days above static"], totals)


def write_clients(clients: Path, which: str, *, pools: bool, quantile: float, floor: float,
                  day_ahead: bool, lift_ceiling: bool, out_dir: Path, traffic: str,
                  services: str, echo: Callable[[str], object]) -> Path:
    """`gpuplan profile-clients`: replay the selected clients (and, for the reported set,
    the pooled series) and write the per-client table and the aggregate; the files' stem.
    InputError naming the file, client and field on bad input."""
    from allocator.core.errors import InputError
    from allocator.core.readers import read_json
    from benchmarks.profile_eval import write_table
    from forecasting.clients import clients_wide, load_clients
    from forecasting.traffic import hourly, load_services, load_traffic

    if which not in ("reported", "tuning"):
        raise InputError("expected reported or tuning", field="set")
    selection = read_json(clients / "selection.json")
    names = selection.get(which) if isinstance(selection, dict) else None
    if not isinstance(names, list) or not names:
        raise InputError(f"no {which!r} list", file=str(clients / "selection.json"),
                         field=which)
    configs = load_services(clients / "services.json")
    if lift_ceiling:
        configs = {n: replace(c, growing=True) for n, c in configs.items()}
    unsized = [n for n in names if n not in configs]
    if unsized:
        raise InputError("selected but not in services.json", job=unsized[0],
                         file=str(clients / "services.json"), field="service")
    wide = clients_wide(load_clients(str(clients / "servegen_clients.csv")))
    absent = [n for n in names if n not in wide.columns]
    if absent:
        raise InputError("selected but has no rows", job=absent[0],
                         file=str(clients / "servegen_clients.csv"), field="client")
    pooled = None
    if pools and which == "reported":
        pooled = (hourly(load_traffic(traffic)), load_services(services))

    def run(frame: pd.DataFrame, sized: dict) -> pd.DataFrame:
        if day_ahead:
            return metrics(replay_day_ahead(frame, sized, quantile=quantile, floor=floor))
        return metrics(replay(frame, sized, model=DemandProfile(quantile=quantile, floor=floor)))

    table = run(wide[names], {n: configs[n] for n in names})
    summary = aggregate(table)
    text = markdown(table, summary)
    if pooled is not None:
        pool_table = run(pooled[0], pooled[1])
        text += "\nPooled series (" + traffic + "):\n\n" + markdown(
            pool_table, aggregate(pool_table))
        table = pd.concat([table, pool_table], ignore_index=True)
    stem = out_dir / f"profile_clients_{which}{'_day_ahead' if day_ahead else ''}"
    write_table(table, stem, text)
    write_table(summary, stem.with_name(stem.name + "_summary"))
    echo(text)
    return stem
