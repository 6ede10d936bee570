"""Real-time traffic in, hourly request rates out: loading, validation, resampling.

The column names (`timestamp`, `service`, `requests`) and the SERVICES.json fields are fixed by
FORECASTING.md; everything downstream (profile, demand, evaluation) works on the hourly
wide frame this module builds, so the messy parts of real traces are handled once, here.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from allocator.core import limits, readers
from allocator.core.errors import InputError
from allocator.core.timeparse import parse_times

TRAFFIC_COLUMNS = ("timestamp", "service", "requests")
HOUR = pd.Timedelta(hours=1)
# A window below this fraction of its service's local (24 h) median is a trace gap or an
# outage, not demand: ServeGen's m-mid pool drops from ~2,000 req/s to 0-9 req/s for hours.
GAP_FRACTION = 0.05
# ...but only where the median window holds enough requests that so few is implausible
# (Poisson: P(0 | mean 20) ~ 2e-9); a small service's quiet hours are real zeros.
GAP_MIN_COUNT = 20.0


@dataclass(frozen=True)
class ServiceConfig:
    """One real-time service's serving parameters, as SERVICES.json gives them."""

    service: str
    requests_per_gpu_hour: float
    headroom: float = 0.2
    min_gpus: int = 1
    swap_limit: int = 2
    priority: float = 1.0
    # Known to be growing: its demand may exceed the trailing week's peak (demand.capped_gpus).
    growing: bool = False


# ---------------------------------------------------------------- traffic files


def read_table(path: str | os.PathLike[str]) -> pd.DataFrame:
    """CSV (gzipped too) or Parquet by extension (FORECASTING.md), services as strings."""
    return readers.read_table(path, dtype={"service": str})


def load_traffic(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read and validate a traffic file: UTC timestamps, string services, counts >= 0 or empty."""
    try:
        return validate_traffic(read_table(path))
    except InputError as err:
        raise err.located(str(path)) from None


def validate_traffic(frame: pd.DataFrame) -> pd.DataFrame:
    """Check the contract's columns and return a clean copy (empty `requests` = a gap)."""
    missing = [c for c in TRAFFIC_COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(
            f"missing column(s) {', '.join(missing)}; expected timestamp,service,requests",
            field=missing[0],
        )
    out = frame.loc[:, list(TRAFFIC_COLUMNS)].copy()
    if out["service"].isna().any():
        row = int(np.flatnonzero(out["service"].isna())[0])
        raise InputError(f"empty service name in row {row + 2}", field="service")
    out["service"] = out["service"].astype(str).str.strip()
    if (out["service"] == "").any():
        row = int(np.flatnonzero(out["service"] == "")[0])
        raise InputError(f"empty service name in row {row + 2}", field="service")
    out["timestamp"] = parse_times(out["timestamp"], "timestamp", jobs=out["service"])
    counts = pd.to_numeric(out["requests"], errors="coerce")
    bad = counts.isna() & out["requests"].notna()
    bad |= np.isinf(counts) | (counts < 0) | (counts > limits.MAX_REQUESTS)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"row {row + 2}: {out['requests'].iloc[row]!r} is not a count >= 0 and <= "
            f"{limits.MAX_REQUESTS:g} (leave the cell empty for a gap)",
            job=out["service"].iloc[row], field="requests",
        )
    out["requests"] = counts.astype(float)
    dup = out.duplicated(["service", "timestamp"])
    if dup.any():
        row = int(np.flatnonzero(dup)[0])
        raise InputError(
            f"row {row + 2}: a second row for {out['timestamp'].iloc[row].isoformat()}",
            job=out["service"].iloc[row], field="timestamp",
        )
    if out.empty:
        raise InputError("no traffic rows", field="requests")
    return out.sort_values(["service", "timestamp"], kind="stable").reset_index(drop=True)


# ---------------------------------------------------------------- resampling


def hourly(frame: pd.DataFrame, gap_fraction: float = GAP_FRACTION) -> pd.DataFrame:
    """Requests per hour, one column per service, one row per UTC hour; NaN where unknown.

    Each service's native interval is its median timestamp spacing. Windows that are empty
    or below `gap_fraction` of the service's 24 h rolling median (when that median is at
    least GAP_MIN_COUNT requests) are gaps; an hour is the
    mean rate of its remaining windows, so a half-missing hour is not read as half demand.
    Intervals longer than an hour spread their rate evenly over the hours they cover.
    """
    columns = {}
    for service, rows in frame.groupby("service", sort=False):
        columns[service] = _service_hourly(rows["timestamp"], rows["requests"].to_numpy(float),
                                           gap_fraction)
    wide = pd.DataFrame(columns)
    start, end = wide.index.min(), wide.index.max()
    wide = wide.reindex(pd.date_range(start, end, freq="h", tz="UTC"))
    wide.index.name = "hour"
    return wide


def _service_hourly(stamps: pd.Series, counts: np.ndarray, gap_fraction: float) -> pd.Series:
    stamps = pd.DatetimeIndex(stamps)
    step = pd.Series(stamps).diff().median() if len(stamps) > 1 else HOUR
    minutes = max(step / pd.Timedelta(minutes=1), 1.0)
    window = max(round(24 * 60 / minutes), 1)
    local = pd.Series(counts, index=stamps).rolling(window, center=True, min_periods=1).median()
    gap = (counts < gap_fraction * local.to_numpy()) & (local.to_numpy() >= GAP_MIN_COUNT)
    rate = pd.Series(np.where(gap, np.nan, counts * (60.0 / minutes)), index=stamps)
    if minutes <= 60:
        return rate.groupby(rate.index.floor("h")).mean()
    # Coarser than an hour: each window's rate holds for every hour it covers.
    hours = rate.index.floor("h")
    spread = rate.groupby(hours).mean()
    full = pd.date_range(spread.index.min(), spread.index.max() + step - HOUR, freq="h")
    return spread.reindex(full).ffill(limit=math.ceil(minutes / 60) - 1)


def to_long(wide: pd.DataFrame) -> pd.DataFrame:
    """The inverse of `hourly` for hourly data: one row per service and hour, gaps kept empty."""
    long = wide.rename_axis("timestamp").reset_index().melt(
        id_vars="timestamp", var_name="service", value_name="requests")
    return long.loc[:, list(TRAFFIC_COLUMNS)]


# ---------------------------------------------------------------- services


_SERVICE_FIELDS = {
    "requests_per_gpu_hour": "number",
    "headroom": "number",
    "min_gpus": "integer",
    "swap_limit": "integer",
    "priority": "number",
}


def load_services(path: str | os.PathLike[str]) -> dict[str, ServiceConfig]:
    """Read SERVICES.json into frozen configs keyed by service, in file order."""
    doc = readers.read_json(path)
    try:
        return parse_services(doc)
    except InputError as err:
        raise err.located(str(path)) from None


def parse_services(doc: object) -> dict[str, ServiceConfig]:
    """Validate the SERVICES.json document; errors name the service and the field."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("services"), list):
        raise InputError('expected {"services": [...]}', field="services")
    configs: dict[str, ServiceConfig] = {}
    for i, entry in enumerate(doc["services"]):
        if not isinstance(entry, Mapping):
            raise InputError(f"services[{i}] is not an object", field="services")
        name = entry.get("service")
        if not isinstance(name, str) or not name.strip():
            raise InputError(f"services[{i}] needs a non-empty string", field="service")
        name = name.strip()
        if name in configs:
            raise InputError("listed twice", job=name, field="service")
        if "requests_per_gpu_hour" not in entry:
            raise InputError("required", job=name, field="requests_per_gpu_hour")
        values: dict[str, Any] = {}
        for field, kind in _SERVICE_FIELDS.items():
            if field in entry:
                values[field] = _number(entry[field], kind, name, field)
        if "growing" in entry:
            if not isinstance(entry["growing"], bool):
                raise InputError(f"expected true or false, got {entry['growing']!r}",
                                 job=name, field="growing")
            values["growing"] = entry["growing"]
        config = ServiceConfig(service=name, **values)
        _check_ranges(config)
        configs[name] = config
    if not configs:
        raise InputError("no services listed", field="services")
    return configs


def _number(value: object, kind: str, job: str, field: str) -> float | int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"expected a {kind}, got {value!r}", job=job, field=field)
    if kind == "integer" and not isinstance(value, int):
        raise InputError(f"expected an integer, got {value!r}", job=job, field=field)
    if not math.isfinite(value):
        raise InputError(f"expected a finite {kind}, got {value!r}", job=job, field=field)
    return value


def _check_ranges(c: ServiceConfig) -> None:
    if c.requests_per_gpu_hour <= 0:
        raise InputError("must be > 0", job=c.service, field="requests_per_gpu_hour")
    if not 0 <= c.headroom < 1:
        raise InputError("must be in [0, 1): the fraction of capacity kept spare",
                         job=c.service, field="headroom")
    if not 0 <= c.min_gpus <= limits.MAX_DEMAND:
        raise InputError(f"must be from 0 to {limits.MAX_DEMAND}", job=c.service,
                         field="min_gpus")
    if not 0 <= c.swap_limit <= limits.MAX_SWAP:
        raise InputError(f"must be from 0 to {limits.MAX_SWAP}", job=c.service,
                         field="swap_limit")
    if not 0 < c.priority <= limits.MAX_PRIORITY:
        raise InputError(f"must be > 0 and <= {limits.MAX_PRIORITY:g}", job=c.service,
                         field="priority")


# ---------------------------------------------------------------- ServeGen


SERVEGEN_POOLS = ("m-large", "m-mid", "m-small")
# The trace gives seconds from a local midnight but no weekday; we pin day 0 to a Monday so
# that hour-of-week 0 is the trace's first midnight (local clock written as UTC, no offset).
SERVEGEN_ANCHOR = "2025-03-03T00:00:00Z"


def _column(wide: pd.DataFrame, col: str, low: float, high: float) -> np.ndarray:
    """A numeric column, every value finite and in [low, high]; InputError naming the row."""
    values = pd.to_numeric(wide[col], errors="coerce").to_numpy(float)
    bad = ~((values >= low) & (values <= high))  # NaN fails both
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError(f"row {row + 2}: {wide[col].iloc[row]!r} is not a number from "
                         f"{low:g} to {high:g}", field=col)
    return values


def servegen_to_long(wide: pd.DataFrame, anchor: str = SERVEGEN_ANCHOR,
                     pools: tuple[str, ...] = SERVEGEN_POOLS) -> pd.DataFrame:
    """ServeGen's per-window mean rates -> contract rows: requests = rate_rps x window seconds.

    Each pool becomes one service of the same name; counts are rounded to whole requests.
    """
    from allocator.core.timeparse import parse_time

    seconds = _column(wide, "window_start_s", 0.0, 10 * 366 * 86400.0)  # ten years at most
    window = float(np.median(np.diff(seconds))) if len(seconds) > 1 else 600.0
    if not 0 < window <= 86400:
        raise InputError(f"windows of {window:g} s: expected rising starts, at most a day "
                         "apart", field="window_start_s")
    stamps = parse_time(anchor, "anchor") + pd.to_timedelta(seconds, unit="s")
    frames = []
    for pool in pools:
        rates = _column(wide, f"{pool}_rate_rps", 0.0, limits.MAX_REQUESTS / window)
        frames.append(pd.DataFrame({
            "timestamp": stamps.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "service": pool,
            "requests": np.rint(rates * window).astype(np.int64),
        }))
    return pd.concat(frames, ignore_index=True)
