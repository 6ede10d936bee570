"""`gpuplan plan`'s refinement: how many plans each threshold sends to the daily plan's
trials, what it buys and what it costs.

Each scenario is planned once each way `make_plan` may: fast's hot path, its proven bound
(`bound="auto"`), and the refinement's candidates (`allocator.policies.refine.candidates`: the
hot path with the services' exchange, fast with the daily plan's trials where they are
affordable). A threshold then keeps the hot plan, or (where `refine.wanting` says so) the
best of them; its time per plan is the hot path and the bound, plus the candidates where
it refines. Against the stored proven optima of a family set (8-16 GPUs), at cluster scale
(`--gpus 64`: no optima, against the best of the ways), or on the real Philly weeks'
replans (`--philly 14,16`):

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
    """The hot plan, its bound and each refinement candidate's plan of one scenario, each
    timed (the candidates as `allocator.policies.refine.candidates` gives them)."""
    from allocator import grid as gridlib
    from allocator.plan import prove_bound
    from allocator.policies.fast import fast
    from allocator.policies.refine import candidates

    began = time.perf_counter()
    hot = gridlib.objective(scenario, fast(scenario))
    hot_s = time.perf_counter() - began
    began = time.perf_counter()
    proven = prove_bound(scenario, hot, "auto") or {}
    bound_s = time.perf_counter() - began
    runs = {}
    for name, options in candidates(scenario, {}).items():
        began = time.perf_counter()
        value = gridlib.objective(scenario, fast(scenario, **options))
        runs[name] = (value, 1000 * (time.perf_counter() - began))
    return {"name": scenario.name, "hot": hot, "bound": proven.get("value"), "runs": runs,
            "ms": [1000 * hot_s, 1000 * bound_s]}


def gated(row: dict[str, Any], below: float) -> tuple[float, float, bool]:
    """(objective, milliseconds, refined) of `make_plan(..., refine_below=below)`."""
    from allocator.policies import refine

    hot_ms, bound_ms = row["ms"]
    if row["runs"] and refine.wanting(row["hot"], row["bound"], below):
        return (max([row["hot"], *(v for v, _ in row["runs"].values())]),
                hot_ms + bound_ms + sum(ms for _, ms in row["runs"].values()), True)
    return row["hot"], hot_ms + bound_ms, False


def _trials(row: dict[str, Any]) -> float:
    """plan-day's fast (the trials), or the hot plan where they do not run."""
    return row["runs"].get("trials", (row["hot"], 0.0))[0]


def report(rows: list[dict[str, Any]], thresholds: list[float],
           reference: dict[str, float] | None, label: str) -> None:
    """One table row per threshold: refined plans, shares of the reference, time a plan."""
    from allocator.policies import refine

    if reference is None:  # against the best of the ways
        reference = {r["name"]: max([r["hot"], *(v for v, _ in r["runs"].values())])
                     for r in rows}
    judged = [r for r in rows if reference.get(r["name"], 0) > 0]
    print(f"\n{label}: {len(rows)} plans, {len(judged)} with a positive reference\n")
    print("| refine below | refined | lifted | wanting, past the caps | mean share | min | "
          "below 97% | ms a plan: mean / median / max |")
    print("|---|---|---|---|---|---|---|---|")
    for below in thresholds:
        outs = [gated(r, below) for r in rows]
        shares = [max(o[0], 0) / reference[r["name"]] for r, o in zip(rows, outs, strict=True)
                  if r in judged]
        ms = [o[1] for o in outs]
        refined = sum(o[2] for o in outs)
        # below the threshold, with no run the refinement may make (past its size caps)
        capped = sum(not r["runs"] and refine.wanting(r["hot"], r["bound"], below)
                     for r in rows)
        lifted = sum(o[2] and o[0] > r["hot"] + 1e-9 for r, o in zip(rows, outs, strict=True))
        name = "never (the hot path)" if below == 0 else f"{100 * below:g}%"
        print(f"| {name} | {refined} | {lifted} | {capped} | "
              f"{100 * statistics.fmean(shares):.3f}% | "
              f"{100 * min(shares):.2f}% | {sum(s < 0.97 for s in shares)} | "
              f"{statistics.fmean(ms):.1f} / {statistics.median(ms):.1f} / {max(ms):.0f} |")
    day = [max(_trials(r), 0) / reference[r["name"]] for r in judged]
    trials_ms = [r["runs"]["trials"][1] for r in rows if "trials" in r["runs"]]
    print(f"| always the trials run (plan-day's fast; on a replan with the replan layouts) "
          f"| | | | "
          f"{100 * statistics.fmean(day):.3f}% | {100 * min(day):.2f}% | "
          f"{sum(s < 0.97 for s in day)} | "
          f"{statistics.fmean(trials_ms) if trials_ms else 0:.1f} (the trials alone) |")


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
            what = "proven optima" if reference else "the best of the ways"
            report(rows, thresholds, reference, f"{set_name}, {gpus} GPUs, against {what}")
    for size in (int(x) for x in philly.split(",") if x):
        from benchmarks.real_snapshots import snapshots

        for start in starts.split(","):
            scenarios = snapshots(size, start, every, 0.3)
            with ProcessPoolExecutor(workers) as pool:
                rows = list(pool.map(judge, scenarios))
            report(rows, thresholds, None,
                   f"Philly week from {start}, {size} GPUs, every {every} h, against the "
                   "best of the ways")


if __name__ == "__main__":
    typer.run(main)
