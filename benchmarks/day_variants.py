"""plan-day's trial settings side by side on the tuning sets: how its defaults were chosen.

Each variant is fast with a set of trial options (`gpuplan plan-day`'s pin and defer
trials, hop rounds and trial passes), run on every scenario of the sets whose optimum the
stored 30-second run of full proved (benchmarks/stored/full30-S.json). Per variant: the
mean share of the optima (a plan at or below zero counts as 0, as in bench_quality), how
many are below 97%, the plans lifted and lowered against the first variant, and the
median milliseconds of one call at 16 GPUs:

    python benchmarks/day_variants.py --sets tuning,tuning2,tuning3,tuning4

Tuning sets only: the test set is run once, by against_stored.py, on the final code.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import typer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # benchmarks/ as a package, run as a script too

VARIANTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("24 pin, 12 defer, hops 2, one pass", {"pin_trials": 24, "defer_trials": 12, "hops": 2}),
    ("48 pin", {"pin_trials": 48, "defer_trials": 12, "hops": 2}),
    ("24 defer", {"pin_trials": 24, "defer_trials": 24, "hops": 2}),
    ("48 defer", {"pin_trials": 24, "defer_trials": 48, "hops": 2}),
    ("48 defer, 2 passes", {"pin_trials": 24, "defer_trials": 48, "hops": 2,
                            "trial_passes": 2}),
    ("48 defer, 4 passes", {"pin_trials": 24, "defer_trials": 48, "hops": 2,
                            "trial_passes": 4}),
    ("48 defer, 8 passes", {"pin_trials": 24, "defer_trials": 48, "hops": 2,
                            "trial_passes": 8}),
    ("12 defer, 4 passes", {"pin_trials": 24, "defer_trials": 12, "hops": 2,
                            "trial_passes": 4}),
)


def main(sets: str = typer.Option("tuning,tuning2,tuning3,tuning4", "--sets",
                                  help="comma-separated tuning sets")) -> None:
    """One row per variant: mean share, below 97%, lifted / lowered, ms at 16 GPUs."""
    from allocator import grid as gridlib
    from allocator.policies.fast import fast
    from benchmarks.bench_quality import SEED_SETS, scenario_for, small_cases

    names = [s for s in sets.split(",") if s]
    if any(n.startswith("test") or n not in SEED_SETS for n in names):
        raise typer.BadParameter("tuning sets only (tuning .. tuning4)", param_hint="--sets")
    rows: dict[str, dict[str, tuple[float, float, int]]] = {v: {} for v, _ in VARIANTS}
    for name in names:
        stored = json.loads((ROOT / "benchmarks" / "stored" / f"full30-{name}.json")
                            .read_text())
        for case in small_cases(SEED_SETS[name]):
            run = stored.get(case.name) or {}
            if run.get("status") != "optimal" or run["full"] <= 0:
                continue
            scenario = scenario_for(case)
            for label, options in VARIANTS:
                began = time.perf_counter()
                value = gridlib.objective(scenario, fast(scenario, **options))
                ms = 1000 * (time.perf_counter() - began)
                rows[label][case.name] = (100 * max(value, 0.0) / run["full"], ms, scenario.G)
    first = rows[VARIANTS[0][0]]
    print(f"{len(first)} proven optima in {', '.join(names)}\n")
    print("| plan-day variant | mean | below 97% | lifted / lowered | ms at 16 GPUs |")
    print("|---|---:|---:|---|---:|")
    for label, _ in VARIANTS:
        got = rows[label]
        lifted = sum(got[k][0] > first[k][0] + 1e-6 for k in got)
        lowered = sum(got[k][0] < first[k][0] - 1e-6 for k in got)
        at16 = [ms for _, ms, gpus in got.values() if gpus == 16]
        print(f"| {label} | {statistics.fmean(v[0] for v in got.values()):.2f}% | "
              f"{sum(v[0] < 97 for v in got.values())} | {lifted} / {lowered} | "
              f"{statistics.median(at16) if at16 else float('nan'):.0f} |")


if __name__ == "__main__":
    typer.run(main)
