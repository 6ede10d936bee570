"""Training-cost estimator: LightGBM on the log-residual over a physics prior, plus a
size-only baseline.

The prior (forecasting.prior: FLOPs over the GPU's peak times a prior MFU, plus
per-step costs) carries what physics knows, so that a job outside the history (a
new size, packing, a GPU type never seen) degrades to it gracefully; the trees fit
log(GPU-hours) minus the prior's log (LightGBM's init_score in all but name), with
`variant` and the other string features as native categoricals. `prior="ideal"`
is the estimator before the prior (the ideal hours at the bf16 peak under 6ND as
the offset), `residual=False` the prior alone with its level fitted. The median
comes from an L2 fit on logs (log-normal noise is symmetric there), the upper
quantile from LightGBM's quantile objective. The GPU count is the row's own, else
the memory formula of forecasting.memory, with one scale factor calibrated on the
observed counts.

Given a numeric array instead of a job DataFrame, the estimator fits the same two
LightGBM models on the columns as they are: that is what sklearn's conformance
checks exercise.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import ClassVar

import lightgbm as lgb
import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin, _fit_context
from sklearn.model_selection import KFold
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from forecasting.columns import GPUS, TRAINING_CATEGORICAL, TRAINING_FEATURES
from forecasting.history import clean_training, training_problems, with_canonical_gpus
from forecasting.memory import fitting_gpus, min_training_gpus
from forecasting.prior import prior_log_hours

SCALE_GRID = np.exp(np.linspace(np.log(0.8), np.log(1.25), 46))


def is_job_frame(X) -> bool:
    """True for a DataFrame carrying the 22 training features (the real use)."""
    return isinstance(X, pd.DataFrame) and all(c in X.columns for c in TRAINING_FEATURES)


def ideal_log_hours(frame: pd.DataFrame) -> np.ndarray:
    """log of GPU-hours at 100% of the bf16 peak under 6 N D, generation at 2 N per token."""
    samples = frame["dataset_samples"].to_numpy(float) * frame["epochs"].to_numpy(float)
    tokens = samples * np.minimum(frame["avg_tokens_per_sample"], frame["seq_len"]).to_numpy(float)
    gen = samples * frame["rollouts_per_prompt"].to_numpy(float) * frame["max_new_tokens"]
    n = frame["active_params_b"].to_numpy(float) * 1e9
    peak = frame["gpu_type"].map(lambda g: GPUS[g].bf16_tflops).to_numpy(float) * 1e12
    return np.log((6.0 * n * tokens + 2.0 * n * gen.to_numpy(float)) / peak / 3600.0)


PRIORS = ("physics", "ideal")


def job_design(frame: pd.DataFrame, gpus: np.ndarray, prior: str = "physics"
               ) -> tuple[pd.DataFrame, np.ndarray]:
    """(tree inputs, log-offset): the 22 features, categoricals typed, and derived ratios;
    the offset is the physics prior (forecasting.prior) or the ideal hours at 100% of
    the peak (the estimator before the prior)."""
    X = frame[list(TRAINING_FEATURES)].copy()
    for col, cats in TRAINING_CATEGORICAL.items():
        X[col] = pd.Categorical(X[col].astype(str), categories=list(cats))
    ideal = ideal_log_hours(frame)
    offset = prior_log_hours(frame, gpus) if prior == "physics" else ideal
    avg = np.minimum(frame["avg_tokens_per_sample"], frame["seq_len"]).to_numpy(float)
    n = frame["active_params_b"].to_numpy(float) * 1e9
    X["log2_gpus"] = np.log2(gpus)
    X["log_ideal_hours"] = ideal
    X["log_ideal_per_gpu"] = ideal - np.log(gpus)
    X["gen_ratio"] = np.log1p(frame["rollouts_per_prompt"] * frame["max_new_tokens"] / avg)
    X["reward_ratio"] = frame["reward_model_params_b"] / frame["active_params_b"]
    X["attention_share"] = np.log(frame["n_layers"] * frame["hidden_size"] * frame["seq_len"] / n)
    X["fill"] = avg / frame["seq_len"].to_numpy(float)
    return X, offset


class TrainingCostEstimator(RegressorMixin, BaseEstimator):
    """GPU-hours (median via predict, upper quantile via predict_upper) and GPU count."""

    _parameter_constraints: ClassVar[dict] = {
        "quantile": [Interval(Real, 0.5, 1.0, closed="neither")],
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
        "learning_rate": [Interval(Real, 0.0, None, closed="neither")],
        "num_leaves": [Interval(Integral, 2, None, closed="left")],
        "min_child_samples": [Interval(Integral, 1, None, closed="left")],
        "calibration_folds": [Interval(Integral, 2, None, closed="left"), None],
        "random_state": ["random_state"],
        "prior": [StrOptions(set(PRIORS))],
        "residual": ["boolean"],
    }

    def __init__(self, quantile=0.9, n_estimators=300, learning_rate=0.12, num_leaves=7,
                 min_child_samples=20, calibration_folds=3, random_state=0,
                 prior="physics", residual=True):
        self.quantile = quantile
        self.prior = prior
        self.residual = residual
        self.calibration_folds = calibration_folds
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.min_child_samples = min_child_samples
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.positive_only = True  # GPU-hours, modelled on logs
        return tags

    def _lgbm(self, **objective) -> lgb.LGBMRegressor:
        seed = int(self.random_state) if isinstance(self.random_state, Integral) else 0
        # A small history (a few dozen of a team's own runs) still gets leaves: at
        # least a tenth of its jobs per leaf, never more than min_child_samples.
        leaf = min(self.min_child_samples, max(3, getattr(self, "n_fit_", 10**9) // 10))
        return lgb.LGBMRegressor(
            n_estimators=self.n_estimators, learning_rate=self.learning_rate,
            num_leaves=self.num_leaves, min_child_samples=leaf,
            random_state=seed, deterministic=True, force_row_wise=True, n_jobs=1,
            verbose=-1, **objective)

    def _frame(self, X, reset: bool) -> pd.DataFrame:
        """Checked, typed 22 features of a job DataFrame (ValueError naming job and field)."""
        X = with_canonical_gpus(X)
        err = training_problems(X).first(X)
        if err:
            raise err
        frame = clean_training(X)
        validate_data(self, frame, skip_check_array=True, reset=reset)
        return frame

    def _gpus(self, X, frame: pd.DataFrame) -> np.ndarray:
        """GPUs the row asks for (a `gpus` column > 0), else the smallest that fits."""
        fits = fitting_gpus(frame, self.memory_scale_)
        if "gpus" in X.columns:
            asked = pd.to_numeric(X["gpus"], errors="coerce").fillna(0).to_numpy()
            fits = np.where(asked > 0, asked, fits).astype(np.int64)
        return fits

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, gpus=None):
        """Fit on a job history: X the 22 features, y GPU-hours, gpus the counts used."""
        self.job_frame_ = is_job_frame(X)
        if self.job_frame_:
            frame = self._frame(X, reset=True)
            y = column_or_1d(np.asarray(y, dtype=float), warn=True)
            if len(y) != len(frame):
                raise ValueError(f"X has {len(frame)} rows but y has {len(y)}")
            if gpus is None:
                self.memory_scale_ = 1.0
                used = min_training_gpus(frame, 1.0)
            else:
                used = np.asarray(gpus, dtype=np.int64)
                self.memory_scale_ = calibrate_memory_scale(frame, used)
            if np.any(used <= 0):
                raise ValueError("a job fits on no GPU count up to the maximum")
            design, offset = job_design(frame, used, self.prior)
        else:
            design, y = validate_data(self, X, y, y_numeric=True, reset=True)
            offset = np.zeros(len(y))
        if not np.all(np.isfinite(y)) or np.any(y <= 0):
            raise ValueError("GPU-hours (y) must be finite and > 0")
        # The trees fit the log-residual over the prior: the offset is LightGBM's
        # init_score in all but name (the same gradients, for L2 and quantile losses).
        target = np.log(y) - offset
        self.n_fit_ = len(target)
        self.level_ = float(np.median(target))  # the prior alone: its level, fitted
        self.upper_level_ = float(np.quantile(target, self.quantile))
        self.median_ = self._lgbm(objective="regression").fit(design, target)
        self.upper_ = self._lgbm(objective="quantile", alpha=self.quantile).fit(design, target)
        self.upper_shift_ = self._upper_shift(design, target)
        return self

    def _log_residuals(self, design) -> tuple[np.ndarray, np.ndarray]:
        """(median, upper) log-residuals over the offset: the trees', or the prior's
        fitted level when residual=False."""
        n = design.shape[0]
        if not self.residual:
            return np.full(n, self.level_), np.full(n, max(self.upper_level_, self.level_))
        lo = self.median_.predict(design, num_threads=0)
        hi = self.upper_.predict(design, num_threads=0) + self.upper_shift_
        return lo, np.maximum(hi, lo)

    def _upper_shift(self, design, target: np.ndarray) -> float:
        """Split-conformal correction: quantile trees fit in-sample cover too little out of
        sample, so shift them by the `quantile` of out-of-fold misses."""
        if self.calibration_folds is None or len(target) < 5 * self.calibration_folds:
            return 0.0
        folds = KFold(self.calibration_folds, shuffle=True, random_state=0)
        miss = np.empty(len(target))
        for fit_idx, out_idx in folds.split(target):
            part = self._lgbm(objective="quantile", alpha=self.quantile)
            part.fit(_rows(design, fit_idx), target[fit_idx])
            miss[out_idx] = target[out_idx] - part.predict(_rows(design, out_idx))
        return float(np.quantile(miss, self.quantile))

    def _design(self, X) -> tuple[pd.DataFrame | np.ndarray, np.ndarray, np.ndarray | None]:
        check_is_fitted(self)
        if self.job_frame_:
            if not is_job_frame(X):
                raise ValueError("fitted on job DataFrames: X needs the 22 training features")
            frame = self._frame(X, reset=False)
            gpus = self._gpus(X, frame)
            # A job that fits nowhere gets GPU count 0 (callers reject it); its hours are
            # still estimated, as if on one GPU.
            design, offset = job_design(frame, np.maximum(gpus, 1), self.prior)
            return design, offset, gpus
        design = validate_data(self, X, reset=False)
        return design, np.zeros(design.shape[0]), None

    def predict(self, X) -> np.ndarray:
        """Median GPU-hours."""
        design, offset, _ = self._design(X)
        return np.exp(self._log_residuals(design)[0] + offset)

    def predict_upper(self, X) -> np.ndarray:
        """Upper-quantile GPU-hours (never below the median)."""
        design, offset, _ = self._design(X)
        return np.exp(self._log_residuals(design)[1] + offset)

    def predict_gpus(self, X) -> np.ndarray:
        """GPU count: the row's own `gpus` if given, else the smallest power of two that fits
        (0 when none up to forecasting.memory.MAX_GPUS does)."""
        check_is_fitted(self)
        if not self.job_frame_:
            raise ValueError("GPU counts need job DataFrames with the 22 training features")
        return self._gpus(X, self._frame(X, reset=False))

    def estimate(self, X) -> pd.DataFrame:
        """`gpus`, `gpu_hours_p50`, `gpu_hours_p90` for job rows, in one pass."""
        design, offset, gpus = self._design(X)
        if gpus is None:
            raise ValueError("estimates need job DataFrames with the 22 training features")
        lo, hi = self._log_residuals(design)
        return pd.DataFrame({"gpus": gpus, "gpu_hours_p50": np.exp(lo + offset),
                             "gpu_hours_p90": np.exp(hi + offset)}, index=X.index)


def _rows(design, idx: np.ndarray):
    return design.iloc[idx] if isinstance(design, pd.DataFrame) else design[idx]


def calibrate_memory_scale(frame: pd.DataFrame, gpus: np.ndarray) -> float:
    """The scale on the memory formula that reproduces most observed GPU counts
    (ties go to the scale closest to 1)."""
    best, best_acc = 1.0, -1.0
    for s in sorted(SCALE_GRID, key=lambda s: abs(np.log(s))):
        acc = float(np.mean(min_training_gpus(frame, s) == gpus))
        if acc > best_acc + 1e-12:
            best, best_acc = float(s), acc
    return best


class PowerLawBaseline(RegressorMixin, BaseEstimator):
    """Size-only baseline: log GPU-hours = a + b log params_b (OLS); GPUs by nearest size."""

    def __init__(self, quantile=0.9):
        self.quantile = quantile

    def fit(self, X, y, gpus=None):
        size = np.log(np.asarray(X["params_b"], dtype=float))
        logy = np.log(np.asarray(y, dtype=float))
        self.slope_, self.intercept_ = np.polyfit(size, logy, 1)
        resid = logy - (self.intercept_ + self.slope_ * size)
        self.upper_shift_ = float(np.quantile(resid, self.quantile))
        sizes = np.asarray(X["params_b"], dtype=float)
        counts = np.asarray(gpus if gpus is not None else np.ones(len(sizes)), dtype=float)
        table = pd.Series(np.log2(counts)).groupby(sizes).median()
        self.sizes_ = table.index.to_numpy(float)
        self.gpus_ = (2.0 ** np.round(table.to_numpy())).astype(np.int64)
        return self

    def predict(self, X) -> np.ndarray:
        check_is_fitted(self)
        size = np.log(np.asarray(X["params_b"], dtype=float))
        return np.exp(self.intercept_ + self.slope_ * size)

    def predict_upper(self, X) -> np.ndarray:
        return self.predict(X) * np.exp(self.upper_shift_)

    def predict_gpus(self, X) -> np.ndarray:
        check_is_fitted(self)
        sizes = np.asarray(X["params_b"], dtype=float)
        nearest = np.abs(np.log(sizes[:, None]) - np.log(self.sizes_[None, :])).argmin(axis=1)
        return self.gpus_[nearest]
