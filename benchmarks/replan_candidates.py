"""Replan candidates measured beside fast and left out of it: what each would add.

On the replan family's worst plans the loss is the realtime layout: fast's batch placement
on the layout of full's optimum reaches the optimum on 10 of the 13 replan tuning plans
below 97% (benchmarks/loss_anatomy.py). Three candidates aimed at it, each kept where it
earns more than fast's plan (or, with `--refined`, than the refined plan `gpuplan plan`'s
refinement reaches, `full.refined_plan`):

- `walk`: the services walk onto fast's whole plan of the same day without current GPUs
  (every construction, climb and evacuation; fast's `FRESH` layouts walk onto the first
  layout of that day only), within their swap limits (allocator/policies/fresh.py's walk);
  then the batch work is placed again and realtime topped up, as step 9 judges a layout.
- `crowd`: fast once more, realtime's GPU rank led by how much of each GPU's aligned
  blocks services' current GPUs and running work take at step 0 (`fast(crowd=True)`,
  realtime.crowded; a run of `gpuplan plan`'s refinement since).
- `direct`: block evacuation (allocator/policies/evac.py) by direct swaps from step 0 on:
  each of a service's runs in an aligned block of 2, 4 or 8 GPUs moves, from step t on,
  to the lowest free GPU outside it, swap limit / 2 runs a step (evac.py hands over with
  a step on both GPUs and never at step 0); up to `--rounds` rounds, each the move whose
  greedy pass earns most, judged by the batch work placed again.

Reported per tuning set: fast's share of the stored proven optima and the best of both,
with the candidate's median time; on the Philly weeks' replans (`--philly`, no optima)
how many plans it lifts and by how much:

    python benchmarks/replan_candidates.py --candidate walk --sets replan,replan2
    python benchmarks/replan_candidates.py --candidate walk --philly 12,14,16
    python benchmarks/replan_candidates.py --candidate crowd --sets replan,replan2
    python benchmarks/replan_candidates.py --candidate direct --sets replan,replan2 --refined

Tuning sets and weeks only (the test seeds stay out of diagnosis).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import typer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # benchmarks/ as a package, run as a script too


def _placed_again(scenario: Any, layout: np.ndarray, dtype: Any) -> np.ndarray:
    """The batch work placed on `layout` and realtime topped up (fast's step 9 judge)."""
    from allocator import reservations
    from allocator.policies import fast as fastlib
    from allocator.policies.decoder import Jobs

    held = reservations.holds(scenario)
    jobs, orders = Jobs.of(scenario), fastlib.value_orders(scenario, held)
    return fastlib._placed_again(scenario, held, jobs, orders, fastlib.default_search(scenario),
                                 layout.astype(dtype))


def walk(scenario: Any, grid: np.ndarray, hot_hops: int | None = 0) -> np.ndarray | None:
    """The walk onto fast's plan of the same day without current GPUs (None: a swap limit
    cannot hold on the walk)."""
    from allocator.policies import fast as fastlib
    from allocator.policies import fresh, hops
    from allocator.policies.topup import swaps_hold

    free_day = fastlib.fast(fresh.without_current(scenario), hot_hops=hot_hops)
    layout = hops.layout(scenario, free_day)
    if not (fresh.walk_on(scenario, layout) and swaps_hold(scenario, layout)):
        return None
    return _placed_again(scenario, layout, grid.dtype)


def crowd(scenario: Any, grid: np.ndarray) -> np.ndarray:
    """fast with realtime's rank crowded (`fast(crowd=True)`, realtime.crowded)."""
    from allocator.policies import fast as fastlib

    return fastlib.fast(scenario, crowd=True)


def _direct_move(ev: Any, cells: np.ndarray, k: int, first: int, t: int) -> np.ndarray | None:
    """Block [first, first + k)'s realtime runs that reach past step t moved off it by
    direct swaps (`direct`), or None where a run has nowhere to go."""
    from allocator import grid as gridlib
    from allocator.policies import evac

    pending = sorted((s - e, g, s, e, v) for g in range(first, first + k)
                     for s, e, v in evac._runs(cells[:, g], ev.is_rt) if e > t)
    if not pending:
        return None
    out = cells.copy()
    moved: dict[int, int] = {}
    for _, g, s, e, v in pending:
        per_step = max(int(ev.limit[v]) // 2, 1)
        edge = t - moved.get(v, 0) // per_step
        if s < edge:
            if edge < 0:
                return None
            s = edge
            moved[v] = moved.get(v, 0) + 1
        target = ev._target(out, v, first, k, s, e, "low")
        if target is None:
            return None
        out[s:e, g] = gridlib.FREE
        out[s:e, target] = v
    return out


def direct(scenario: Any, grid: np.ndarray, rounds: int = 1) -> np.ndarray | None:
    """Up to `rounds` rounds of direct-swap evacuations from `grid`'s layout."""
    from allocator import grid as gridlib
    from allocator import reservations
    from allocator.policies import evac, hops
    from allocator.policies import fast as fastlib
    from allocator.policies.decoder import Jobs
    from allocator.policies.topup import swaps_hold

    score = gridlib.Scorer(scenario)
    jobs = Jobs.of(scenario)
    orders = fastlib.value_orders(scenario, reservations.holds(scenario))
    ev = evac.Evacuation(scenario, jobs)
    cells, best, value = hops.layout(scenario, grid), None, score(grid)
    for _ in range(rounds):
        top, pick = ev.value(cells, orders, None), None
        for k in (2, 4, 8):
            for first in range(0, scenario.G - k + 1, k) if k <= scenario.G else ():
                for t in range(scenario.T):
                    trial = _direct_move(ev, cells, k, first, t)
                    if trial is None:
                        continue
                    got = ev.value(trial, orders, None)
                    if got > top + 1e-9 and swaps_hold(scenario, trial):
                        top, pick = got, trial
        if pick is None:
            break
        cells = pick
        placed = _placed_again(scenario, cells, grid.dtype)
        if (got := score(placed)) > value + 1e-9:
            best, value = placed, got
    return best


def measure(scenario: Any, candidate: str, refined: bool, rounds: int
            ) -> tuple[float, float, float, float]:
    """The starting plan's objective, the best of it and the candidate, and each one's
    seconds."""
    from allocator import grid as gridlib
    from allocator.policies import fast as fastlib
    from allocator.policies.full import refined_plan

    score = gridlib.Scorer(scenario)
    began = time.perf_counter()
    grid = refined_plan(scenario) if refined else fastlib.fast(scenario)
    mid = time.perf_counter()
    value = score(grid)
    if candidate == "walk":
        other = walk(scenario, grid)
    elif candidate == "crowd":
        other = crowd(scenario, grid)
    else:
        other = direct(scenario, grid, rounds)
    best = value if other is None else max(value, score(other))
    return value, best, mid - began, time.perf_counter() - mid


def main(candidate: str = typer.Option("walk", "--candidate", help="walk, crowd or direct"),
         sets: str = typer.Option("", "--sets", help="replan tuning sets, comma-separated"),
         refined: bool = typer.Option(False, "--refined",
                                      help="start from the refined plan, not fast's"),
         rounds: int = typer.Option(1, "--rounds", help="direct: evacuation rounds"),
         philly: str = typer.Option("", "--philly", help="Philly replans at these sizes"),
         starts: str = typer.Option("2017-10-30,2017-11-06", "--starts",
                                    help="--philly: the weeks' first days"),
         every: int = typer.Option(12, "--every", help="--philly: hours between snapshots")
         ) -> None:
    from allocator.policies import fresh
    from benchmarks.bench_quality import cases_for, scenario_for

    if candidate not in ("walk", "crowd", "direct"):
        raise typer.BadParameter("walk, crowd or direct", param_hint="--candidate")
    start = "the refined plan" if refined else "fast"
    for name in filter(None, sets.split(",")):
        if name.startswith("test"):
            raise typer.BadParameter("tuning sets only", param_hint="--sets")
        stored = json.loads((ROOT / "benchmarks" / "stored" / f"full30-{name}.json").read_text())
        rows = []
        for case in cases_for(name, 16):
            ref = stored.get(case.name, {})
            if ref.get("status") != "optimal" or ref["full"] <= 0:
                continue
            value, best, t_plan, t_more = measure(scenario_for(case), candidate, refined, rounds)
            rows.append((case.name, value / ref["full"], best / ref["full"], t_plan, t_more))
        before, after = [r[1] for r in rows], [r[2] for r in rows]
        lifted = sum(b > a + 1e-9 for a, b in zip(before, after, strict=True))
        print(f"{name}, {candidate}: {len(rows)} proven optima; {start} "
              f"{100 * statistics.fmean(before):.2f}% / min {100 * min(before):.2f}% / "
              f"{sum(x < 0.97 for x in before)} below 97%; with the candidate "
              f"{100 * statistics.fmean(after):.2f}% / {100 * min(after):.2f}% / "
              f"{sum(x < 0.97 for x in after)}; lifted {lifted}; ms median: {start} "
              f"{1000 * statistics.median(r[3] for r in rows):.1f}, the candidate "
              f"{1000 * statistics.median(r[4] for r in rows):.1f}")
        for r in rows:
            if r[2] > r[1] + 1e-9:
                print(f"  {r[0]}: {100 * r[1]:.2f}% -> {100 * r[2]:.2f}%")
    if philly:
        from benchmarks.real_snapshots import snapshots

        for size in (int(x) for x in philly.split(",")):
            got = []
            for week in starts.split(","):
                for scenario in snapshots(size, week, every, 0.3):
                    if fresh.holds_current(scenario) and not scenario.reservations:
                        got.append(measure(scenario, candidate, refined, rounds))
            gains = [(b - a) / abs(a) for a, b, *_ in got if a > 0]
            print(f"Philly {size} GPUs from {starts}, {candidate}: {len(got)} replans, lifted "
                  f"{sum(b > a + 1e-9 for a, b, *_ in got)}, mean gain "
                  f"{100 * statistics.fmean(gains):.3f}% (max {100 * max(gains):.2f}%); ms "
                  f"median: {start} {1000 * statistics.median(r[2] for r in got):.1f}, the "
                  f"candidate {1000 * statistics.median(r[3] for r in got):.1f}")


if __name__ == "__main__":
    typer.run(main)
