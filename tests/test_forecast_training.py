"""Training-cost estimator: sklearn conformance, beats the size-only baseline, GPU counts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import estimator_checks_generator

from allocator.core.errors import InputError
from forecasting.evaluate import split_index
from forecasting.memory import min_training_gpus
from forecasting.store import load_estimators, save_estimators
from forecasting.synth import noise_floor_mdape
from forecasting.training import PowerLawBaseline, TrainingCostEstimator
from tests.forecast_fixtures import features, job, training_history

# A list, not sklearn's generator: pytest deprecates parametrizing over a generator
SKLEARN_CHECKS = list(estimator_checks_generator(TrainingCostEstimator(n_estimators=40)))


@pytest.mark.parametrize(
    ("estimator", "check"), SKLEARN_CHECKS, ids=[c.func.__name__ for _, c in SKLEARN_CHECKS]
)
def test_sklearn_conformance(estimator, check):
    """Numeric arrays take the generic path: the same LightGBM pair on the given columns."""
    check(estimator)


@pytest.fixture(scope="module")
def fitted():
    df = training_history()
    fit, test = split_index(len(df), 0.25, 0)
    X, y, g = features(df), df["gpu_hours"].to_numpy(), df["gpus"].to_numpy()
    est = TrainingCostEstimator().fit(X.iloc[fit], y[fit], gpus=g[fit])
    base = PowerLawBaseline().fit(X.iloc[fit], y[fit], gpus=g[fit])
    return est, base, X.iloc[test], y[test], g[test]


def mdape(pred, y):
    return float(np.median(np.abs(pred / y - 1)))


def test_beats_size_only_baseline_by_3x_and_nears_the_noise_floor(fitted):
    est, base, X, y, _ = fitted
    ours, theirs = mdape(est.predict(X), y), mdape(base.predict(X), y)
    assert theirs / ours >= 3
    assert ours <= 1.4 * noise_floor_mdape(0.2)  # 1.25x on the bundled 4000-job history


def test_upper_quantile_covers_and_never_undercuts_the_median(fitted):
    est, _, X, y, _ = fitted
    p50, p90 = est.predict(X), est.predict_upper(X)
    assert np.all(p90 >= p50)
    assert 0.8 <= np.mean(y <= p90) <= 0.97


def test_gpu_count_is_the_smallest_power_of_two_that_fits(fitted):
    est, _, X, _, g = fitted
    pred = est.predict_gpus(X)
    assert set(np.log2(pred) % 1) == {0.0}
    assert np.mean(pred == g) >= 0.9
    np.testing.assert_array_equal(pred, min_training_gpus(X, est.memory_scale_))


def test_a_row_that_asks_for_gpus_gets_them_and_costs_follow(fitted):
    est = fitted[0]
    rows = pd.DataFrame([job(), job()])
    rows["gpus"] = [np.nan, 8]
    e = est.estimate(rows)
    assert list(e["gpus"]) == [1, 8]
    assert e["gpu_hours_p50"].iloc[1] > e["gpu_hours_p50"].iloc[0]  # start-up on 8 GPUs


def test_bad_rows_are_rejected_with_job_and_field(fitted):
    est = fitted[0]
    bad = pd.DataFrame([job(), job(variant="full-ppo")])
    bad.insert(0, "id", ["ok", "oops"])
    with pytest.raises(InputError) as err:
        est.predict(bad)
    assert err.value.job == "oops" and err.value.field == "variant"
    with pytest.raises(InputError, match="int4"):
        est.predict(pd.DataFrame([job(variant="full-sft", precision="int4")]))


def test_predict_before_fit_raises():
    with pytest.raises(NotFittedError):
        TrainingCostEstimator().predict(pd.DataFrame([job()]))


def test_estimators_round_trip_through_the_store(fitted, tmp_path):
    est, base, X, _, _ = fitted
    save_estimators(tmp_path, info={"training": {"jobs": 1}}, training=est, baseline=base)
    loaded = load_estimators(tmp_path)
    np.testing.assert_array_equal(loaded["training"].predict(X), est.predict(X))
    np.testing.assert_array_equal(loaded["baseline"].predict(X), base.predict(X))


def test_empty_models_dir_is_bad_input(tmp_path):
    with pytest.raises(InputError, match="gpuplan train"):
        load_estimators(tmp_path)
