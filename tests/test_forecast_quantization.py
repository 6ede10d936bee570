"""Quantization-cost estimator: rare under-prediction, whole GPU-hours, published timings."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecasting.evaluate import published_table, split_index
from forecasting.history import load_quant_history
from forecasting.published import published_frame
from forecasting.quantization import QuantizationCostEstimator, size_tier
from forecasting.store import load_estimators
from tests.forecast_fixtures import HISTORY, MODELS, quant_history


@pytest.fixture(scope="module")
def split():
    df = quant_history()
    X = df.drop(columns=["id", "gpus", "gpu_hours"])
    y, g = df["gpu_hours"].to_numpy(), df["gpus"].to_numpy()
    fit, test = split_index(len(df), 0.25, 0)
    est = QuantizationCostEstimator().fit(X.iloc[fit], y[fit], gpus=g[fit])
    return est, X.iloc[test], y[test], g[test]


def test_reservations_are_whole_hours_at_least_one(split):
    est, X, _, _ = split
    r = est.predict(X)
    assert np.all(r >= 1) and np.all(r == np.round(r))
    assert np.all(r >= est.predict_median(X) - 1e-9)


def test_under_prediction_is_rare_on_held_out_jobs(split):
    est, X, y, _ = split
    r = est.predict(X)
    for algo in ("awq", "gptq", "bitsandbytes"):
        m = (X["algorithm"] == algo).to_numpy()
        assert np.mean(r[m] < y[m]) <= 0.07, algo  # target 5%; small sample here


def test_each_algorithm_fits_by_size_tier(split):
    est = split[0]
    assert set(est.models_) == {"awq", "gptq", "bitsandbytes"}
    assert len(est.models_["gptq"].tiers) >= 3
    assert list(size_tier([0.5, 10, 39.9, 70, 405])) == [0, 1, 1, 2, 3]


def test_gpu_count_from_memory(split):
    est = split[0]
    rows = pd.DataFrame([{"params_b": 405.0, "algorithm": a, "bits": 8, "gpu_type": "A100-80GB"}
                         for a in ("bitsandbytes", "gptq")])
    gpus = est.predict_gpus(rows)
    assert gpus[0] == 8  # 405 GB of 8-bit weights (+10%) over 71.6 usable GB per GPU
    assert gpus[1] == 1  # GPTQ works one block at a time


@pytest.mark.parametrize("source", [s[0] for s in __import__(
    "forecasting.published", fromlist=["PUBLISHED_TIMINGS"]).PUBLISHED_TIMINGS])
def test_no_published_timing_above_the_bundled_estimate(source):
    table = published_table(load_estimators(MODELS)["quantization"])
    row = table[table["source"] == source].iloc[0]
    assert row["estimate_gpu_h"] >= row["published_gpu_h"], source


def test_published_timings_hold_for_a_fresh_fit_on_the_bundled_history():
    X, g, y = load_quant_history(HISTORY / "quantization.csv")
    est = QuantizationCostEstimator().fit(X, y, gpus=g)
    pub = published_frame()
    reserved = est.predict(pub.drop(columns=["gpu_hours", "source"]))
    assert np.all(reserved >= pub["gpu_hours"].to_numpy())


def test_missing_algorithm_in_history_leaves_its_rows_unscored():
    df = quant_history()
    df = df[df["algorithm"] != "awq"]
    est = QuantizationCostEstimator().fit(df.drop(columns=["id", "gpus", "gpu_hours"]),
                                          df["gpu_hours"], gpus=df["gpus"])
    row = pd.DataFrame([{"params_b": 7.0, "algorithm": "awq", "bits": 4, "gpu_type": "H100-80GB"}])
    assert np.isnan(est.predict(row)).all()
