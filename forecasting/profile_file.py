"""PROFILE.json: the one schema `gpuplan profile` writes and `plan-day --profile` reads.

Writer and reader share these types, so that a field cannot be written under one name and
read under another, or silently defaulted: reading checks every field, and a missing, extra
or wrongly typed one is bad input naming the file and the field (FORECASTING.md).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path

import pandas as pd

from allocator.core import limits, readers
from allocator.core.errors import InputError

TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


@dataclass(frozen=True)
class ServiceProfile:
    """One service: its weekly profile, the demand for the plan's steps and its settings."""

    service: str
    profile: tuple[float, ...]  # 168 hour-of-week request rates, hour 0 = Monday 00:00 UTC
    profile_upper: tuple[float, ...]  # the same at the service level's quantile
    demand: tuple[int, ...]  # GPUs per plan step, shaped under swap_limit
    ceiling_gpus: int | None  # the trailing week's peak need; None for a growing service
    swap_limit: int
    priority: float
    fit: Mapping[str, float]  # in-sample fit quality (hours, gap_hours, wape, ...)


@dataclass(frozen=True)
class ProfileFile:
    """The whole document: when the plan starts, its step, and one entry per service."""

    start: str  # ISO 8601, UTC ("...Z")
    step_minutes: int
    quantile: float
    fitted_through: str  # the last traffic hour fitted, ISO 8601 UTC
    services: tuple[ServiceProfile, ...]

    def start_time(self) -> pd.Timestamp:
        from allocator.core.timeparse import parse_time

        return parse_time(self.start, "start")

    def to_json(self) -> str:
        """The file's text: the fields in declaration order, one-space indent, no NaN."""
        doc = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "services"}
        doc["services"] = [_service_dict(s) for s in self.services]
        return json.dumps(doc, indent=1, allow_nan=False) + "\n"

    @classmethod
    def from_json(cls, text: str, path: str | Path = "PROFILE.json") -> ProfileFile:
        """Parse and check every field; InputError naming the file and field otherwise."""
        return cls._checked(readers.parse_json(text, str(path)), path)

    @classmethod
    def read(cls, path: str | Path) -> ProfileFile:
        """The file through the one JSON reader (allocator.core.readers), then checked."""
        return cls._checked(readers.read_json(path), path)

    @classmethod
    def _checked(cls, doc: object, path: str | Path) -> ProfileFile:
        try:
            return _document(doc)
        except InputError as err:
            raise err.located(str(path)) from None


def rounded(values: Iterable[float]) -> tuple[float, ...]:
    """Rates as written: one decimal, a non-finite value (no traffic) as 0."""
    return tuple(round(float(v), 1) if math.isfinite(v) else 0.0 for v in values)


# ---------------------------------------------------------------- writing


def profile_for_plan(traffic: str | Path, services: str | Path, start: pd.Timestamp,
                     steps: int, step_minutes: int, quantile: float,
                     warn: Callable[[str], None] | None = None) -> ProfileFile:
    """Fit the weekly profile per service and its GPU demand for a plan's steps.

    The ceiling is the static reservation of the trailing week's peak: demand stays under
    it unless the service is marked growing (then None).
    """
    from forecasting.demand import demand_for_services, fit_services, gpus_needed

    model, configs = fit_services(traffic, services, quantile, warn=warn)
    demand = demand_for_services(model, configs, start, steps, step_minutes)
    peaks = model.trailing_peak()
    entries = tuple(
        ServiceProfile(
            service=name, profile=rounded(model.profile(name)),
            profile_upper=rounded(model.profile(name, upper=True)),
            demand=tuple(demand[name]),
            ceiling_gpus=None if cfg.growing else int(gpus_needed(
                [peaks[model.services_.index(name)]], cfg)[0]),
            swap_limit=cfg.swap_limit, priority=cfg.priority,
            fit=model.fit_quality_[name])
        for name, cfg in configs.items())
    return ProfileFile(start=start.strftime(TIME_FORMAT), step_minutes=step_minutes,
                       quantile=quantile, fitted_through=model.last_hour_.strftime(TIME_FORMAT),
                       services=entries)


def _service_dict(s: ServiceProfile) -> dict:
    out = {f.name: getattr(s, f.name) for f in fields(s)}
    for name in ("profile", "profile_upper", "demand"):
        out[name] = list(out[name])
    out["fit"] = dict(s.fit)
    return out


# ---------------------------------------------------------------- reading


def _keys(doc: object, names: list[str], where: str = "") -> dict:
    """The object's keys must be exactly `names`: the first missing or extra one is named."""
    if not isinstance(doc, dict):
        raise InputError("must be an object", field=where or None)
    prefix = f"{where}." if where else ""
    for name in names:
        if name not in doc:
            raise InputError("missing", field=prefix + name)
    for name in doc:
        if name not in names:
            raise InputError("not a PROFILE.json field", field=prefix + str(name))
    return doc


def _is_int(x: object) -> bool:
    return type(x) is int


def _is_number(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _string(doc: dict, name: str, prefix: str = "") -> str:
    if not isinstance(doc[name], str):
        raise InputError(f"must be a string, got {json.dumps(doc[name])}", field=prefix + name)
    return doc[name]


def _numbers(doc: dict, name: str, job: str) -> tuple[float, ...]:
    values = doc[name]
    if not isinstance(values, list):
        raise InputError("must be a list of numbers", job=job, field=name)
    for i, x in enumerate(values):
        if not _is_number(x):
            raise InputError(f"must be a finite number, got {json.dumps(x)}", job=job,
                             field=f"{name}[{i}]")
    return tuple(values)


def _demand(doc: dict, job: str) -> tuple[int, ...]:
    curve = doc["demand"]
    if not isinstance(curve, list):
        raise InputError("must be a list of whole numbers of GPUs", job=job, field="demand")
    for t, x in enumerate(curve):
        if not _is_int(x) or not 0 <= x <= limits.MAX_DEMAND:
            raise InputError(f"must be a whole number of GPUs from 0 to {limits.MAX_DEMAND}, "
                             f"got {json.dumps(x)}", job=job, field=f"demand[{t}]")
    return tuple(curve)


def _service(entry: object, i: int) -> ServiceProfile:
    where = f"services[{i}]"
    entry = _keys(entry, [f.name for f in fields(ServiceProfile)], where)
    if not isinstance(entry["service"], str) or not entry["service"]:
        raise InputError("must be a non-empty string", field=f"{where}.service")
    job = entry["service"]
    ceiling = entry["ceiling_gpus"]
    if ceiling is not None and (not _is_int(ceiling) or ceiling < 0):
        raise InputError(f"must be a whole number >= 0 or null, got {json.dumps(ceiling)}",
                         job=job, field="ceiling_gpus")
    swap = entry["swap_limit"]
    if not _is_int(swap) or not 0 <= swap <= limits.MAX_SWAP:
        raise InputError(f"must be a whole number from 0 to {limits.MAX_SWAP}, got "
                         f"{json.dumps(swap)}", job=job, field="swap_limit")
    priority = entry["priority"]
    if not _is_number(priority) or not 0 < priority <= limits.MAX_PRIORITY:
        raise InputError(f"must be a number > 0 and <= {limits.MAX_PRIORITY:g}, got "
                         f"{json.dumps(priority)}", job=job, field="priority")
    fit = entry["fit"]
    if not isinstance(fit, dict) or not all(_is_number(v) for v in fit.values()):
        raise InputError("must be an object of numbers", job=job, field="fit")
    return ServiceProfile(service=job, profile=_numbers(entry, "profile", job),
                          profile_upper=_numbers(entry, "profile_upper", job),
                          demand=_demand(entry, job), ceiling_gpus=ceiling, swap_limit=swap,
                          priority=priority, fit=dict(fit))


def _document(doc: object) -> ProfileFile:
    doc = _keys(doc, [f.name for f in fields(ProfileFile)])
    from allocator.core.timeparse import parse_time

    for name in ("start", "fitted_through"):
        parse_time(_string(doc, name), name)
    minutes = doc["step_minutes"]
    if not _is_int(minutes) or not 1 <= minutes <= limits.MAX_STEP_MINUTES:
        raise InputError(f"must be a whole number from 1 to {limits.MAX_STEP_MINUTES}, got "
                         f"{json.dumps(minutes)}", field="step_minutes")
    quantile = doc["quantile"]
    if not _is_number(quantile) or not 0 < quantile < 1:
        raise InputError(f"must be a number in (0, 1), got {json.dumps(quantile)}",
                         field="quantile")
    if not isinstance(doc["services"], list):
        raise InputError("must be a list of services", field="services")
    services = tuple(_service(entry, i) for i, entry in enumerate(doc["services"]))
    names = [s.service for s in services]
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice is not None:
        raise InputError("appears twice", job=twice, field="service")
    return ProfileFile(start=doc["start"], step_minutes=minutes, quantile=quantile,
                       fitted_through=doc["fitted_through"], services=services)
