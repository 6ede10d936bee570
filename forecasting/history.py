"""Read job histories and queues (CSV or Parquet) and check them against FORECASTING.md.

Checks are vectorised and return, per row, the first thing wrong with it, so that
`train` can stop on a bad history (one line: file, job, field) while `score` can
set bad rows aside and carry on with the rest.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from allocator.core import readers
from allocator.core.errors import InputError
from forecasting.columns import (
    ALGORITHMS,
    GPUS,
    OUTCOMES,
    QUANT_BITS,
    QUANT_DEFAULTS,
    QUANT_FEATURES,
    QUANT_OPTIONAL,
    TRAINING_CATEGORICAL,
    TRAINING_CHOICES,
    TRAINING_FEATURES,
    TRAINING_POSITIVE,
)
from forecasting.gpu_catalog import ENV as CATALOG_ENV
from forecasting.gpu_catalog import canonical, known_types


def read_table(path: str | Path, *, as_text: bool = False) -> pd.DataFrame:
    """A CSV or Parquet file (allocator.core.readers); InputError naming the file.

    as_text keeps CSV cells as written (blank = missing), so that a scored copy of
    a file changes only the columns it adds."""
    return readers.read_table(path, dtype=str if as_text else {"id": str})


def row_ids(df: pd.DataFrame) -> list[str]:
    """The job id of each row, or `row N` (1-based data row) when the file has no ids."""
    if "id" in df.columns:
        return [str(x) if pd.notna(x) else f"row {i + 1}" for i, x in enumerate(df["id"])]
    return [f"row {i + 1}" for i in range(len(df))]


def require_columns(df: pd.DataFrame, columns: tuple[str, ...] | list[str], what: str) -> None:
    """InputError naming the first missing column: the whole file is unusable then."""
    for col in columns:
        if col not in df.columns:
            raise InputError(f"missing required column for {what}", field=col)


class Problems:
    """The first problem (field, reason) found in each row; later checks do not overwrite."""

    def __init__(self, n: int) -> None:
        self.field = np.full(n, None, dtype=object)
        self.reason = np.full(n, None, dtype=object)

    def flag(self, mask: np.ndarray, field: str, reason: str) -> None:
        new = np.asarray(mask, bool) & (self.field == None)  # noqa: E711 (object array)
        self.field[new] = field
        self.reason[new] = reason

    def merge(self, rows: np.ndarray, other: Problems) -> None:
        """Take `other`'s problems (found on the subset `rows`) where this has none yet."""
        for field in set(other.field[other.bad]):
            hit = other.field == field
            for reason in set(other.reason[hit]):
                mask = np.zeros(len(self.field), bool)
                mask[rows[hit & (other.reason == reason)]] = True
                self.flag(mask, field, reason)

    @property
    def bad(self) -> np.ndarray:
        return self.field != None  # noqa: E711

    def first(self, df: pd.DataFrame) -> InputError | None:
        """The first bad row as an InputError, or None when every row is fine."""
        idx = np.flatnonzero(self.bad)
        if not len(idx):
            return None
        i = int(idx[0])
        return InputError(str(self.reason[i]), job=row_ids(df)[i], field=str(self.field[i]))


# The largest value gpuplan reads in each numeric column (far beyond any real job), so
# that no estimate built from a row can overflow: MODEL.md's "Limits".
COLUMN_MAX = {
    "params_b": 1e5, "active_params_b": 1e5, "reward_model_params_b": 1e5,
    "n_layers": 1e4, "hidden_size": 1e6, "seq_len": 1e8, "dataset_samples": 1e12,
    "avg_tokens_per_sample": 1e8, "epochs": 1e4, "global_batch_size": 1e8,
    "lora_rank": 1e5, "lora_targets": 1e4, "rollouts_per_prompt": 1e4,
    "max_new_tokens": 1e8, "gpu_hours": 1e9, "requests": 1e13, "avg_input_tokens": 1e8,
    "avg_output_tokens": 1e8, "calibration_samples": 1e9, "calibration_seq_len": 1e8,
}


def numeric(df: pd.DataFrame, col: str, problems: Problems, *, integer: bool = False,
            positive: bool = False) -> np.ndarray:
    """Column `col` as floats; non-numbers, infinities, negatives (or <= 0) and values
    beyond COLUMN_MAX flagged."""
    raw = df[col]
    values = pd.to_numeric(raw, errors="coerce").to_numpy(float)
    problems.flag(~np.isfinite(values), col, f"not a finite number: {col}")
    v = np.nan_to_num(values, nan=1.0, posinf=1.0, neginf=1.0)
    if col in COLUMN_MAX:
        problems.flag(v > COLUMN_MAX[col], col, f"must be <= {COLUMN_MAX[col]:g} (gpuplan's "
                      "limit)")
    if positive:
        problems.flag(v <= 0, col, "must be > 0")
    else:
        problems.flag(v < 0, col, "must be >= 0")
    if integer:
        problems.flag(v != np.round(v), col, "must be a whole number")
    return values


def categorical(df: pd.DataFrame, col: str, allowed: tuple, problems: Problems) -> None:
    if col == "gpu_type":
        gpu_types(df, problems)
        return
    ok = df[col].astype(str).isin(allowed).to_numpy()
    problems.flag(~ok, col, f"must be one of {', '.join(allowed)}")


def gpu_types(df: pd.DataFrame, problems: Problems) -> None:
    """A GPU type the catalogue knows (rows are canonicalised by with_canonical_gpus)."""
    ok = df["gpu_type"].astype(str).isin(list(GPUS)).to_numpy()
    problems.flag(~ok, "gpu_type",
                  f"unknown GPU type; known: {known_types()} (add yours to a catalogue "
                  f"named by {CATALOG_ENV}, see docs/estimators.md)")


def with_canonical_gpus(df: pd.DataFrame) -> pd.DataFrame:
    """`gpu_type` spelled as in the catalogue where it names a known type (H100 ->
    H100-80GB); unknown spellings stay as written, for the checks to report."""
    if "gpu_type" not in df.columns:
        return df
    names = canonical(df["gpu_type"])
    return df.assign(gpu_type=names.where(names.notna(), df["gpu_type"]).to_numpy())


def training_problems(df: pd.DataFrame, *, outcomes: bool = False) -> Problems:
    """Per-row problems of the 22 training features (and `gpus`, `gpu_hours` if asked)."""
    p = Problems(len(df))
    for col, names in TRAINING_CATEGORICAL.items():
        categorical(df, col, names, p)
    ints = {"n_layers", "hidden_size", "seq_len", "dataset_samples", "global_batch_size",
            "lora_rank", "lora_targets", "rollouts_per_prompt", "max_new_tokens"}
    vals = {}
    for col in TRAINING_FEATURES:
        if col in TRAINING_CATEGORICAL:
            continue
        vals[col] = numeric(df, col, p, integer=col in ints or col in TRAINING_CHOICES,
                            positive=col in TRAINING_POSITIVE)
    for col, allowed in TRAINING_CHOICES.items():
        p.flag(~np.isin(np.nan_to_num(vals[col], nan=0), allowed), col,
               f"must be one of {', '.join(map(str, allowed))}")
    variant = df["variant"].astype(str)
    lora = variant.str.startswith("lora").to_numpy()
    rl = variant.str.endswith(("rlhf", "rlvr")).to_numpy()
    p.flag(vals["active_params_b"] > vals["params_b"], "active_params_b",
           "must not exceed params_b")
    p.flag(lora & ((vals["lora_rank"] <= 0) | (vals["lora_targets"] <= 0)), "lora_rank",
           "a LoRA variant needs lora_rank and lora_targets > 0")
    p.flag(~lora & (df["precision"].astype(str) == "int4").to_numpy(), "precision",
           "int4 (a 4-bit base) needs a LoRA variant")
    p.flag(rl & ((vals["rollouts_per_prompt"] <= 0) | (vals["max_new_tokens"] <= 0)),
           "rollouts_per_prompt", "RLHF/RLVR needs rollouts_per_prompt and max_new_tokens > 0")
    p.flag(variant.str.endswith("rlhf").to_numpy() & (vals["reward_model_params_b"] <= 0),
           "reward_model_params_b", "RLHF needs a reward model: reward_model_params_b > 0")
    if outcomes:
        outcome_problems(df, p)
    return p


def outcome_problems(df: pd.DataFrame, p: Problems) -> None:
    """`gpus` a power of two and `gpu_hours` > 0: what a history row adds."""
    gpus = numeric(df, "gpus", p, integer=True, positive=True)
    g = np.nan_to_num(gpus, nan=1.0, posinf=1.0).astype(np.int64)
    p.flag((g & (g - 1)) != 0, "gpus", "must be a power of two")
    numeric(df, "gpu_hours", p, positive=True)


def quant_problems(df: pd.DataFrame, *, outcomes: bool = False) -> Problems:
    """Per-row problems of quantization columns."""
    p = Problems(len(df))
    numeric(df, "params_b", p, positive=True)
    categorical(df, "algorithm", ALGORITHMS, p)
    bits = numeric(df, "bits", p, integer=True, positive=True)
    p.flag(~np.isin(np.nan_to_num(bits), QUANT_BITS), "bits", "must be 4 or 8")
    gpu_types(df, p)
    for col in QUANT_OPTIONAL:
        if col in df.columns:  # optional: a blank cell takes the default
            vals = numeric(df.assign(**{col: df[col].fillna(QUANT_DEFAULTS[col])}), col, p,
                           integer=True)
            calibrated = df["algorithm"].astype(str).isin(["awq", "gptq"]).to_numpy()
            p.flag(calibrated & (vals == 0), col, "AWQ and GPTQ need calibration data: > 0")
    if outcomes:
        outcome_problems(df, p)
    return p


def batch_problems(df: pd.DataFrame) -> Problems:
    """Per-row problems of batch-inference columns."""
    p = Problems(len(df))
    numeric(df, "params_b", p, positive=True)
    gpu_types(df, p)
    numeric(df, "requests", p, integer=True, positive=True)
    numeric(df, "avg_input_tokens", p)
    numeric(df, "avg_output_tokens", p)
    return p


def clean_training(df: pd.DataFrame) -> pd.DataFrame:
    """The 22 features with contract dtypes (call after the checks passed)."""
    out = df[list(TRAINING_FEATURES)].copy()
    for col in TRAINING_FEATURES:
        if col not in TRAINING_CATEGORICAL:
            out[col] = pd.to_numeric(out[col]).astype(float)
    for col in TRAINING_CATEGORICAL:
        out[col] = out[col].astype(str)
    return out


def clean_quant(df: pd.DataFrame) -> pd.DataFrame:
    """Quantization columns with the optional calibration columns filled by defaults."""
    out = pd.DataFrame({
        "params_b": pd.to_numeric(df["params_b"]).astype(float),
        "algorithm": df["algorithm"].astype(str),
        "bits": pd.to_numeric(df["bits"]).astype(int),
        "gpu_type": df["gpu_type"].astype(str),
    }, index=df.index)
    for col in QUANT_OPTIONAL:
        src = df[col] if col in df.columns else pd.Series(np.nan, index=df.index)
        out[col] = pd.to_numeric(src, errors="coerce").fillna(QUANT_DEFAULTS[col]).astype(float)
    return out


COMPLETED = ("completed", "succeeded", "success", "done", "finished")


def completed_only(df: pd.DataFrame) -> pd.DataFrame:
    """Rows whose optional `status` says the job finished: a failed or cancelled run's
    GPU-hours are not what the job costs. Without a `status` column, every row."""
    if "status" not in df.columns:
        return df
    done = df["status"].astype(str).str.strip().str.lower().isin(COMPLETED)
    return df[done.to_numpy()].reset_index(drop=True)


def load_training_history(path: str | Path) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """(22 features, gpus, gpu_hours) of a training history's completed jobs; InputError
    on any bad row."""
    df = read_table(path)
    try:
        require_columns(df, [*TRAINING_FEATURES, *OUTCOMES], "a training history")
        df = with_canonical_gpus(df)
        df = completed_only(df)
        if df.empty:
            raise InputError("no completed jobs in the history")
        err = training_problems(df, outcomes=True).first(df)
        if err:
            raise err
    except InputError as err:
        raise err.located(str(path)) from None
    return (clean_training(df), df["gpus"].to_numpy(np.int64),
            df["gpu_hours"].to_numpy(float))


def load_quant_history(path: str | Path) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """(quantization columns, gpus, gpu_hours) of a quantization history."""
    df = read_table(path)
    try:
        require_columns(df, [*QUANT_FEATURES, *OUTCOMES], "a quantization history")
        df = with_canonical_gpus(df)
        df = completed_only(df)
        if df.empty:
            raise InputError("no completed jobs in the history")
        err = quant_problems(df, outcomes=True).first(df)
        if err:
            raise err
    except InputError as err:
        raise err.located(str(path)) from None
    return clean_quant(df), df["gpus"].to_numpy(np.int64), df["gpu_hours"].to_numpy(float)

