"""Promotion on evidence: a newly trained estimator becomes `@champion` only when it is at
least as good as the current champion on the same held-out rows.

The held-out rows are the evaluation's own (forecasting.evaluate.split_index with the same
seed and fraction), the new version is the one fitted on the rest, and the measure is the
median absolute percentage error of the p50 GPU-hours (lower is better), the figure
docs/estimators.md reports. The champion may have seen those rows when it was fitted, which
favours the incumbent: a newcomer must win on rows only the champion could have seen.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

# Below these, a fitted estimator is mostly noise: the committed models (fitted on 4000 and
# 2000 synthetic jobs) or the size-only power law are the safer estimate. Warn, still fit.
MIN_ROWS = {"training": 500, "quantization": 200}
DATE_COLUMNS = ("submitted_at", "submitted", "submit_time", "started", "start_time",
                "finished", "end_time", "timestamp", "date")


@dataclass(frozen=True)
class Verdict:
    """Whether `kind`'s new version takes `@champion`, and the one line that says why."""

    kind: str
    promote: bool
    reason: str


def heldout_mdape(estimator: Any, X: Any, y: np.ndarray, kind: str) -> float:
    """MdAPE of the p50 GPU-hours on these rows (the same measure evaluate() reports)."""
    frame = X.drop(columns=["gpus"], errors="ignore") if kind == "quantization" else X
    p50 = np.asarray(estimator.estimate(frame)["gpu_hours_p50"], dtype=float)
    return float(np.median(np.abs(p50 / y - 1.0)))


def decide(kind: str, new_mdape: float | None, champion: tuple[Any, Any] | None,
           heldout: tuple[Any, np.ndarray] | None, *, force: bool = False) -> Verdict:
    """The verdict for one estimator. `champion` is (model, ModelRef) or None; `heldout`
    the (X, y) rows the new version was evaluated on."""
    if champion is None:
        return Verdict(kind, True, f"{kind}: no @champion yet, the new version takes it")
    model, ref = champion
    if heldout is None or new_mdape is None:
        if force:
            return Verdict(kind, True, f"{kind}: promoted by --promote (no held-out rows)")
        return Verdict(kind, False, f"{kind}: not promoted: no held-out rows to compare "
                       f"with {ref.uri} (use --promote to force)")
    try:
        old = heldout_mdape(model, heldout[0], heldout[1], kind)
    except Exception as err:  # a champion of another shape cannot be compared
        old = None
        why = f"{type(err).__name__}: {err}"
    if old is None:
        verdict = f"{kind}: champion {ref.uri} cannot score these rows ({why[:100]})"
        if force:
            return Verdict(kind, True, verdict + "; promoted by --promote")
        return Verdict(kind, False, verdict + "; not promoted (use --promote to force)")
    figures = (f"held-out MdAPE {new_mdape:.3f} vs champion {ref.uri} {old:.3f} on the same "
               f"{len(heldout[1])} rows")
    if new_mdape <= old:
        return Verdict(kind, True, f"{kind}: promoted to @champion: {figures}")
    if force:
        return Verdict(kind, True, f"{kind}: promoted by --promote although worse: {figures}")
    return Verdict(kind, False, f"{kind}: not promoted, @champion stays {ref.uri}: {figures} "
                   "(use --promote to force)")


def size_warning(kind: str, rows: int) -> str | None:
    """One line when a history is below the stated minimum for `kind`."""
    least = MIN_ROWS.get(kind)
    if least is None or rows >= least:
        return None
    return (f"gpuplan: warning: the {kind} history has {rows} completed jobs, below the "
            f"{least} an estimator needs to beat the committed models; its estimates may be "
            "worse than the physics-based prior (the memory formula and the size-only power "
            "law, see docs/estimators.md). It becomes @champion only if it wins on held-out "
            "rows.")


def date_range(path: Path) -> str:
    """The history's first and last date, from the first date-like column it has."""
    import pandas as pd

    from forecasting.history import read_table

    try:
        frame = read_table(path)
    except Exception:
        return "no readable date column"
    for column in DATE_COLUMNS:
        if column in frame.columns:
            stamps = pd.to_datetime(frame[column], errors="coerce", utc=True).dropna()
            if len(stamps):
                return (f"{column} {stamps.min().strftime('%Y-%m-%d')} .. "
                        f"{stamps.max().strftime('%Y-%m-%d')}")
    return "no date column"


def description(kind: str, history: Path, rows: int, verdict: Verdict | None,
                summary: str) -> str:
    """The model version's description: what it was fitted on and how it scored."""
    lines = [f"Fitted by `gpuplan train` on {history} ({rows} completed jobs; "
             f"{date_range(history)}).", f"Held-out evaluation: {summary}."]
    if verdict is not None:
        lines.append(f"Promotion: {verdict.reason}.")
    return "\n\n".join(lines)


def summary(report: Any, kind: str) -> str:
    """The evaluation's overall row in a few figures."""
    table = report.training if kind == "training" else report.quantization
    if table is None or not len(table):
        return "none"
    key = "variant" if kind == "training" else "algorithm"
    row = table[table[key] == "overall"].iloc[0]
    parts = [f"{int(row['jobs'])} held-out jobs", f"MdAPE {row['mdape']:.3f}"]
    if kind == "training":
        parts += [f"p90 coverage {row['p90_coverage']:.1%}", f"GPU count exact "
                  f"{row['gpu_acc']:.1%}", f"size-only baseline MdAPE {row['base_mdape']:.3f}"]
    else:
        parts += [f"under-prediction {row['under_rate']:.1%}",
                  f"mean over-reservation {row['mean_over_gpu_h']:.2f} GPU-h"]
    targets = getattr(report, "targets", None)
    if targets is not None and len(targets):
        parts.append(f"targets met {int(targets['met'].astype(bool).sum())} of {len(targets)}")
    return ", ".join(parts)


def overall_mdape(report: Any, kind: str) -> float | None:
    table = report.training if kind == "training" else report.quantization
    if table is None or not len(table):
        return None
    key = "variant" if kind == "training" else "algorithm"
    return float(table[table[key] == "overall"].iloc[0]["mdape"])
