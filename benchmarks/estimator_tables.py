"""The tables that chose the training-cost estimator: `python benchmarks/estimator_tables.py`.

Three candidates, on the same held-out split of the bundled history and on the real
fine-tuning runs (benchmarks/real_runs.py):
- `ideal+trees`: LightGBM over the ideal hours at 100% of the peak (the estimator
  before the physics prior);
- `prior`: the physics prior alone (forecasting.prior), its level fitted on the history;
- `prior+trees`: LightGBM on the log-residual over the prior (the estimator now).
Each is fitted on the bundled (synthetic) history, on it plus the calibration half of
the real runs (what `models/` is fitted on), and on the calibration runs alone (a
team's own small history); the report half of the real runs is scored. The learning
curve fits on the first 50, 200 and 1000 jobs of the bundled history's fit part and
scores its held-out part.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import typer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.real_runs import ratio_summary, real_runs  # noqa: E402
from forecasting.evaluate import join_histories, split_index  # noqa: E402
from forecasting.history import clean_training, load_training_history  # noqa: E402
from forecasting.tables import markdown  # noqa: E402
from forecasting.training import TrainingCostEstimator  # noqa: E402

CANDIDATES = {
    "ideal+trees": {"prior": "ideal", "residual": True},
    "prior": {"prior": "physics", "residual": False},
    "prior+trees": {"prior": "physics", "residual": True},
}
CURVE_SIZES = (50, 200, 1000)


def _fit(name: str, X, y, g) -> TrainingCostEstimator:
    return TrainingCostEstimator(**CANDIDATES[name]).fit(X, y, gpus=g)


def _scores(est, X, y, g) -> dict:
    """As `gpuplan train`'s evaluation: GPU counts from the memory model, not given."""
    e = est.estimate(X)
    r = e["gpu_hours_p50"].to_numpy() / y
    return {"mdape": float(np.median(np.abs(r - 1.0))),
            "within_2x": float(np.mean((r >= 0.5) & (r <= 2.0))),
            "median_ratio": float(np.median(r)),
            "p90_coverage": float(np.mean(y <= e["gpu_hours_p90"].to_numpy()))}


def _calibration_history() -> tuple:
    runs = real_runs()
    cal = runs[runs.split == "calibration"]
    return clean_training(cal), cal.gpus.to_numpy(), cal.gpu_hours.to_numpy()


def synthetic_table(history: Path, test_fraction: float = 0.25, seed: int = 0) -> pd.DataFrame:
    X, g, y = load_training_history(history)
    fit, test = split_index(len(y), test_fraction, seed)
    own = (X.iloc[fit], g[fit], y[fit])
    fits = {"bundled history": own,
            "bundled + calibration runs": join_histories(own, _calibration_history())}
    rows = []
    for hist_name, (Xf, gf, yf) in fits.items():
        for name in CANDIDATES:
            est = _fit(name, Xf, yf, gf)
            rows.append({"model": name, "fitted on": hist_name,
                         **_scores(est, X.iloc[test], y[test], g[test])})
    return pd.DataFrame(rows)


def real_table(history: Path) -> pd.DataFrame:
    """Each candidate on the report runs, fitted on the bundled history or on the
    calibration runs; per source and overall."""
    runs = real_runs()
    rep = runs[runs.split == "report"]
    bundled = load_training_history(history)
    cal = _calibration_history()
    fits = {"bundled history": bundled,
            "bundled + calibration runs": join_histories(bundled, cal),
            "calibration runs": cal}
    rows = []
    for hist_name, (X, g, y) in fits.items():
        for name in CANDIDATES:
            est = _fit(name, X, y, g)
            pred = est.predict(clean_training(rep).assign(gpus=rep.gpus.to_numpy()))
            groups = [(s, (rep.source == s).to_numpy()) for s in sorted(rep.source.unique())]
            for src, m in [*groups, ("all report runs", np.ones(len(rep), bool))]:
                rows.append({"model": name, "fitted on": hist_name, "report runs": src,
                             **ratio_summary(pred[m], rep.gpu_hours.to_numpy()[m])})
    return pd.DataFrame(rows)


EXTRAPOLATIONS = {
    "models >= 30B, fitted on <= 14B": (lambda X: X["params_b"] <= 14,
                                        lambda X: X["params_b"] >= 30),
    "H200 and L40S, fitted on A100 and H100": (
        lambda X: X["gpu_type"].isin(["A100-40GB", "A100-80GB", "H100-80GB"]),
        lambda X: X["gpu_type"].isin(["H200-141GB", "L40S-48GB"])),
    "packed jobs, fitted on unpacked": (lambda X: X["packing"] == 0,
                                        lambda X: X["packing"] == 1),
}


def extrapolation_table(history: Path, test_fraction: float = 0.25, seed: int = 0
                        ) -> pd.DataFrame:
    """Fit on the fit part restricted to one region, score the held-out jobs outside it."""
    X, g, y = load_training_history(history)
    fit, test = split_index(len(y), test_fraction, seed)
    rows = []
    for case, (inside, outside) in EXTRAPOLATIONS.items():
        f = fit[inside(X.iloc[fit]).to_numpy()]
        t = test[outside(X.iloc[test]).to_numpy()]
        for name in CANDIDATES:
            est = _fit(name, X.iloc[f], y[f], g[f])
            rows.append({"held-out jobs": case, "fit jobs": len(f), "scored": len(t),
                         "model": name, **_scores(est, X.iloc[t], y[t], g[t])})
    return pd.DataFrame(rows)


def learning_curve(history: Path, test_fraction: float = 0.25, seed: int = 0) -> pd.DataFrame:
    X, g, y = load_training_history(history)
    fit, test = split_index(len(y), test_fraction, seed)
    rows = []
    for n in CURVE_SIZES:
        part = fit[:n]
        for name in ("prior", "prior+trees"):
            est = _fit(name, X.iloc[part], y[part], g[part])
            rows.append({"history rows": n, "model": name,
                         **_scores(est, X.iloc[test], y[test], g[test])})
    return pd.DataFrame(rows)


def main(
    history: Path = typer.Option(Path("data/history/training.csv"), "--history"),
    only: str | None = typer.Option(None, "--only",
                                    help="synthetic, extrapolation, real or curve"),
) -> None:
    """The tables that chose the training-cost estimator (all four, or --only one)."""
    parts = {"synthetic": ("Held-out split of the bundled history (25%, seed 0)",
                           synthetic_table),
             "extrapolation": ("Outside the history: held-out jobs unlike any fitted one",
                               extrapolation_table),
             "real": ("Report half of the real runs", real_table),
             "curve": ("Learning curve: the history's first n jobs, held-out split",
                       learning_curve)}
    if only is not None and only not in parts:
        raise typer.BadParameter(", ".join(parts), param_hint="--only")
    for key, (title, fn) in parts.items():
        if only in (None, key):
            print(f"### {title}\n\n{markdown(fn(history))}\n")
            sys.stdout.flush()


if __name__ == "__main__":
    typer.run(main)
