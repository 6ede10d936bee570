"""A real week: Philly jobs and ServeGen traffic mapped onto gpuplan's model, reproducibly.

Mapping (docs/simulate.md states it in full):
- one Philly virtual cluster, one week from `start`; arrival = hours since `start`, floored;
- gpus = num_gpus rounded up to a power of two; jobs larger than the cluster are dropped;
- true duration = ceil(duration / 1 h) steps (a 1-minute job holds its block for the hour);
- kind by shape (Philly holds only training; the allocator never reads the kind):
  >= 8 GPUs or >= 6 h is training, <= 2 GPUs and <= 1 h is quantization, else batch_inference;
- priority: Philly records none, so each job draws one from (1, 2, 3, 5, 8), seeded;
- predicted duration = true x log-normal(0, duration_sigma), median-unbiased, >= 1 step.
Realtime demand: the three ServeGen language pools, hourly; the first `history_days` fit an
hour-of-day profile (the median), the next seven are the replayed actual traffic; each
pool's 14-day hourly peak is scaled to `realtime_share / 3` of the cluster. With
`forecaster="profile"` the planner is instead given what forecasting.profile's DemandProfile
forecasts at each hour (its upper band), updated on the hours already replayed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from allocator.core.errors import InputError
from allocator.core.timeparse import parse_time
from pipelines.home import bundled
from pipelines.worlds import PRIORITIES, Service, SimJob, World, predicted

PHILLY_CSV = bundled("data/philly/philly_6c71a0_2017-10-30_3w.csv")
SERVEGEN_CSV = bundled("data/traffic/servegen_language_14d_10min_rate.csv")
POOLS: tuple[tuple[str, float, int], ...] = (
    # ServeGen pool, priority, swap limit (GPUs changed per hour)
    ("m-large", 10.0, 2),
    ("m-mid", 8.0, 2),
    ("m-small", 6.0, 1),
)


@dataclass(frozen=True)
class PhillyConfig:
    """Which slice of the trace, on which cluster, with how much prediction error."""

    vc: str = "6c71a0"
    start: str = "2017-11-06"  # a Monday
    days: int = 7
    gpus: int = 32
    realtime_share: float = 0.3  # summed pool peaks as a share of the cluster
    history_days: int = 7
    duration_sigma: float = 0.5
    seed: int = 7
    lookahead: int = 96
    forecaster: str = "naive"  # naive: hour-of-day median + level; profile: DemandProfile
    philly_csv: Path = PHILLY_CSV
    servegen_csv: Path = SERVEGEN_CSV


def read_philly(path: Path) -> pd.DataFrame:
    """The Pollux copy of the Philly trace (or an extract of it), columns checked."""
    from allocator.core.readers import read_table
    from allocator.core.timeparse import parse_times

    frame = read_table(path, dtype={"cluster": str})
    need = {"timestamp", "duration", "num_gpus", "cluster"}
    if not need <= set(frame.columns):
        raise InputError(f"expected columns {sorted(need)}", file=str(path))
    try:
        # the trace's times are naive UTC; the week bounds compare against naive times
        frame["timestamp"] = parse_times(frame["timestamp"], "timestamp").dt.tz_localize(None)
        # a job of at most ten years on at most a million GPUs: far past any trace
        for col, high in (("duration", 10 * 366 * 86400.0), ("num_gpus", float(1 << 20))):
            values = pd.to_numeric(frame[col], errors="coerce")
            bad = ~((values >= 0) & (values <= high)).to_numpy()  # NaN fails both
            if bad.any():
                row = int(np.flatnonzero(bad)[0])
                raise InputError(f"row {row + 2}: not a number from 0 to {high:g}", field=col)
            frame[col] = values
    except InputError as err:
        raise err.located(str(path)) from None
    return frame


def kind_of(gpus: int, steps: int) -> str:
    if gpus >= 8 or steps >= 6:
        return "training"
    if gpus <= 2 and steps <= 1:
        return "quantization"
    return "batch_inference"


def map_jobs(frame: pd.DataFrame, config: PhillyConfig) -> list[SimJob]:
    """The week's jobs of one virtual cluster as gpuplan batch jobs (rules above)."""
    start = parse_time(config.start, "--philly-start").tz_localize(None)
    end = start + pd.Timedelta(days=config.days)
    week = frame[(frame["cluster"] == config.vc) & (frame["timestamp"] >= start)
                 & (frame["timestamp"] < end)]
    week = week.sort_values(["timestamp", "duration", "num_gpus"], kind="stable")
    rng = np.random.default_rng([config.seed, *config.vc.encode()])
    jobs = []
    for k, row in enumerate(week.itertuples(index=False)):
        gpus = 1 << int(np.ceil(np.log2(max(int(row.num_gpus), 1))))
        steps = max(1, int(np.ceil(float(row.duration) / 3600.0)))
        priority = float(rng.choice(PRIORITIES))
        guess = predicted(rng, steps, config.duration_sigma)
        if gpus > config.gpus:
            continue
        arrival = int((row.timestamp - start) // pd.Timedelta(hours=1))
        jobs.append(SimJob(id=f"philly-{k:04d}", kind=kind_of(gpus, steps), priority=priority,
                           gpus=gpus, arrival=arrival, true_steps=steps,
                           predicted_steps=guess))
    return jobs


def hourly_traffic(path: Path) -> pd.DataFrame:
    """ServeGen's 10-minute pool rates -> hourly means, one column per pool, hour index."""
    from allocator.core.readers import read_table

    raw = read_table(path)
    cols = {f"{pool}_rate_rps": pool for pool, _, _ in POOLS}
    if not set(cols) <= set(raw.columns):
        raise InputError(f"expected columns {sorted(cols)}", file=str(path))
    hour = (raw["window_start_s"] // 3600).astype(int)
    return raw[list(cols)].rename(columns=cols).groupby(hour).mean()


def services(traffic: pd.DataFrame, config: PhillyConfig, steps: int) -> list[Service]:
    """Replayed pools: actual = the week after the history; expected = the history's
    hour-of-day median (a seasonal-naive profile), repeated past the end for look-ahead."""
    first = 24 * config.history_days
    if len(traffic) < first + steps:
        raise InputError(f"ServeGen traffic has {len(traffic)} hours; the replay needs "
                         f"{first + steps}", field="history_days")
    out = []
    per_pool = config.realtime_share * config.gpus / len(POOLS)
    for pool, priority, swap in POOLS:
        rate = traffic[pool].to_numpy(dtype=float)
        per_gpu = rate.max() / per_pool  # requests/s one GPU serves at this scale
        history = rate[:first].reshape(config.history_days, 24)
        profile = np.median(history, axis=0) / per_gpu
        hours = np.arange(steps + config.lookahead) % 24
        out.append(Service(id=pool, priority=priority, swap_limit=swap,
                           actual=rate[first : first + steps] / per_gpu,
                           expected=profile[hours]))
    return out


# ServeGen gives no date; its day `history_days` is laid on the replayed Monday.
SERVEGEN_DAY0 = "2017-10-30"


def issued_forecasts(traffic: pd.DataFrame, config: PhillyConfig,
                     steps: int) -> dict[str, np.ndarray]:
    """What `forecasting.profile.DemandProfile` would have said at each replayed hour.

    Fit on the history days, then, hour by hour, fold in the hour just gone and forecast
    the next `lookahead` hours; its upper (quantile) curve, in GPUs at this cluster's scale.
    """
    from forecasting.profile import DemandProfile

    first = 24 * config.history_days
    hours = pd.date_range(SERVEGEN_DAY0, periods=len(traffic), freq="h", tz="UTC")
    wide = traffic.set_axis(hours) * 3600.0  # requests per hour
    model = DemandProfile().fit_hourly(wide.iloc[:first])
    per_gpu = traffic.max() / (config.realtime_share * config.gpus / len(POOLS))
    out = {pool: np.empty((steps, config.lookahead)) for pool, _, _ in POOLS}
    for t0 in range(steps):
        if t0 > 0:
            model.update_hourly(wide.iloc[first + t0 - 1 : first + t0])
        _, upper = model.forecast(hours[first + t0], config.lookahead)
        for i, pool in enumerate(model.services_):
            out[pool][t0] = upper[i] / 3600.0 / per_gpu[pool]
    return out


def philly_world(config: PhillyConfig = PhillyConfig()) -> World:
    steps = 24 * config.days
    trace = read_philly(config.philly_csv)
    jobs = map_jobs(trace, config)
    if not jobs:
        span = f"{trace['timestamp'].min():%Y-%m-%d} to {trace['timestamp'].max():%Y-%m-%d}"
        raise InputError(f"no jobs of virtual cluster {config.vc!r} in the {config.days} days "
                         f"from {config.start} (this trace covers {span})",
                         file=str(config.philly_csv), field="--philly-start")
    traffic = hourly_traffic(config.servegen_csv)
    pools = services(traffic, config, steps)
    if config.forecaster == "profile":
        issued = issued_forecasts(traffic, config, steps)
        pools = [replace(p, issued=issued[p.id]) for p in pools]
    elif config.forecaster != "naive":
        raise InputError(f"unknown forecaster {config.forecaster!r}; naive or profile",
                         field="--forecaster")
    return World(name=f"philly-{config.vc}-{config.start}-g{config.gpus}", gpus=config.gpus,
                 steps=steps, jobs=tuple(jobs), services=tuple(pools), meta={"config": config})
