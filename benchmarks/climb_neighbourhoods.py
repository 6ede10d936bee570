"""Wider neighbourhoods for fast's realtime layout climb, judged on the tuning seeds.

fast's climb (allocator/policies/layout_climb.py) moves one realtime run whole to a GPU
free for all its steps. This script tries what else a climb could do, in Python over the
compiled decoder, with fast otherwise unchanged, against the stored proven optima:

- `base`: the climb's own neighbourhood (a check: it must match fast's figures);
- `exchange`: also a run swapped with the realtime runs in its way on the other GPU;
- `split`: also a run's head or tail moved to the free stretch of another GPU around it
  (with a one-step handover where the swap limit is 1);
- `all-orders`: a move judged by the best of the six value orders' greedy passes, not
  by the order that was best before the climb;
- `passes300`: 300 greedy passes instead of fast.CLIMB_PASSES;
- `every-layout`: every realtime layout climbed, not the stacked one alone.

Variants combine with `+` (`exchange+split+passes300`):

    python benchmarks/climb_neighbourhoods.py --variants base,exchange,split,exchange+split

A diagnosis on the tuning seeds; the test seeds stay out of it (BENCHMARKS.md).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import typer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from allocator import grid as gridlib  # noqa: E402
from allocator import reservations  # noqa: E402
from allocator.model import RealtimeJob, Scenario  # noqa: E402
from allocator.policies import fast as fastmod  # noqa: E402
from allocator.policies import layout_climb  # noqa: E402
from allocator.policies.decoder import Decoder, Jobs  # noqa: E402
from allocator.policies.realtime import RealtimePlacer  # noqa: E402
from benchmarks.bench_quality import (  # noqa: E402
    TUNING2_SEEDS,
    TUNING_SEEDS,
    scenario_for,
    small_cases,
)

Orders = tuple[tuple[int, ...], ...]
FREE = gridlib.FREE


def _segments(column: np.ndarray, wanted: set[int], a: int, b: int) -> list[tuple[int, int, int]]:
    """(start, end, job) of the runs in `column` of the jobs in `wanted` that meet [a, b)."""
    out = []
    t, T = 0, len(column)
    while t < T:
        if int(column[t]) in wanted:
            s = t
            while t < T and column[t] == column[s]:
                t += 1
            if s < b and t > a:
                out.append((s, t, int(column[s])))
        else:
            t += 1
    return out


def _exchange(scenario: Scenario, grid: np.ndarray, owner: np.ndarray,
              run: tuple[int, int, int, int], y: int) -> np.ndarray | None:
    """The run moved to GPU y, the realtime runs in its way there moved whole to its GPU."""
    a, b, g, i = run
    column = grid[:, y]
    others = {int(o) for o in column[a:b] if o >= 0}
    if any(not isinstance(scenario.jobs[o], RealtimeJob) or owner[g] not in (-1, o)
           for o in others):
        return None
    out = grid.copy()
    out[a:b, g] = FREE
    for s, e, o in _segments(column, others, a, b):
        job = scenario.jobs[o]
        held = s == 0 and isinstance(job, RealtimeJob) and job.current_gpus is not None
        if held or (out[s:e, g] != FREE).any():
            return None
        out[s:e, g], out[s:e, y] = o, FREE
    out[a:b, y] = i
    return out


def _split(scenario: Scenario, grid: np.ndarray, run: tuple[int, int, int, int],
           y: int) -> np.ndarray | None:
    """The run's tail (or head) moved to the free stretch of GPU y around its end (or start),
    the two GPUs held together for a step where the swap limit allows one change only."""
    a, b, g, i = run
    job = scenario.jobs[i]
    assert isinstance(job, RealtimeJob)
    overlap = 0 if job.swap_limit >= 2 else 1
    free = grid[:, y] == FREE
    if free[b - 1]:
        p = b - 1
        while p > a and free[p - 1]:
            p -= 1
        if p > a and p + overlap < b:
            out = grid.copy()
            out[p + overlap:b, g], out[p:b, y] = FREE, i
            return out
    if free[a]:
        q = a + 1
        while q < b and free[q]:
            q += 1
        if q < b and q - overlap > a:
            out = grid.copy()
            out[a:q - overlap, g], out[a:q, y] = FREE, i
            return out
    return None


def wider_climb(variant: set[str]) -> Callable[..., np.ndarray]:
    """A climb with `variant`'s neighbourhood, in layout_climb.climb's signature."""

    def climb(scenario: Scenario, layout: np.ndarray, jobs: Jobs, orders: Orders,
              passes: int, compiled: bool | None = None) -> np.ndarray:
        if not orders or passes <= 0 or not len(layout_climb.movable_runs(scenario, layout)):
            same: np.ndarray = layout.copy()
            return same
        owner = layout_climb.owners(scenario)
        judges = orders if "all-orders" in variant else (
            layout_climb.best_order(Decoder.new(scenario, layout >= 0, None, jobs), orders),)

        def value(grid: np.ndarray) -> float:
            best = -np.inf
            for order in judges:
                state = Decoder.new(scenario, grid >= 0, None, jobs)
                state.pack(order)
                best = max(best, state.value)
            return best

        grid, best, spent, improved = layout.copy(), value(layout), 0, True
        while improved and spent < passes:
            improved = False
            for a, b, g, i in layout_climb.movable_runs(scenario, grid).tolist():
                for y in range(scenario.G):
                    if y == g or owner[y] not in (-1, i):
                        continue
                    candidate: np.ndarray | None = None
                    if (grid[a:b, y] == FREE).all():
                        candidate = grid.copy()
                        candidate[a:b, g], candidate[a:b, y] = FREE, i
                    elif "exchange" in variant:
                        candidate = _exchange(scenario, grid, owner, (a, b, g, i), y)
                    if candidate is None and "split" in variant:
                        candidate = _split(scenario, grid, (a, b, g, i), y)
                    if candidate is None or not fastmod.swaps_hold(scenario, candidate):
                        continue
                    spent += 1
                    got = value(candidate)
                    if got > best + 1e-9:
                        grid, best, improved = candidate, got, True
                        break
                    if spent >= passes:
                        break
                if improved or spent >= passes:
                    break
        return grid

    return climb


def main(variants: str = typer.Option("base,exchange,split,exchange+split,all-orders,"
                                      "passes300,every-layout",
                                      help="comma-separated; parts joined by +")) -> None:
    """Each variant's fast against the stored proven optima of both tuning sets."""
    original = (layout_climb.climb, fastmod.CLIMB_PASSES, fastmod.CLIMB_FROM, fastmod._lay_out)
    current: dict[str, Scenario] = {}  # the scenario fast is planning, for lay_out
    for name in variants.split(","):
        variant = set(name.split("+"))
        layout_climb.climb = wider_climb(variant)
        fastmod.CLIMB_PASSES = 300 if "passes300" in variant else original[1]
        if "every-layout" in variant:
            fastmod.CLIMB_FROM = None

            def lay_out(placer: RealtimePlacer, base: np.ndarray, held: reservations.Holds
                        ) -> np.ndarray:
                grid = original[3](placer, base, held)
                scenario = current["it"]
                if scenario.G > fastmod.CLIMB_MAX_GPUS or scenario.reservations:
                    return grid
                return layout_climb.climb(scenario, grid, Jobs.of(scenario),
                                          fastmod.value_orders(scenario), fastmod.CLIMB_PASSES)

            fastmod._lay_out = lay_out
        try:
            for set_name, seeds in (("tuning", TUNING_SEEDS), ("tuning2", TUNING2_SEEDS)):
                stored = json.loads((ROOT / "benchmarks" / "stored" / f"full30-{set_name}.json")
                                    .read_text())
                shares, seconds = [], []
                for case in small_cases(seeds):
                    row = stored.get(case.name)
                    if row is None or row["status"] != "optimal":
                        continue
                    scenario = current["it"] = scenario_for(case)
                    began = time.perf_counter()
                    grid = fastmod.fast(scenario)
                    seconds.append(time.perf_counter() - began)
                    shares.append(gridlib.objective(scenario, grid) / row["full"])
                print(f"{name:>24} {set_name:>8}: mean {100 * statistics.fmean(shares):.2f}%, "
                      f"min {100 * min(shares):.2f}%, below 97% {sum(s < 0.97 for s in shares)}"
                      f" of {len(shares)}; median {1000 * statistics.median(seconds):.1f} ms",
                      flush=True)
        finally:
            (layout_climb.climb, fastmod.CLIMB_PASSES, fastmod.CLIMB_FROM,
             fastmod._lay_out) = original


if __name__ == "__main__":
    typer.run(main)
