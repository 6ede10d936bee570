"""Quantization-cost estimator: per algorithm, OLS on logs by parameter-size tier,
then a safety margin so that under-prediction is rare, rounded up to whole GPU-hours.

Why this shape: quantization time is close to linear in parameter count within a
size range but not across (loading dominates small models, per-block work large
ones), so each tier gets its own intercept and slope; GPU type and calibration
tokens shift all tiers alike. Headline timings understate real runs 4-8x
(docs/sources.md, AWQ), so the reservation carries a margin chosen on the history:
the smallest one at which at most `target_underprediction` of jobs (after the
rounding up) would have overrun their reservation.
"""

from __future__ import annotations

from numbers import Real
from typing import ClassVar

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin, _fit_context
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_is_fitted

from forecasting.columns import ALGORITHMS, GPU_TYPES
from forecasting.history import clean_quant, quant_problems
from forecasting.memory import min_quant_gpus

TIER_EDGES = (10.0, 40.0, 100.0)
TIER_NAMES = ("<10B", "10-40B", "40-100B", ">=100B")
MARGIN_GRID = np.linspace(0.0, 2.0, 201)  # log-margin candidates, 1% steps
MIN_TIER_JOBS = 15


def size_tier(params_b: np.ndarray) -> np.ndarray:
    """Index of each parameter count's tier in TIER_NAMES."""
    return np.searchsorted(np.asarray(TIER_EDGES), np.asarray(params_b, float), side="right")


def booked_gpu_hours(log_wall: np.ndarray, margin: np.ndarray | float,
                     gpus: np.ndarray) -> np.ndarray:
    """Whole GPU-hours reserved: ceil(wall hours x margin x GPUs), at least 1."""
    raw = np.exp(log_wall + margin) * gpus
    return np.maximum(1.0, np.ceil(raw - 1e-9))


class AlgorithmModel:
    """One algorithm's OLS fit: tier-specific intercept and slope on log params_b,
    GPU-type offsets, and a log calibration-token slope where the tokens vary."""

    def __init__(self, frame: pd.DataFrame, log_wall: np.ndarray) -> None:
        tiers = size_tier(frame["params_b"])
        counts = np.bincount(tiers, minlength=len(TIER_NAMES))
        self.tiers = [t for t in range(len(TIER_NAMES)) if counts[t] >= MIN_TIER_JOBS]
        if not self.tiers:  # a small history: one line over all sizes
            self.tiers = [int(np.argmax(counts))]
        seen = set(frame["gpu_type"])
        order = [g for g in GPU_TYPES if g in seen] + sorted(seen - set(GPU_TYPES))
        self.gpu_types = order[1:]  # offsets against the first; unseen types get none
        calib = np.log(self._tokens(frame))
        self.use_calib = bool(np.ptp(calib) > 0)
        import statsmodels.api as sm  # fitting only: scoring never pays for the import

        design = self.design(frame)
        result = sm.OLS(log_wall, design).fit()
        # Keep the coefficients only: the result object holds the data.
        self.params = np.asarray(result.params)

    @staticmethod
    def _tokens(frame: pd.DataFrame) -> pd.Series:
        return np.maximum(frame["calibration_samples"] * frame["calibration_seq_len"], 1.0)

    def tier_of(self, params_b) -> np.ndarray:
        """Each row's tier, or the nearest tier that had enough jobs to be fitted."""
        tiers = size_tier(params_b)
        fitted = np.asarray(self.tiers)
        return fitted[np.abs(tiers[:, None] - fitted[None, :]).argmin(axis=1)]

    def design(self, frame: pd.DataFrame) -> np.ndarray:
        tier = self.tier_of(frame["params_b"])
        logp = np.log(frame["params_b"].to_numpy(float))
        cols = []
        for t in self.tiers:
            cols += [(tier == t).astype(float), (tier == t) * logp]
        cols += [(frame["gpu_type"] == g).to_numpy(float) for g in self.gpu_types]
        if self.use_calib:
            cols.append(np.log(self._tokens(frame).to_numpy(float)))
        return np.column_stack(cols)

    def predict_log(self, frame: pd.DataFrame) -> np.ndarray:
        return self.design(frame) @ self.params


class QuantizationCostEstimator(RegressorMixin, BaseEstimator):
    """Reserved GPU-hours (predict: whole hours >= 1, margin included) and GPU count."""

    _parameter_constraints: ClassVar[dict] = {
        "target_underprediction": [Interval(Real, 0.0, 0.5, closed="both")],
    }

    def __init__(self, target_underprediction=0.03):
        self.target_underprediction = target_underprediction

    def _frame(self, X) -> pd.DataFrame:
        err = quant_problems(X).first(X)
        if err:
            raise err
        return clean_quant(X)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, gpus=None):
        """Fit on a quantization history: X its columns, y GPU-hours, gpus the counts used."""
        frame = self._frame(X)
        y = np.asarray(y, dtype=float)
        used = min_quant_gpus(frame) if gpus is None else np.asarray(gpus, dtype=float)
        if len(y) != len(frame) or not np.all(np.isfinite(y)) or np.any(y <= 0):
            raise ValueError("y must hold one finite GPU-hours > 0 per job")
        self.models_, self.margins_ = {}, {}
        log_wall = np.log(y / used)
        for algo in ALGORITHMS:
            rows = (frame["algorithm"] == algo).to_numpy()
            if rows.sum() < 3:
                continue
            model = AlgorithmModel(frame[rows], log_wall[rows])
            self.models_[algo] = model
            self.margins_[algo] = self._margins(model, frame[rows], y[rows], used[rows])
        if not self.models_:
            raise ValueError("need at least 3 jobs of one algorithm")
        self.n_features_in_ = frame.shape[1]
        return self

    def _margins(self, model: AlgorithmModel, frame, y, gpus) -> dict[int, float]:
        """Log-margin per fitted tier: the least total over-reservation on the history
        subject to at most `target_underprediction` of its jobs overrunning. Misses are
        cheapest to allow where margins cost most (large models), so a Lagrangian sweep
        trades them across tiers."""
        pred = model.predict_log(frame)
        tier = model.tier_of(frame["params_b"])
        over, miss = {}, {}
        for t in model.tiers:
            rows = tier == t
            res = booked_gpu_hours(pred[rows][None, :], MARGIN_GRID[:, None], gpus[rows][None, :])
            over[t] = np.maximum(res - y[rows][None, :], 0.0).sum(axis=1)
            miss[t] = (res < y[rows][None, :]).sum(axis=1)
        budget = self.target_underprediction * len(y)
        for lam in np.concatenate([[0.0], np.geomspace(1e-3, 1e6, 400)]):
            pick = {t: int(np.argmin(over[t] + lam * miss[t])) for t in model.tiers}
            if sum(miss[t][i] for t, i in pick.items()) <= budget:
                return {t: float(MARGIN_GRID[i]) for t, i in pick.items()}
        return {t: float(MARGIN_GRID[-1]) for t in model.tiers}

    def estimate(self, X) -> pd.DataFrame:
        """`gpus`, `gpu_hours_p50` (the fitted median) and `gpu_hours_p90` (the reservation:
        margin included, whole hours). Rows of an algorithm absent from the history: NaN."""
        check_is_fitted(self)
        frame = self._frame(X)
        gpus = min_quant_gpus(frame).astype(float)
        if "gpus" in X.columns:
            asked = pd.to_numeric(X["gpus"], errors="coerce").fillna(0).to_numpy()
            gpus = np.where(asked > 0, asked, gpus)
        p50 = np.full(len(frame), np.nan)
        res = np.full(len(frame), np.nan)
        for algo, model in self.models_.items():
            rows = (frame["algorithm"] == algo).to_numpy()
            if not rows.any():
                continue
            part = frame[rows]
            log_wall = model.predict_log(part)
            margin = np.vectorize(self.margins_[algo].get)(model.tier_of(part["params_b"]))
            p50[rows] = np.exp(log_wall) * gpus[rows]
            res[rows] = booked_gpu_hours(log_wall, margin, gpus[rows])
        return pd.DataFrame({"gpus": gpus.astype(np.int64), "gpu_hours_p50": p50,
                             "gpu_hours_p90": res}, index=X.index)

    def predict(self, X) -> np.ndarray:
        """Reserved GPU-hours: whole hours, at least 1, safety margin included."""
        return self.estimate(X)["gpu_hours_p90"].to_numpy()

    def predict_median(self, X) -> np.ndarray:
        """The fitted median GPU-hours, without margin or rounding."""
        return self.estimate(X)["gpu_hours_p50"].to_numpy()

    def predict_gpus(self, X) -> np.ndarray:
        return self.estimate(X)["gpus"].to_numpy()
