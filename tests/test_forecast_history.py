"""Loaders: CSV and Parquet alike, one clear error per bad history, only finished jobs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from allocator.core.errors import InputError
from forecasting.history import load_quant_history, load_training_history, training_problems
from tests.forecast_fixtures import job, quant_history, training_history


def write(df: pd.DataFrame, path):
    if path.suffix == ".parquet":
        df.to_parquet(path, index=False)
    else:
        df.to_csv(path, index=False)
    return path


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_loads_both_formats(tmp_path, suffix):
    df = training_history().head(50)
    X, g, y = load_training_history(write(df, tmp_path / f"h{suffix}"))
    assert len(X) == 50 and X["variant"].dtype == object
    np.testing.assert_array_equal(g, df["gpus"])
    np.testing.assert_allclose(y, df["gpu_hours"])
    Xq, _, _ = load_quant_history(write(quant_history().head(20), tmp_path / f"q{suffix}"))
    assert Xq["calibration_samples"].notna().all()


def test_failed_and_cancelled_jobs_are_left_out(tmp_path):
    df = training_history().head(10).assign(status=["completed"] * 7 + ["failed", "cancelled",
                                                                        "Succeeded"])
    X, _, _ = load_training_history(write(df, tmp_path / "h.csv"))
    assert len(X) == 8
    with pytest.raises(InputError, match="no completed jobs"):
        load_training_history(write(df.assign(status="failed"), tmp_path / "h.csv"))


@pytest.mark.parametrize(("field", "value", "reason"), [
    ("gpu_hours", 0, "must be > 0"),
    ("gpus", 6, "power of two"),
    ("zero_stage", 4, "must be one of"),
    ("optimizer", "sgd", "must be one of"),
    ("epochs", "many", "not a finite number"),
    ("active_params_b", 1e4, "must not exceed params_b"),
])
def test_a_bad_row_names_file_job_and_field(tmp_path, field, value, reason):
    df = training_history().head(20).astype({field: object})
    df.loc[4, field] = value
    with pytest.raises(InputError) as err:
        load_training_history(write(df, tmp_path / "h.csv"))
    assert (err.value.file, err.value.job, err.value.field) == (
        str(tmp_path / "h.csv"), df.loc[4, "id"], field)
    assert reason in err.value.message


def test_missing_column_and_unknown_extension(tmp_path):
    df = training_history().head(5).drop(columns=["packing"])
    with pytest.raises(InputError) as err:
        load_training_history(write(df, tmp_path / "h.csv"))
    assert err.value.field == "packing"
    with pytest.raises(InputError, match=r"expected a \.csv, \.csv\.gz or \.parquet file"):
        load_training_history(tmp_path / "h.json")
    with pytest.raises(InputError, match="no such file"):
        load_training_history(tmp_path / "absent.csv")


def test_rows_without_ids_are_named_by_position():
    rows = pd.DataFrame([job(), job(lora_rank=0)])
    err = training_problems(rows).first(rows)
    assert (err.job, err.field) == ("row 2", "lora_rank")
