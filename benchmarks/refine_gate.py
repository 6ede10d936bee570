"""`gpuplan plan`'s refinement: how many plans each threshold sends to the daily plan's
trials, what it buys and what it costs.

Each scenario is planned once three ways, as `make_plan` does it: fast's hot path, its
proven bound (`bound="auto"`), and fast with the daily plan's trials
(`allocator.refine.DAY_TRIALS`). A threshold then keeps the hot plan, or (where
`refine.wanting` says so) the better of the two; its time per plan is the hot path and the
bound, plus the trials where it refines. Against the stored proven optima of a family set
(8-16 GPUs), at cluster scale (`--gpus 64`: no optima, against the best of the two ways),
or on the real Philly weeks' replans (`--philly 14,16`):

    python benchmarks/refine_gate.py --sets tuning,tuning2,tuning3,tuning4
    python benchmarks/refine_gate.py --sets tuning --gpus 64
    python benchmarks/refine_gate.py --philly 14,16 --starts 2017-10-30,2017-11-06

Tuning sets and weeks choose the threshold; `--sets test` and the test week
(2017-11-13) are run once, on the final code (BENCHMARKS.md, "Quality on a wider family").
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import typer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # benchmarks/ as a package, run as a script too


def judge(scenario: Any) -> dict[str, Any]:
    """The hot plan, its bound and the trials' plan of one scenario, each timed."""
    from allocator import grid as gridlib
    from allocator.plan import prove_bound
    from allocator.policies.fast import fast
    from allocator.refine import DAY_TRIALS

    began = time.perf_counter()
    hot = gridlib.objective(scenario, fast(scenario))
    hot_s = time.perf_counter() - began
    began = time.perf_counter()
    proven = prove_bound(scenario, hot, "auto") or {}
    bound_s = time.perf_counter() - began
    began = time.perf_counter()
    day = gridlib.objective(scenario, fast(scenario, **DAY_TRIALS))
    day_s = time.perf_counter() - began
    from allocator.refine import affordable

    return {"name": scenario.name, "affordable": affordable(scenario), "hot": hot, "day": day,
            "bound": proven.get("value"), "ms": [1000 * hot_s, 1000 * bound_s, 1000 * day_s]}


def gated(row: dict[str, Any], below: float) -> tuple[float, float, bool]:
    """(objective, milliseconds, refined) of `make_plan(..., refine_below=below)`."""
    from allocator import refine

    hot_ms, bound_ms, day_ms = row["ms"]
    if row["affordable"] and refine.wanting(row["hot"], row["bound"], below):
        return max(row["hot"], row["day"]), hot_ms + bound_ms + day_ms, True
    return row["hot"], hot_ms + bound_ms, False


def report(rows: list[dict[str, Any]], thresholds: list[float],
           reference: dict[str, float] | None, label: str) -> None:
    """One table row per threshold: refined plans, shares of the reference, time a plan."""
    if reference is None:  # against the best of the two ways
        reference = {r["name"]: max(r["hot"], r["day"]) for r in rows}
    judged = [r for r in rows if reference.get(r["name"], 0) > 0]
    print(f"\n{label}: {len(rows)} plans, {len(judged)} with a positive reference\n")
    print("| refine below | refined | lifted | mean share | min | below 97% | ms a plan: "
          "mean / median / max |")
    print("|---|---|---|---|---|---|---|")
    for below in thresholds:
        outs = [gated(r, below) for r in rows]
        shares = [max(o[0], 0) / reference[r["name"]] for r, o in zip(rows, outs, strict=True)
                  if r in judged]
        ms = [o[1] for o in outs]
        refined = sum(o[2] for o in outs)
        lifted = sum(o[2] and o[0] > r["hot"] + 1e-9 for r, o in zip(rows, outs, strict=True))
        name = "never (the hot path)" if below == 0 else f"{100 * below:g}%"
        print(f"| {name} | {refined} | {lifted} | {100 * statistics.fmean(shares):.3f}% | "
              f"{100 * min(shares):.2f}% | {sum(s < 0.97 for s in shares)} | "
              f"{statistics.fmean(ms):.1f} / {statistics.median(ms):.1f} / {max(ms):.0f} |")
    day = [max(r["day"], 0) / reference[r["name"]] for r in judged]
    print(f"| always (plan-day's fast) | | | {100 * statistics.fmean(day):.3f}% | "
          f"{100 * min(day):.2f}% | {sum(s < 0.97 for s in day)} | "
          f"{statistics.fmean(r['ms'][2] for r in rows):.1f} (the trials alone) |")


def main(sets: str = typer.Option("", "--sets", help="family seed sets, comma-separated"),
         gpus: int = typer.Option(16, "--gpus", help="16: the small family; 64 or 256"),
         count: int | None = typer.Option(None, "--count", help="first N seeds of each set"),
         philly: str = typer.Option("", "--philly", help="the Philly weeks' replans at these "
                                                         "sizes, comma-separated"),
         starts: str = typer.Option("2017-10-30,2017-11-06", "--starts",
                                    help="--philly: the weeks' first days"),
         every: int = typer.Option(12, "--every", help="--philly: hours between replans"),
         below: str = typer.Option("0,0.97,0.98,0.99,1", "--below",
                                   help="thresholds, shares of the bound"),
         workers: int = typer.Option(2, "--workers")) -> None:
    from benchmarks.bench import machine

    thresholds = [float(x) for x in below.split(",")]
    print(f"Machine: {machine()}; workers {workers} (the times are per plan, in one process)")
    if sets:
        from benchmarks.bench_quality import cases_for, scenario_for

        for set_name in sets.split(","):
            scenarios = [scenario_for(c) for c in cases_for(set_name, gpus, count)]
            with ProcessPoolExecutor(workers) as pool:
                rows = list(pool.map(judge, scenarios))
            reference = None
            stored = ROOT / "benchmarks" / "stored" / f"full30-{set_name}.json"
            if gpus <= 16 and stored.exists():  # the proven optima only
                reference = {k: v["full"] for k, v in json.loads(stored.read_text()).items()
                             if v["status"] == "optimal"}
            what = "proven optima" if reference else "the best of the two ways"
            report(rows, thresholds, reference, f"{set_name}, {gpus} GPUs, against {what}")
    for size in (int(x) for x in philly.split(",") if x):
        from benchmarks.real_snapshots import snapshots

        for start in starts.split(","):
            scenarios = snapshots(size, start, every, 0.3)
            with ProcessPoolExecutor(workers) as pool:
                rows = list(pool.map(judge, scenarios))
            report(rows, thresholds, None,
                   f"Philly week from {start}, {size} GPUs, every {every} h, against the "
                   "best of the two ways")


if __name__ == "__main__":
    typer.run(main)
