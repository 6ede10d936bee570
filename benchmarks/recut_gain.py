"""What the re-cuts (allocator/policies/recut.py) add, plan by plan: fast with and without
them, in one process, alternating per scenario.

By default fast runs with plan-day's trials and hops (where the re-cuts run); `--hot`
instead sets the hot path's `HOT_RECUT_ROUNDS` to 1 against its default (off), and
`--trials N` caps the re-cuts judged per round (`recut.MAX_TRIALS`). Up to 16 GPUs the
family's plans are also set against the optima the stored 30-second run of full proved
(benchmarks/stored/full30-S.json); at 64 or 256 GPUs only the change is reported:

    python benchmarks/recut_gain.py --sets tuning,tuning2,tuning3,tuning4
    python benchmarks/recut_gain.py --sets tuning --gpus 64
    python benchmarks/recut_gain.py --sets tuning,tuning2,tuning3,tuning4 --hot --trials 8

Tuning sets while changing the re-cuts; `--sets test` once, on the final code.
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


def main(sets: str = typer.Option("tuning", "--sets", help="comma-separated seed sets"),
         gpus: int = typer.Option(16, "--gpus", help="16: the small family; 64 or 256"),
         count: int | None = typer.Option(None, "--count", help="first N seeds of each set"),
         hot: bool = typer.Option(False, "--hot", help="the hot path, one round of re-cuts"),
         trials: int | None = typer.Option(None, "--trials", help="re-cuts judged per round")
         ) -> None:
    from allocator import grid as gridlib
    from allocator.policies import fast as fastmod
    from allocator.policies import recut
    from allocator.policies.refine import DAY_TRIALS
    from benchmarks.bench_quality import cases_for, scenario_for

    constant = "HOT_RECUT_ROUNDS" if hot else "RECUT_ROUNDS"
    options = {} if hot else DAY_TRIALS
    on = 1 if hot else fastmod.RECUT_ROUNDS
    if trials is not None:
        recut.MAX_TRIALS = trials

    def planned(scenario: Any, rounds: int) -> tuple[float, float]:
        setattr(fastmod, constant, rounds)
        began = time.perf_counter()
        grid = fastmod.fast(scenario, **options)
        return time.perf_counter() - began, gridlib.objective(scenario, grid)

    rows: list[tuple[str, float, float, float | None]] = []  # name, without, with, optimum
    seconds = [0.0, 0.0]
    for name in sets.split(","):
        stored: dict[str, Any] = {}
        path = ROOT / "benchmarks" / "stored" / f"full30-{name}.json"
        if gpus <= 16 and path.exists():
            stored = json.loads(path.read_text())
        for case in cases_for(name, gpus, count):
            scenario = scenario_for(case)
            spent_off, off = planned(scenario, 0)
            spent_on, got = planned(scenario, on)
            seconds[0] += spent_off
            seconds[1] += spent_on
            row = stored.get(case.name)
            optimum = row["full"] if row and row["status"] == "optimal" and row["full"] > 0 \
                else None
            rows.append((case.name, off, got, optimum))
            if abs(got - off) > 1e-9:
                print(f"  {case.name}: {off:.2f} -> {got:.2f}", flush=True)
    change = [(got - off) / max(abs(off), 1.0) for _, off, got, _ in rows]
    print(f"{sets} at {gpus} GPUs, {'hot path' if hot else 'plan-day'}: {len(rows)} plans, "
          f"{sum(c > 1e-12 for c in change)} up, {sum(c < -1e-12 for c in change)} down, "
          f"mean change {100 * statistics.fmean(change):+.3f}%; time x"
          f"{seconds[1] / seconds[0]:.3f} ({1000 * seconds[0] / len(rows):.1f} -> "
          f"{1000 * seconds[1] / len(rows):.1f} ms a plan)")
    proven = [(max(off, 0.0) / best, max(got, 0.0) / best)
              for _, off, got, best in rows if best is not None]
    if proven:
        for label, k in (("without", 0), ("with", 1)):
            shares = [p[k] for p in proven]
            print(f"  {label} re-cuts, of {len(proven)} proven optima: mean "
                  f"{100 * statistics.fmean(shares):.3f}%, min {100 * min(shares):.2f}%, "
                  f"below 97% {sum(s < 0.97 for s in shares)}")


if __name__ == "__main__":
    typer.run(main)
