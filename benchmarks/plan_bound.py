"""How tight and how costly the bound every plan carries is, on the wider family's seeds.

For each scenario: fast's objective over the Lagrangian alone, over the plan's bound (the
Lagrangian, then the step-by-job decomposition: allocator.decomposition.quick_bound), and,
where the stored 30-second run of full proved an optimum (benchmarks/stored), fast over
that optimum, which is what a perfect bound would read. Times are medians of `--repeats`
in-process calls (machine-dependent):

    python benchmarks/plan_bound.py --set tuning --set tuning2
    python benchmarks/plan_bound.py --set test

`--philly G` (repeatable) adds the scenarios a real week puts in front of the planner
(`benchmarks/real_snapshots.py`: Philly jobs, ServeGen traffic, on G GPUs), where no
optimum is stored: full runs `--full-seconds` on each, and the bound is set against the
best plan known (exact where full proves it, else the bound's slack plus full's gap):

    python benchmarks/plan_bound.py --philly 16 --philly 32 --no-scale
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

ROOT = Path(__file__).resolve().parent.parent


def main(sets: list[str] = typer.Option([], "--set",
                                        help="tuning .. tuning4 or test (tuning without --philly)"),
         repeats: int = typer.Option(3, "--repeats", min=1),
         scale: bool = typer.Option(True, "--scale/--no-scale",
                                    help="also the scale scenarios of 8 to 256 GPUs"),
         philly: list[int] = typer.Option([], "--philly", help="GPUs of real Philly snapshots"),
         week: str = typer.Option("2017-11-13", "--week", help="the Philly week's first day"),
         every: int = typer.Option(12, "--every", min=1, help="a snapshot every N hours"),
         full_seconds: float = typer.Option(20.0, "--full-seconds", min=0.0)) -> None:
    sys.path.insert(0, str(ROOT))
    from allocator import grid as gridlib
    from allocator.decomposition import quick_bound
    from allocator.lagrange import lagrangian_bound
    from allocator.policies.fast import fast
    from benchmarks.bench import machine
    from benchmarks.bench_quality import SEED_SETS, small_cases
    from benchmarks.bench_quality import scenario_for as family_scenario
    from benchmarks.bench_scale import ScaleCase
    from benchmarks.bench_scale import scenario_for as scale_scenario

    def timed(call):  # the median of `repeats` calls, and the last result
        times, got = [], None
        for _ in range(repeats):
            began = time.perf_counter()
            got = call()
            times.append(1000 * (time.perf_counter() - began))
        return got, statistics.median(times)

    def row(name, s, optimum):
        obj = gridlib.objective(s, fast(s))
        lag, lag_ms = timed(lambda: lagrangian_bound(s, lower=obj))
        carried, ms = timed(lambda: quick_bound(s, lower=obj))
        return {"scenario": name, "gpus": s.G, "fast": obj, "lagrangian": lag.value,
                "lagrangian_ms": lag_ms, "plan_bound": carried.value, "method": carried.method,
                "plan_bound_ms": ms, "optimum": optimum}

    print(f"Machine: {machine()}\n")
    if not sets and not philly:
        sets = ["tuning"]
    rows = []
    for name in sets:
        path = ROOT / "benchmarks" / "stored" / f"full30-{name}.json"
        stored = json.loads(path.read_text()) if path.exists() else {}  # (replan3: none)
        for case in small_cases(SEED_SETS[name]):
            run = stored.get(case.name) or {}
            optimum = run.get("full") if run.get("status") == "optimal" else None
            rows.append(row(case.name, family_scenario(case), optimum))
    if rows:
        family_summary(sets, rows)
    if philly:
        real(philly, week, every, full_seconds, row)
    if scale:
        print("\n| GPUs | jobs | steps | fast / Lagrangian (ms) | fast / plan's bound (ms) |")
        print("|---:|---:|---:|---|---|")
        for g, j, t in ((8, 10, 24), (64, 30, 24), (256, 120, 24), (8, 10, 48), (64, 30, 48),
                        (256, 120, 48)):
            r = row("", scale_scenario(ScaleCase(g, j, t)), None)
            print(f"| {g} | {j} | {t} | {100 * r['fast'] / r['lagrangian']:.1f}% "
                  f"({r['lagrangian_ms']:.1f}) | {100 * r['fast'] / r['plan_bound']:.1f}% "
                  f"({r['plan_bound_ms']:.1f}, {r['method']}) |")


def family_summary(sets: list[str], rows: list[dict[str, Any]]) -> None:
    """fast over each bound on the wider family, the bounds over the stored optima, times."""
    share = {k: [r["fast"] / r[k] for r in rows if r[k] and r[k] > 0 and r["fast"] > 0]
             for k in ("lagrangian", "plan_bound", "optimum")}
    print(f"{', '.join(sets)}: {len(rows)} scenarios of 8-16 GPUs")
    for k, label in (("lagrangian", "fast / Lagrangian"), ("plan_bound", "fast / plan's bound"),
                     ("optimum", "fast / proven optimum (a perfect bound)")):
        v = share[k]
        if v:
            print(f"  {label}: mean {100 * statistics.fmean(v):.2f}%, min {100 * min(v):.2f}%, "
                  f"within 1% on {sum(x >= 0.99 for x in v)} of {len(v)}")
    proven = [r for r in rows if r["optimum"]]
    if proven:
        gap = [r["plan_bound"] / r["optimum"] - 1 for r in proven]
        old = [r["lagrangian"] / r["optimum"] - 1 for r in proven]
        print(f"  bound over the optimum ({len(proven)} proven): Lagrangian mean "
              f"{100 * statistics.fmean(old):.2f}% (max {100 * max(old):.2f}%), plan's bound "
              f"mean {100 * statistics.fmean(gap):.2f}% (max {100 * max(gap):.2f}%)")
    print(f"  ms (median over scenarios): Lagrangian "
          f"{statistics.median(r['lagrangian_ms'] for r in rows):.1f}, plan's bound "
          f"{statistics.median(r['plan_bound_ms'] for r in rows):.1f} "
          f"(max {max(r['plan_bound_ms'] for r in rows):.1f})")


def real(sizes: list[int], week: str, every: int, seconds: float,
         row: Callable[[str, Any, float | None], dict[str, Any]]) -> None:
    """The bound on real snapshots, against the best plan full finds in `seconds`."""
    from allocator import grid as gridlib
    from allocator.policies.full import full
    from benchmarks.real_snapshots import snapshots

    for g in sizes:
        rows = []
        for s in snapshots(g, week, every, 0.3):
            r = row(s.name, s, None)
            result = full(s, time_limit=seconds)
            r["best"] = max(r["fast"], gridlib.objective(s, result.grid))
            r["proven"] = result.solve is not None and result.solve.status == "optimal"
            rows.append(r)
        rows = [r for r in rows if r["best"] > 0]
        if not rows:
            print(f"\nPhilly week of {week}, {g} GPUs: no snapshot with a positive plan")
            continue
        proven = [r for r in rows if r["proven"]]
        print(f"\nPhilly week of {week}, {g} GPUs, a snapshot every {every} h: {len(rows)} "
              f"scenarios, {len(proven)} proven by full in {seconds:g} s")
        for k, label in (("lagrangian", "Lagrangian"), ("plan_bound", "plan's bound")):
            over = [r[k] / r["best"] - 1 for r in rows]
            exact = [r[k] / r["best"] - 1 for r in proven]
            print(f"  {label} over the best plan known: mean {100 * statistics.fmean(over):.2f}% "
                  f"(max {100 * max(over):.2f}%); over the proven optima "
                  + (f"{100 * statistics.fmean(exact):.2f}% (max {100 * max(exact):.2f}%)"
                     if exact else "n/a"))
        fast_share = [r["fast"] / r["best"] for r in rows]
        methods = statistics.multimode(r["method"] for r in rows)
        print(f"  fast / best known: mean {100 * statistics.fmean(fast_share):.2f}%, min "
              f"{100 * min(fast_share):.2f}%; the plan's bound mostly by {', '.join(methods)}; "
              f"ms median {statistics.median(r['plan_bound_ms'] for r in rows):.1f} "
              f"(max {max(r['plan_bound_ms'] for r in rows):.1f})")


if __name__ == "__main__":
    typer.run(main)
