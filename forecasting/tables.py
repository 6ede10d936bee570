"""The estimator tables as Markdown: shares as percentages, other floats to three places.

Shared by the experiments that print them (benchmarks/estimator_tables.py,
benchmarks/real_runs.py and forecasting.published).
"""

from __future__ import annotations

import pandas as pd

from allocator.core.markdown import table


def markdown(df: pd.DataFrame) -> str:
    out = df.copy()
    for col in out.columns:
        if col in ("within_2x", "p90_coverage"):
            out[col] = out[col].map(lambda v: f"{100 * v:.1f}%")
        elif out[col].dtype.kind == "f":
            out[col] = out[col].map(lambda v: f"{v:.3f}")
    return table(list(out.columns), out.to_numpy()).removesuffix("\n")  # callers print it
