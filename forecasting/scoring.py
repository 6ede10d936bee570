"""Score a queue: `gpus`, `duration_steps`, `gpu_hours_p50`, `gpu_hours_p90` for every
row that can be scored; the others set aside with their id, field and reason.

A bad row never stops the rest (FORECASTING.md); a bad file (missing a column a
kind needs, unreadable) is an InputError. Everything is vectorised per kind, so
100,000 rows take seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from allocator.core.errors import InputError
from allocator.core.limits import MAX_DURATION, MAX_STEP_MINUTES
from forecasting.batch_inference import estimate_batch
from forecasting.columns import (
    BATCH_FEATURES,
    KINDS,
    QUANT_FEATURES,
    QUEUE_REQUIRED,
    SCORED,
    TRAINING_FEATURES,
)
from forecasting.history import (
    Problems,
    batch_problems,
    clean_training,
    quant_problems,
    training_problems,
    with_canonical_gpus,
)
from forecasting.memory import (
    MAX_GPUS,
    memory_fixes,
    per_gpu_gb,
    smallest_any_layout,
    usable_gb,
)

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


@dataclass(frozen=True)
class Scoring:
    """A scored queue: the rows scored, the rows rejected (row, id, field, reason) and
    warnings on rows scored all the same (same columns)."""

    scored: pd.DataFrame
    rejects: pd.DataFrame
    warnings: pd.DataFrame

    def report(self) -> pd.DataFrame:
        """Rejects then warnings, one table with a `level` column: the rejects file."""
        return pd.concat([self.rejects.assign(level="rejected"),
                          self.warnings.assign(level="warning")], ignore_index=True)


def score_queue(df: pd.DataFrame, estimators: dict, *, step_minutes: float = 60.0,
                duration_from: str = "p90") -> tuple[pd.DataFrame, pd.DataFrame]:
    """(scored rows with the four columns added, rejects with id, field, reason)."""
    result = score_queue_full(df, estimators, step_minutes=step_minutes,
                              duration_from=duration_from)
    return result.scored, result.rejects


def score_queue_full(df: pd.DataFrame, estimators: dict, *, step_minutes: float = 60.0,
                     duration_from: str = "p90") -> Scoring:
    """score_queue, plus a warning for each training row whose own `gpus` the memory
    model thinks too few (the row is scored with the count it asked for)."""
    if not 0 < step_minutes <= MAX_STEP_MINUTES:  # NaN fails this too
        raise InputError(f"must be > 0 and <= {MAX_STEP_MINUTES}", field="step_minutes")
    if duration_from not in DURATION_FROM:
        raise InputError(f"must be one of {', '.join(DURATION_FROM)}", field="duration_from")
    check_queue_file(df)
    text = df.reset_index(drop=True)
    df = with_canonical_gpus(typed(text))
    p = queue_problems(df)
    out = pd.DataFrame(np.nan, index=df.index, columns=list(SCORED))
    kind = df["kind"].astype(str).to_numpy()
    warn_rows, warn_text = [], []
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
        if k == "training":
            scale = getattr(estimators["training"], "memory_scale_", 1.0)
            nofit = np.nan_to_num(out["gpus"].to_numpy()[good]) <= 0
            for i, line in zip(good[nofit], memory_fixes(df.iloc[good[nofit]], scale),
                               strict=True):
                p.flag(_spread(np.ones(1, bool), np.array([i]), len(df)), "memory", line)
            at, lines = _too_few_gpus(df.iloc[good], good, scale)
            warn_rows += at
            warn_text += lines
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
    keep = [j for j, r in enumerate(warn_rows) if ok[r]]
    at = np.array([warn_rows[j] for j in keep], dtype=np.int64)
    warnings = pd.DataFrame({"row": at + 1, "id": ids.to_numpy()[at],
                             "field": ["gpus"] * len(at),
                             "reason": [warn_text[j] for j in keep]})
    return Scoring(scored, rejects, warnings)


def _too_few_gpus(part: pd.DataFrame, rows: np.ndarray, scale: float):
    """(row positions, warning lines) of training rows asking for fewer GPUs than the
    memory model holds them on: the user's count wins (it may use GaLore, LISA, pure
    bf16 or offload, which the model does not see), but the plan should know."""
    if "gpus" not in part.columns:
        return [], []
    asked = pd.to_numeric(part["gpus"], errors="coerce").fillna(0).to_numpy()
    frame = clean_training(part)
    usable = usable_gb(frame["gpu_type"])
    # Too few: the stated count holds the job in neither layout (ZeRO, layer split).
    short = (asked > 0) & (per_gpu_gb(frame, np.maximum(asked, 1), scale) > usable)
    if not short.any():
        return [], []
    sub = frame[short]
    need = smallest_any_layout(sub, scale)
    gb = per_gpu_gb(sub, asked[short], scale)
    usable = usable[short]
    text = [f"asks for {int(a)} GPU{'s' if a > 1 else ''}, the memory model needs "
            f"{'more than ' + str(MAX_GPUS) if n == 0 else int(n)} ({gb_:.0f} GB per GPU on "
            f"{int(a)}, {u:.0f} GB usable on a {t}); scored with {int(a)} as asked"
            for a, n, gb_, u, t in zip(asked[short], need, gb, usable,
                                       sub["gpu_type"], strict=True)]
    return list(rows[short]), text


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
