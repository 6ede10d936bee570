"""fast's cheap pin trials (`fast.CHEAP_TRIALS`) against none, paired per scenario.

The scenarios are the first `--count` seeds of a set at `--gpus` GPUs
(`benchmarks/bench_quality.py`), plus the 64-GPU scale case of `benchmarks/bench_scale.py`
at 64 GPUs. Each count of trials is compared with no trials on the same scenario: the
objective's mean change, the scenarios it lifts, and fast's median time per call:

    python benchmarks/cheap_trials.py --set tuning --gpus 64 --count 8 --trials 1,2,12

`--whole N` adds a row for N pin trials that are whole fast runs (`fast(pin_trials=N)`).
Tuning seeds only while choosing; the test seeds are for the final report.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
import typer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from allocator import grid as gridlib  # noqa: E402
from allocator.model import Scenario  # noqa: E402
from allocator.policies.fast import fast  # noqa: E402
from benchmarks.bench_quality import cases_for, scenario_for  # noqa: E402
from benchmarks.bench_scale import ScaleCase  # noqa: E402
from benchmarks.bench_scale import scenario_for as scale_scenario  # noqa: E402

REPEATS = 5


def timed(policy: Callable[[Scenario], np.ndarray], scenario: Scenario
          ) -> tuple[float, float]:
    """The objective and the median milliseconds of REPEATS calls."""
    times = []
    grid = policy(scenario)
    for _ in range(REPEATS):
        began = time.perf_counter()
        grid = policy(scenario)
        times.append(time.perf_counter() - began)
    return gridlib.objective(scenario, grid), 1000 * statistics.median(times)


def main(which: str = typer.Option("tuning", "--set", help="tuning, tuning2 or test"),
         gpus: int = typer.Option(64, "--gpus"),
         count: int = typer.Option(8, "--count", help="first N seeds of the set"),
         trials: str = typer.Option("1,2", "--trials", help="cheap trial counts"),
         whole: int = typer.Option(0, "--whole", help="also N whole pin trials")) -> None:
    scenarios = [scenario_for(c) for c in cases_for(which, gpus, count)]
    if gpus == 64:
        scenarios.append(scale_scenario(ScaleCase(64, 30, 24)))
    rows: dict[str, Callable[[Scenario], np.ndarray]] = {
        f"{k} cheap": partial(fast, cheap_trials=k) for k in map(int, trials.split(","))}
    if whole:
        rows[f"{whole} whole"] = partial(fast, cheap_trials=0, pin_trials=whole)
    changes: dict[str, list[float]] = {name: [] for name in rows}
    millis: dict[str, list[float]] = {name: [] for name in rows}
    plain_ms = []
    for scenario in scenarios:
        plain, ms = timed(partial(fast, cheap_trials=0), scenario)
        plain_ms.append(ms)
        for name, policy in rows.items():
            value, ms = timed(policy, scenario)
            changes[name].append(100 * (value / plain - 1))
            millis[name].append(ms)
    print(f"{len(scenarios)} scenarios ({which} seeds at {gpus} GPUs); without trials: "
          f"median {statistics.median(plain_ms):.2f} ms\n")
    print("| trials | mean change | scenarios lifted | median ms |")
    print("|---|---|---|---|")
    for name in rows:
        lifted = sum(c > 1e-9 for c in changes[name])
        print(f"| {name} | {statistics.mean(changes[name]):+.2f}% | {lifted} of "
              f"{len(scenarios)} | {statistics.median(millis[name]):.2f} |")


if __name__ == "__main__":
    typer.run(main)
