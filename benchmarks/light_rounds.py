"""What fast's light rounds add on the hot path, by cluster size, on the tuning sets.

fast's plan with its defaults against the same plan without the light rounds
(`hot_hops=0`: no light hops, no light evacuation), per scenario of the wider family:
plans lifted and lowered by size, the mean gain in points of the stored proven optima
(benchmarks/stored/full30-S.json), and the median of the fastest of `--repeats` calls
each way, the two alternating per scenario:

    python benchmarks/light_rounds.py --sets tuning,tuning2,tuning3

Tuning sets only: the test set is run once, by against_stored.py, on the final code.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
import typer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # benchmarks/ as a package, run as a script too


def _fastest(call: Callable[[], np.ndarray], repeats: int) -> tuple[float, np.ndarray]:
    """The fastest of `repeats` calls, in ms, and the last call's result."""
    best, out = float("inf"), call()
    for _ in range(repeats):
        began = time.perf_counter()
        out = call()
        best = min(best, 1000 * (time.perf_counter() - began))
    return best, out


def main(sets: str = typer.Option("tuning,tuning2,tuning3", "--sets",
                                  help="tuning seed sets, comma-separated"),
         repeats: int = typer.Option(3, "--repeats", min=1, help="calls each way, fastest")
         ) -> None:
    from allocator import grid as gridlib
    from allocator.policies.fast import fast
    from benchmarks.bench_quality import SEED_SETS, scenario_for, small_cases

    names = sets.split(",")
    if any(n.startswith("test") or n not in SEED_SETS for n in names):
        tuning = ", ".join(n for n in SEED_SETS if not n.startswith("test"))
        raise typer.BadParameter(f"tuning sets only: {tuning}")
    rows: dict[int, list[tuple[bool, bool, float | None, float, float]]] = {}
    for name in names:
        stored = json.loads((ROOT / "benchmarks" / "stored" / f"full30-{name}.json").read_text())
        for case in small_cases(SEED_SETS[name]):
            scenario = scenario_for(case)
            off_ms, off = _fastest(partial(fast, scenario, hot_hops=0), repeats)
            on_ms, on = _fastest(partial(fast, scenario), repeats)
            a, b = gridlib.objective(scenario, on), gridlib.objective(scenario, off)
            row = stored.get(case.name, {})
            gain = 100 * (a - b) / row["full"] if row.get("status") == "optimal" else None
            rows.setdefault(scenario.G, []).append((a > b + 1e-6, a < b - 1e-6, gain, off_ms,
                                                    on_ms))
    print("| GPUs | scenarios | lifted | lowered | mean gain (points of the proven optima) "
          "| median ms, off -> on |")
    print("|---|---|---|---|---|---|")
    for gpus in sorted(rows):
        got = rows[gpus]
        gains = [g for _, _, g, _, _ in got if g is not None]
        print(f"| {gpus} | {len(got)} | {sum(r[0] for r in got)} | {sum(r[1] for r in got)} | "
              f"{statistics.fmean(gains) if gains else 0.0:+.3f} | "
              f"{statistics.median(r[3] for r in got):.2f} -> "
              f"{statistics.median(r[4] for r in got):.2f} |")


if __name__ == "__main__":
    typer.run(main)
