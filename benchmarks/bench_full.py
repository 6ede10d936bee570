"""Full mode on the benchmark scenarios: how far `fast` is from the optimum, per scenario.

fast / optimum is the principal measure of the heuristic; where the MILP does not prove
optimality in time, the ratio is bracketed by fast / best plan found (an upper estimate)
and fast / best bound (a lower one). `gpuplan bench --full` calls `full_rows`, and
`python benchmarks/full_mode.py` runs it alone (with the diagnosis and the bounds).
"""

from __future__ import annotations

import importlib
import time
from typing import Any

import numpy as np

from allocator import grid as gridlib
from allocator.core.markdown import table
from allocator.model import Scenario
from allocator.policies.fast import fast


def _ratio(a: float, b: float | None) -> float | None:
    """a / b for positive objectives; a ratio of mixed-sign objectives means nothing."""
    if b is None or a <= 0 or b <= 0:
        return None
    return a / b


def full_rows(scenarios: list[Scenario], time_limit: float = 30.0, solver: str = "highs",
              diagnose: bool = False) -> list[dict[str, Any]]:
    """One row per scenario: fast, the optimum (or best plan and bound), ratio, gap, time."""
    full = importlib.import_module("allocator.policies.full").full
    rows = []
    for scenario in scenarios:
        fast_grid = fast(scenario)
        fast_obj = gridlib.objective(scenario, fast_grid)
        began, cpu = time.perf_counter(), time.process_time()
        result = full(scenario, solver=solver, time_limit=time_limit)
        seconds = time.perf_counter() - began
        cpu = time.process_time() - cpu  # all threads: a check on a shared, loaded machine
        grid, report = result.grid, result.solve
        best = gridlib.objective(scenario, grid)
        optimal = report.status == "optimal"
        rows.append({
            "scenario": scenario.name,
            "gpus": scenario.G,
            "jobs": len(scenario.jobs),
            "fast": round(fast_obj, 3),
            "full": round(best, 3),
            "optimum": round(best, 3) if optimal else None,
            "best_bound": None if report.best_bound is None else round(report.best_bound, 3),
            "fast_over_optimum": _round(_ratio(fast_obj, best)) if optimal else None,
            "fast_over_best": _round(_ratio(fast_obj, best)),
            "fast_over_bound": _round(_ratio(fast_obj, report.best_bound)),
            "gap": _round(report.gap, 6),
            "status": report.status,
            "proof": report.proof,
            "solve_seconds": round(seconds, 2),
            "cpu_seconds": round(cpu, 2),
            "time_limit": time_limit,
            "improved_fast": report.improved_fast,
        })
        if diagnose:  # outside the timing above
            kept = best_batch_for_realtime(scenario, fast_grid, time_limit)
            rows[-1]["best_with_fast_realtime"] = None if kept is None else round(kept, 3)
    return rows


def best_batch_for_realtime(scenario: Scenario, grid: np.ndarray,
                            time_limit: float = 60.0) -> float | None:
    """The best plan that keeps `grid`'s realtime cells: splits fast's loss in two.

    If it equals fast, fast lost only through where it put realtime GPUs; what it
    gains over fast is what a better batch order alone would have earned.
    """
    from allocator.milp.model import build_model
    from allocator.milp.solvers import solve_highs

    model = build_model(scenario)
    for (i, g, t), x in model.realtime.items():
        x.lowBound = x.upBound = int(grid[t, g] == i)
    result = solve_highs(model.prob, time_limit=time_limit,
                         start=model.start_values(scenario, grid))
    if not result.has_solution:
        return None
    return max(gridlib.objective(scenario, model.grid(scenario)),
               gridlib.objective(scenario, grid))


def bound_rows(scenarios: list[Scenario], time_limit: float = 60.0) -> list[dict[str, Any]]:
    """Both relaxations per scenario, with their solve times: how tight each ceiling is."""
    from allocator.milp import bounds

    rows = []
    for scenario in scenarios:
        block = bounds.block_capacity(scenario, time_limit=time_limit)
        lp = bounds.lp_relaxation(scenario, time_limit=time_limit)
        rows.append({"scenario": scenario.name, "gpus": scenario.G,
                     "block_bound": _round(block.value, 3), "block_status": block.status,
                     "block_seconds": round(block.seconds, 2),
                     "lp_bound": _round(lp.value, 3), "lp_status": lp.status,
                     "lp_seconds": round(lp.seconds, 2)})
    return rows


def bounds_markdown(rows: list[dict[str, Any]]) -> str:
    cells = [[r["scenario"], r["gpus"], f"{r['block_bound']} ({r['block_status']})",
              f"{r['block_seconds']:.1f}", f"{r['lp_bound']} ({r['lp_status']})",
              f"{r['lp_seconds']:.1f}"] for r in rows]
    return "### the two relaxations\n\n" + table(
        ["scenario", "GPUs", "block-capacity bound", "seconds", "LP bound", "seconds"], cells,
        ["---", "---:", "---:", "---:", "---:", "---:"])


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def _pct(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{100 * value:.{digits}f}%"


def full_markdown(rows: list[dict[str, Any]]) -> str:
    """The table for BENCHMARKS/docs: ratio as a percentage, gap to two decimals."""
    cells = []
    for r in rows:
        if r["fast_over_optimum"] is not None:
            ratio = _pct(r["fast_over_optimum"])
        else:  # not proven: the ratio lies between fast/bound and fast/best found
            ratio = f"{_pct(r['fast_over_bound'])} .. {_pct(r['fast_over_best'])}"
        bound = "-" if r["best_bound"] is None else f"{r['best_bound']:.2f}"
        cells.append([r["scenario"], r["gpus"], r["jobs"], f"{r['fast']:.2f}",
                      f"{r['full']:.2f}", bound, ratio, _pct(r["gap"], 2), r["status"],
                      f"{r['solve_seconds']:.1f}", f"{r['cpu_seconds']:.1f}"])
    return "### fast against the optimum (full mode, MILP)\n\n" + table(
        ["scenario", "GPUs", "jobs", "fast", "full", "best bound", "fast / optimum", "gap",
         "status", "seconds", "CPU s"], cells,
        ["---", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---", "---:", "---:"])
