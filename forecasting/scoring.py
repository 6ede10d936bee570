"""Score a queue: `gpus`, `duration_steps`, `gpu_hours_p50`, `gpu_hours_p90` for every
row that can be scored; the others set aside with their id, field and reason.

A bad row never stops the rest (FORECASTING.md); a bad file (missing a column a
kind needs, unreadable) is an InputError. Everything is vectorised per kind, so
100,000 rows take seconds.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from allocator.errors import InputError
from allocator.limits import MAX_DURATION, MAX_STEP_MINUTES
from forecasting.batch_inference import estimate_batch
from forecasting.columns import (
    BATCH_FEATURES,
    KINDS,
    QUANT_FEATURES,
    QUEUE_REQUIRED,
    SCORED,
    TRAINING_FEATURES,
)
from forecasting.history import Problems, batch_problems, quant_problems, training_problems
from forecasting.memory import MAX_GPUS

KIND_COLUMNS = {"training": TRAINING_FEATURES, "quantization": QUANT_FEATURES,
                "batch_inference": BATCH_FEATURES}
KIND_CHECKS = {"training": training_problems, "quantization": quant_problems,
               "batch_inference": batch_problems}
DURATION_FROM = ("p50", "p90")
TEXT_COLUMNS = ("id", "kind", "variant", "precision", "gpu_type", "optimizer", "algorithm")


def check_queue_file(df: pd.DataFrame) -> None:
    """File-level checks: the queue columns, and every column each present kind needs."""
    for col in QUEUE_REQUIRED:
        if col not in df.columns:
            raise InputError("missing required column of a queue", field=col)
    kinds = set(df["kind"].astype(str).unique())
    for kind, cols in KIND_COLUMNS.items():
        if kind in kinds:
            for col in cols:
                if col not in df.columns:
                    raise InputError(f"missing column needed by its {kind} rows", field=col)


def queue_problems(df: pd.DataFrame) -> Problems:
    """Row checks common to every kind: id, kind, priority, arrival_step, gpus."""
    p = Problems(len(df))
    ids = df["id"]
    blank = ids.isna().to_numpy() | (ids.astype(str).str.strip() == "").to_numpy()
    p.flag(blank, "id", "missing id")
    p.flag(ids.duplicated(keep="first").to_numpy() & ~blank, "id", "duplicate id")
    p.flag(~df["kind"].astype(str).isin(KINDS).to_numpy(), "kind",
           f"must be one of {', '.join(KINDS)}")
    prio = pd.to_numeric(df["priority"], errors="coerce").to_numpy(float)
    p.flag(~np.isfinite(prio) | (np.nan_to_num(prio) <= 0), "priority", "must be a number > 0")
    if "arrival_step" in df.columns:
        a = pd.to_numeric(df["arrival_step"], errors="coerce").to_numpy(float)
        given = df["arrival_step"].notna().to_numpy()
        bad = given & (~np.isfinite(a) | (np.nan_to_num(a) < 0)
                       | (np.nan_to_num(a) != np.round(np.nan_to_num(a))))
        p.flag(bad, "arrival_step", "must be a whole number >= 0")
    if "gpus" in df.columns:
        g = pd.to_numeric(df["gpus"], errors="coerce").to_numpy(float)
        given = df["gpus"].notna().to_numpy()
        gi = np.nan_to_num(g, nan=1.0, posinf=3.0, neginf=3.0)
        ok = (gi >= 1) & (gi <= MAX_GPUS) & (gi == np.round(gi))
        ok &= (gi.astype(np.int64) & (gi.astype(np.int64) - 1)) == 0
        p.flag(given & ~ok, "gpus", f"must be a power of two from 1 to {MAX_GPUS}")
    return p


def score_queue(df: pd.DataFrame, estimators: dict, *, step_minutes: float = 60.0,
                duration_from: str = "p90") -> tuple[pd.DataFrame, pd.DataFrame]:
    """(scored rows with the four columns added, rejects with id, field, reason)."""
    if not 0 < step_minutes <= MAX_STEP_MINUTES:  # NaN fails this too
        raise InputError(f"must be > 0 and <= {MAX_STEP_MINUTES}", field="step_minutes")
    if duration_from not in DURATION_FROM:
        raise InputError(f"must be one of {', '.join(DURATION_FROM)}", field="duration_from")
    check_queue_file(df)
    text = df.reset_index(drop=True)
    df = typed(text)
    p = queue_problems(df)
    out = pd.DataFrame(np.nan, index=df.index, columns=list(SCORED))
    kind = df["kind"].astype(str).to_numpy()
    for k, check in KIND_CHECKS.items():
        rows = np.flatnonzero((kind == k) & ~p.bad)
        if not len(rows):
            continue
        part = df.iloc[rows]
        kp = check(part)
        p.merge(rows, kp)
        good = rows[~kp.bad]
        if not len(good):
            continue
        est, why = _estimate(k, df.iloc[good], estimators)
        if est is None:
            p.flag(_spread(np.ones(len(good), bool), good, len(df)), "kind", why)
            continue
        out.iloc[good, :] = est.reindex(columns=list(SCORED)).to_numpy(float)
    g = out["gpus"].to_numpy()
    p.flag(~p.bad & (np.nan_to_num(g) <= 0), "gpus",
           f"does not fit in memory on any power of two up to {MAX_GPUS} GPUs")
    p.flag(~p.bad & ~np.isfinite(out["gpu_hours_p90"].to_numpy()), "kind",
           "no fitted estimator for this row (algorithm absent from the history)")
    hours = out[f"gpu_hours_{duration_from}"].to_numpy()
    step_h = step_minutes / 60.0
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        steps = np.maximum(1.0, np.ceil(hours / np.where(g > 0, g, 1) / step_h - 1e-9))
    p.flag(~p.bad & ~(steps <= MAX_DURATION), "duration_steps",
           f"the estimate is beyond gpuplan's limit of {MAX_DURATION} steps")
    ok = ~p.bad
    scored = text[ok].copy()
    scored["gpus"] = g[ok].astype(np.int64)
    scored["duration_steps"] = steps[ok].astype(np.int64)
    scored["gpu_hours_p50"] = np.round(out["gpu_hours_p50"].to_numpy()[ok], 4)
    scored["gpu_hours_p90"] = np.round(out["gpu_hours_p90"].to_numpy()[ok], 4)
    ids = df["id"].astype(str).where(df["id"].notna(), "")
    rejects = pd.DataFrame({"row": np.flatnonzero(~ok) + 1, "id": ids.to_numpy()[~ok],
                            "field": p.field[~ok], "reason": p.reason[~ok]})
    return scored, rejects


def typed(df: pd.DataFrame) -> pd.DataFrame:
    """Numbers parsed once per column (text that is no number becomes NaN, which the
    row checks report); the string columns kept as they are."""
    return pd.DataFrame({
        col: pd.to_numeric(df[col], errors="coerce")
        if col not in TEXT_COLUMNS and df[col].dtype == object else df[col]
        for col in df.columns}, index=df.index)


def _spread(mask: np.ndarray, rows: np.ndarray, n: int) -> np.ndarray:
    full = np.zeros(n, bool)
    full[rows[mask]] = True
    return full


def _estimate(kind: str, part: pd.DataFrame, estimators: dict):
    """(estimates, None) or (None, why) when the model for this kind is missing."""
    if kind == "batch_inference":
        return estimate_batch(part), None
    name = "training" if kind == "training" else "quantization"
    if name not in estimators:
        return None, f"no fitted {name} estimator in the models directory"
    return estimators[name].estimate(part), None
