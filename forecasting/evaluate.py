"""Held-out evaluation of the estimators against the issue's targets, as tables.

Everything in the report is recomputed from a history file and a seed: split,
fit on the training part, score the held-out part, compare with the size-only
baseline and with the published quantization timings.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from allocator.core.markdown import table as markdown_table
from forecasting.memory import min_training_gpus
from forecasting.published import published_frame
from forecasting.quantization import QuantizationCostEstimator, booked_gpu_hours
from forecasting.training import PowerLawBaseline, TrainingCostEstimator


def split_index(n: int, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(fit rows, held-out rows): a seeded random split."""
    order = np.random.default_rng(seed).permutation(n)
    n_test = max(1, round(n * test_fraction))
    return np.sort(order[n_test:]), np.sort(order[:n_test])


def _metrics(p50, p90, gpus_pred, y, gpus) -> dict:
    ratio = p50 / y
    return {"mdape": float(np.median(np.abs(ratio - 1.0))),
            "within_2x": float(np.mean((ratio >= 0.5) & (ratio <= 2.0))),
            "p90_coverage": float(np.mean(y <= p90)),
            "gpu_acc": float(np.mean(gpus_pred == gpus))}


def training_table(est, base, X: pd.DataFrame, y: np.ndarray, gpus: np.ndarray) -> pd.DataFrame:
    """Per variant and overall: model and baseline metrics on held-out jobs."""
    e = est.estimate(X)
    cols = {"model": (e["gpu_hours_p50"].to_numpy(), e["gpu_hours_p90"].to_numpy(),
                      e["gpus"].to_numpy()),
            "baseline": (base.predict(X), base.predict_upper(X), base.predict_gpus(X))}
    groups = [(v, (X["variant"] == v).to_numpy()) for v in sorted(X["variant"].unique())]
    rows = []
    for name, mask in [*groups, ("overall", np.ones(len(X), bool))]:
        row = {"variant": name, "jobs": int(mask.sum())}
        for who, (p50, p90, g) in cols.items():
            for k, v in _metrics(p50[mask], p90[mask], g[mask], y[mask], gpus[mask]).items():
                row[f"{k}" if who == "model" else f"base_{k}"] = v
        rows.append(row)
    return pd.DataFrame(rows)


def quant_table(est, X: pd.DataFrame, y: np.ndarray, gpus: np.ndarray) -> pd.DataFrame:
    """Per algorithm and overall: median error, under-prediction rate, over-reservation."""
    e = est.estimate(X.drop(columns=["gpus"], errors="ignore"))
    reserved = e["gpu_hours_p90"].to_numpy()
    p50 = e["gpu_hours_p50"].to_numpy()
    rows = []
    algos = [(a, (X["algorithm"] == a).to_numpy()) for a in sorted(X["algorithm"].unique())]
    for name, m in [*algos, ("overall", np.ones(len(X), bool))]:
        rows.append({"algorithm": name, "jobs": int(m.sum()),
                     "mdape": float(np.median(np.abs(p50[m] / y[m] - 1.0))),
                     "under_rate": float(np.mean(reserved[m] < y[m])),
                     "mean_over_gpu_h": float(np.mean(np.maximum(reserved[m] - y[m], 0.0))),
                     "gpu_acc": float(np.mean(e["gpus"].to_numpy()[m] == gpus[m]))})
    return pd.DataFrame(rows)


MARGINS = (0.0, 0.1, 0.2, 0.3, 0.5)

# A cost history as the estimators read it: (features X, GPUs per job, GPU-hours per job).
History = tuple[pd.DataFrame, np.ndarray, np.ndarray]


def margin_tradeoff(est, X: pd.DataFrame, y: np.ndarray, gpus: np.ndarray) -> pd.DataFrame:
    """What one uniform log-margin per algorithm would give on held-out jobs: the price of
    the over-reservation target in under-prediction."""
    rows = []
    for algo, model in est.models_.items():
        m = (X["algorithm"] == algo).to_numpy()
        if not m.any():
            continue
        log_wall = model.predict_log(X[m])
        for margin in MARGINS:
            r = booked_gpu_hours(log_wall, margin, gpus[m])
            rows.append({"algorithm": algo, "margin": f"x{np.exp(margin):.2f}",
                         "under_rate": float(np.mean(r < y[m])),
                         "mean_over_gpu_h": float(np.mean(np.maximum(r - y[m], 0.0)))})
    return pd.DataFrame(rows)


def published_table(est) -> pd.DataFrame:
    """Each published timing beside the estimate for that job: it must not be higher."""
    pub = published_frame()
    e = est.estimate(pub.drop(columns=["gpu_hours", "source"]))
    return pd.DataFrame({"source": pub["source"], "gpus": e["gpus"],
                         "published_gpu_h": pub["gpu_hours"],
                         "estimate_gpu_h": e["gpu_hours_p90"],
                         "ok": e["gpu_hours_p90"] >= pub["gpu_hours"]})


@dataclass
class Report:
    """The evaluation's tables and the target checks, ready to print or write."""

    training: pd.DataFrame | None
    quantization: pd.DataFrame | None
    published: pd.DataFrame | None
    targets: pd.DataFrame
    setup: dict
    tradeoff: pd.DataFrame | None = None


def target_checks(training: pd.DataFrame | None, quant: pd.DataFrame | None,
                  published: pd.DataFrame | None, noise_floor: float | None) -> pd.DataFrame:
    """The issue's targets, each with the measured figure and whether it is met."""
    rows = []
    if training is not None:
        o = training[training["variant"] == "overall"].iloc[0]
        if noise_floor:
            ratio = o["mdape"] / noise_floor
            rows.append(("training MdAPE <= 1.25x noise floor",
                         f"{o['mdape']:.3f} = {ratio:.2f}x floor {noise_floor:.3f}", ratio <= 1.25))
        gain = o["base_mdape"] / o["mdape"]
        rows.append(("training MdAPE >= 3x lower than baseline",
                     f"{o['base_mdape']:.3f} / {o['mdape']:.3f} = {gain:.1f}x", gain >= 3))
        formula = training.attrs.get("formula_gpu_acc")
        note = f" (uncalibrated memory formula: {formula:.1%})" if formula is not None else ""
        rows.append(("GPU count exact >= 95%", f"{o['gpu_acc']:.1%}{note}",
                     o["gpu_acc"] >= 0.95))
        rows.append(("p90 covers 85-95%", f"{o['p90_coverage']:.1%}",
                     0.85 <= o["p90_coverage"] <= 0.95))
    if quant is not None:
        for _, r in quant[quant["algorithm"] != "overall"].iterrows():
            rows.append((f"{r['algorithm']}: under-prediction <= 5%", f"{r['under_rate']:.1%}",
                         r["under_rate"] <= 0.05))
            rows.append((f"{r['algorithm']}: mean over-reservation <= 1 GPU-h",
                         f"{r['mean_over_gpu_h']:.2f}", r["mean_over_gpu_h"] <= 1.0))
    if published is not None:
        rows.append(("no published timing above its estimate",
                     f"{int(published['ok'].sum())}/{len(published)}", bool(published["ok"].all())))
    return pd.DataFrame(rows, columns=["target", "measured", "met"])


def evaluate(train_hist: History | None, quant_hist: History | None, *,
             test_fraction: float = 0.25, seed: int = 0, noise_floor: float | None = None,
             training_params: dict[str, object] | None = None,
             extra_training: History | None = None) -> Report:
    """Fit on a seeded split of each history (X, gpus, gpu_hours) and score the rest;
    `extra_training` (X, gpus, gpu_hours) joins the training fit, never the held-out part."""
    tt = qt = pt = tr = None
    setup: dict[str, object] = {"test_fraction": test_fraction, "seed": seed,
                                "noise_floor_mdape": noise_floor}
    if train_hist is not None:
        X, g, y = train_hist
        fit, test = split_index(len(y), test_fraction, seed)
        Xf, gf, yf = join_histories((X.iloc[fit], g[fit], y[fit]), extra_training)
        est = TrainingCostEstimator(**(training_params or {}))
        est.fit(Xf, yf, gpus=gf)
        base = PowerLawBaseline().fit(Xf, yf, gpus=gf)
        tt = training_table(est, base, X.iloc[test], y[test], g[test])
        tt.attrs["formula_gpu_acc"] = float(np.mean(min_training_gpus(X.iloc[test]) == g[test]))
        setup["training_jobs"] = {"fit": len(fit), "held_out": len(test)}
    if quant_hist is not None:
        X, g, y = quant_hist
        fit, test = split_index(len(y), test_fraction, seed)
        q = QuantizationCostEstimator().fit(X.iloc[fit], y[fit], gpus=g[fit])
        qt = quant_table(q, X.iloc[test], y[test], g[test])
        pt = published_table(q)
        tr = margin_tradeoff(q, X.iloc[test], y[test], g[test])
        setup["quantization_jobs"] = {"fit": len(fit), "held_out": len(test)}
    return Report(tt, qt, pt, target_checks(tt, qt, pt, noise_floor), setup, tr)


def join_histories(*parts: History | None) -> History:
    """(X, gpus, gpu_hours) of several histories, one after the other (None skipped)."""
    present = [p for p in parts if p is not None]
    return (pd.concat([p[0] for p in present], ignore_index=True),
            np.concatenate([np.asarray(p[1]) for p in present]),
            np.concatenate([np.asarray(p[2], dtype=np.float64) for p in present]))


def _fmt(df: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    for col in out.columns:
        if out[col].dtype == float:
            pct = any(k in col for k in ("within", "coverage", "acc", "rate"))
            out[col] = out[col].map((lambda v: f"{v:.1%}") if pct else (lambda v: f"{v:.3f}"))
    return out


def describe_setup(setup: dict) -> str:
    """One sentence on the split and the noise floor the MdAPE is judged by."""
    parts = [f"held-out share {setup['test_fraction']:.0%}, split seed {setup['seed']}"]
    for what in ("training", "quantization"):
        jobs = setup.get(f"{what}_jobs")
        if jobs:
            parts.append(f"{what}: fit on {jobs['fit']} jobs, scored on {jobs['held_out']}")
    floor = setup.get("noise_floor_mdape")
    parts.append(f"noise-floor MdAPE {floor:.3f}" if floor else "noise floor unknown")
    return "Split: " + "; ".join(parts) + "."


def to_markdown(report: Report, command: str) -> str:
    """The report as Markdown, headed by the command that reproduces it."""
    parts = ["# Estimator evaluation", "", f"Reproduce with `{command}`.", "",
             describe_setup(report.setup), ""]

    def table(df: pd.DataFrame) -> list[str]:
        df = _fmt(df).astype(str)
        return [*markdown_table(list(df.columns), df.itertuples(index=False)).splitlines(), ""]

    if report.training is not None:
        parts += ["## Training cost (GPU-hours; `base_` = size-only power law)", "",
                  *table(report.training)]
    if report.quantization is not None:
        parts += ["## Quantization cost (reservation = margin + rounding up)", "",
                  *table(report.quantization)]
    if report.tradeoff is not None:
        parts += ["## One uniform margin instead (held-out): under-prediction vs "
                  "over-reservation", "", *table(report.tradeoff)]
    if report.published is not None:
        parts += ["## Published timings (docs/sources.md) against the estimate", "",
                  *table(report.published)]
    parts += ["## Targets", "", *table(report.targets.assign(
        met=report.targets["met"].map({True: "met", False: "MISSED"})))]
    return "\n".join(parts)


def print_report(report: Report, console) -> None:
    """The same tables through rich."""
    from rich.table import Table

    def show(df: pd.DataFrame, title: str) -> None:
        t = Table(title=title)
        df = _fmt(df).astype(str)
        for c in df.columns:
            t.add_column(c)
        for r in df.itertuples(index=False):
            t.add_row(*r)
        console.print(t)

    console.print(describe_setup(report.setup))
    if report.training is not None:
        show(report.training, "Training cost, held-out (base_ = size-only power law)")
    if report.quantization is not None:
        show(report.quantization, "Quantization cost, held-out")
    if report.tradeoff is not None:
        show(report.tradeoff, "One uniform margin instead (held-out)")
    if report.published is not None:
        show(report.published, "Published timings vs estimate")
    show(report.targets.assign(met=report.targets["met"].map({True: "met", False: "MISSED"})),
         "Targets")
