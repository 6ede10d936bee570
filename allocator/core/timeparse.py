"""The one parser for times: every time column and every time option goes through here.

Rules (docs/contract/MODEL.md, "Limits"): ISO 8601; a time without an offset is UTC; an
offset (`Z`, `+05:30`) is honoured row by row, whatever the other rows say; a year outside
[FIRST_YEAR, LAST_YEAR] is rejected, so that adding a horizon can never leave pandas' range.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from allocator.core.errors import InputError

FIRST_YEAR = 1900
LAST_YEAR = 2199
_FIRST = pd.Timestamp(f"{FIRST_YEAR}-01-01", tz="UTC")
_END = pd.Timestamp(f"{LAST_YEAR + 1}-01-01", tz="UTC")
_OFFSET = re.compile(r"(?:[zZ]|[+-]\d{2}(?::?\d{2})?)$")
_YEAR = re.compile(r"^\s*(\d{4,})-\d")
_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _offset_of(text: str) -> str:
    if _DATE_ONLY.match(text):
        return ""
    found = _OFFSET.search(text)
    return found.group(0) if found else ""


def parse_time(value: object, field: str) -> pd.Timestamp:
    """One time (an option or a file field) as a UTC timestamp; InputError naming the field."""
    text = str(value).strip() if value is not None else ""
    stamps = parse_times(pd.Series([text]), field, labels=[repr(text)])
    return stamps.iloc[0]


def to_utc(value: object, field: str) -> pd.Timestamp:
    """A pandas timestamp as UTC (a naive one is UTC); anything else through `parse_time`."""
    if isinstance(value, pd.Timestamp):
        return value.tz_localize("UTC") if value.tzinfo is None else value.tz_convert("UTC")
    return parse_time(value, field)


def parse_times(values: pd.Series, field: str, labels: list[str] | None = None,
                jobs: pd.Series | None = None) -> pd.Series:
    """A column of times as datetime64[ns, UTC]; InputError naming the first bad row.

    `labels` name the rows in messages (default: `row N`, the file's line N counting the
    header as line 1); `jobs` (the same length) fills the error's job.
    """
    index = values.index
    if pd.api.types.is_datetime64_any_dtype(values.dtype):  # Parquet: already times
        series = values.dt.tz_localize("UTC") if values.dt.tz is None else values
        out = series.dt.tz_convert("UTC").astype("datetime64[ns, UTC]")
        text = values.astype(str)
    else:
        text = values.astype(str).str.strip().where(values.notna(), "")
        out = pd.Series(pd.NaT, index=index, dtype="datetime64[ns, UTC]")
        offsets = text.map(_offset_of)
        for offset in offsets.unique():  # one offset (or none) per call: no carry-over
            mask = (offsets == offset).to_numpy()
            part = text[mask]
            try:
                parsed = pd.to_datetime(part, utc=True, errors="coerce", format="ISO8601")
            except (ValueError, OverflowError):
                parsed = pd.Series([_one(v) for v in part], index=part.index,
                                   dtype="datetime64[ns, UTC]")
            out[mask] = parsed.astype("datetime64[ns, UTC]")
    bad = (out.isna() | (out < _FIRST) | (out >= _END)).to_numpy()
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        where = labels[i] if labels is not None else f"row {i + 2}"
        job = None if jobs is None else str(jobs.iloc[i])
        raw = text.iloc[i]
        year = _YEAR.match(raw)
        outside = not pd.isna(out.iloc[i]) or (
            year is not None and not FIRST_YEAR <= int(year.group(1)) <= LAST_YEAR)
        why = (f"is outside the years {FIRST_YEAR}-{LAST_YEAR}" if outside
               else "is not an ISO 8601 time")
        if labels is not None and len(values) == 1:
            raise InputError(f"{raw!r} {why}", job=job, field=field)
        raise InputError(f"{where}: {raw!r} {why}", job=job, field=field)
    return out


def _one(text: str) -> pd.Timestamp:
    try:
        stamp = pd.Timestamp(text)
    except (ValueError, TypeError, OverflowError):
        return pd.NaT
    if stamp is pd.NaT:
        return pd.NaT
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
