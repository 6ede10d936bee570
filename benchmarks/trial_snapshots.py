"""fast's pin and defer trials and realtime hops on the scenarios a real week puts in front
of the planner.

The Philly weeks of `gpuplan simulate --philly` (benchmarks/real_snapshots.py's snapshots:
every `--every` hours, those with a queued job left) are planned four ways: fast alone,
fast with its pin trials (`gpuplan plan-day`'s 24 until defer trials came), plan-day's
settings before the trial passes (12 defer trials, two rounds of hops, one pass), and as
plan-day plans now (48 defer trials, up to 4 passes of the trials and hops).
Each is printed against the best of the four, with the snapshots the last way lifts and
lowers against the one before it and their mean change, and the median milliseconds per
plan:

    python benchmarks/trial_snapshots.py --gpus 16,32 --every 12

The weeks from 2017-10-30 and 2017-11-06 were the tuning weeks of real_snapshots.py, the
week from 2017-11-13 its test week. Hops run up to 16 GPUs only (fast.hopped), so at 32
the last two ways are one.
"""

from __future__ import annotations

import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import typer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from allocator.policies.refine import DAY_TRIALS  # noqa: E402
from benchmarks.real_snapshots import snapshots  # noqa: E402

WAYS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("fast", {}), ("pin 24", {"pin_trials": DAY_TRIALS["pin_trials"]}),
    ("pin 24 + defer 12 + hops 2, one pass", {"pin_trials": 24, "defer_trials": 12,
                                              "hops": 2}),
    ("plan-day (defer 48, 4 passes)", DAY_TRIALS))


def judge(scenario: Any) -> tuple[list[float], list[float]]:
    """Objective and milliseconds of each way on one snapshot."""
    from allocator import grid as gridlib
    from allocator.policies.fast import fast

    values, ms = [], []
    for _, options in WAYS:
        began = time.perf_counter()
        grid = fast(scenario, **options)
        ms.append(1000 * (time.perf_counter() - began))
        values.append(gridlib.objective(scenario, grid))
    return values, ms


def main(gpus: str = typer.Option("16,32", "--gpus"),
         every: int = typer.Option(12, "--every", help="hours between snapshots"),
         starts: str = typer.Option("2017-10-30,2017-11-06,2017-11-13", "--starts"),
         realtime_share: float = typer.Option(0.3, "--realtime-share"),
         workers: int = typer.Option(2, "--workers")) -> None:
    """Per size and week: each way's mean share of the best of them."""
    print(f"| GPUs | week | snapshots | {' | '.join(n for n, _ in WAYS)} | "
          "last way against the one before: lifts / lowers, mean change | ms per plan |")
    print("|---|---|---:|" + "---:|" * len(WAYS) + "---|---|")
    for g in (int(x) for x in gpus.split(",")):
        for start in starts.split(","):
            scenarios = snapshots(g, start, every, realtime_share)
            with ProcessPoolExecutor(workers) as pool:
                rows = list(pool.map(judge, scenarios))
            kept = [(v, ms) for v, ms in rows if max(v) > 0]  # a ratio means nothing <= 0
            shares = [[100 * x / max(v) for x in v] for v, _ in kept]
            means = [statistics.fmean(s[k] for s in shares) for k in range(len(WAYS))]
            change = [v[-1] / v[-2] - 1 for v, _ in kept if v[-2] > 0]
            lifts = sum(c > 1e-9 for c in change)
            lowers = sum(c < -1e-9 for c in change)
            mean = 100 * statistics.fmean(change) if change else 0.0
            ms = [statistics.median(m[k] for _, m in kept) for k in range(len(WAYS))]
            print(f"| {g} | {start} | {len(kept)} | "
                  + " | ".join(f"{m:.2f}%" for m in means)
                  + f" | {lifts} / {lowers}, {mean:+.2f}% | "
                  + " / ".join(f"{x:.0f}" for x in ms) + " |", flush=True)


if __name__ == "__main__":
    typer.run(main)
