"""Realtime topped up from the cells a finished plan leaves free.

Realtime is laid out before (or around) the batch work, on GPUs chosen when the batch
placement is not known yet, and one service may not take another's current GPUs (the
owner may want them at step 0). Once the plan is complete, a service can be short of its
demand at a step where a GPU stays free: another service's current GPU, released later,
or a gap the batch work left. Each such run is taken, within the service's swap limit:
the cells were free, so nothing else moves, and every filled cell of shortfall is worth
`realtime_penalty x priority` (on a Philly replan snapshot, 8 such cells were fast's
whole loss against the proven optimum).
"""

from __future__ import annotations

import numpy as np

from allocator import grid as gridlib
from allocator.model import RealtimeJob, Scenario


def short_and_free(counts: np.ndarray, realtime: np.ndarray, demand: np.ndarray) -> bool:
    """Whether some service is short at a step where some GPU is free (`counts`: cells
    per step and job, FREE in the last column, as `gridlib.Scorer.counts` gives them)."""
    if not len(realtime):
        return False
    short = (demand > counts[:, realtime]).any(axis=1)
    return bool((short & (counts[:, -1] > 0)).any())


def top_up(scenario: Scenario, grid: np.ndarray, keep_off: np.ndarray | None = None) -> bool:
    """Fill services' shortfall from free cells of `grid` in place, the highest priority
    first, each time the run of one GPU that covers the most short steps and keeps the
    swap limit; True if anything changed. `keep_off`: cells realtime must not take (a
    reservation's block ahead of its start)."""
    changed = False
    realtime = sorted(((i, j) for i, j in enumerate(scenario.jobs)
                       if isinstance(j, RealtimeJob)), key=lambda ij: -ij[1].priority)
    for i, job in realtime:
        demand = np.asarray(job.demand)
        while True:
            free = grid == gridlib.FREE
            if keep_off is not None:
                free &= ~keep_off
            mine = grid == i
            short = demand > mine.sum(axis=1)
            if not (short[:, None] & free).any():
                break
            run = _best_run(job, mine, free, short)
            if run is None:
                break
            gpu, a, b = run
            grid[a:b, gpu] = i
            changed = True
    return changed


def _flips(job: RealtimeJob, mine: np.ndarray) -> np.ndarray:
    """GPUs acquired or released at each step (step 0 against `current_gpus`, if given)."""
    before = np.zeros(mine.shape[1], dtype=bool)
    if job.current_gpus:
        before[list(job.current_gpus)] = True
    flips: np.ndarray = (mine ^ np.vstack([before, mine[:-1]])).sum(axis=1)
    if job.current_gpus is None:
        flips[0] = 0
    return flips


def _best_run(job: RealtimeJob, mine: np.ndarray, free: np.ndarray, short: np.ndarray
              ) -> tuple[int, int, int] | None:
    """(gpu, a, b): the run of one free GPU, from a short step to a short step, that covers
    the most short steps within the swap limit (the earliest such run of the lowest such
    GPU on a tie); None if none fits. A run covering every short step ends the search."""
    T = len(short)
    flips = _flips(job, mine)
    current = set(job.current_gpus or ())
    cum = np.concatenate(([0], np.cumsum(short))).tolist()
    most = cum[-1]
    best: tuple[int, int, int, int] | None = None  # (covered, gpu, a, b)
    for gpu in np.flatnonzero((free & short[:, None]).any(axis=0)).tolist():
        col = free[:, gpu]
        runs = []
        for a in np.flatnonzero(col & short).tolist():
            hi = a
            while hi < T and col[hi]:
                hi += 1
            runs += [(cum[b] - cum[a], a, b) for b in range(a + 1, hi + 1) if short[b - 1]]
        runs.sort(key=lambda r: (-r[0], r[1], r[2]))
        for covered, a, b in runs:
            if best is not None and covered <= best[0]:
                break
            if _fits(job, mine[:, gpu], gpu in current, flips, a, b):
                best = (covered, gpu, a, b)
                break
        if best is not None and best[0] == most:
            break
    return None if best is None else best[1:]


def _fits(job: RealtimeJob, column: np.ndarray, was_current: bool, flips: np.ndarray,
          a: int, b: int) -> bool:
    """Whether holding this GPU over [a, b) as well keeps every step within the swap limit:
    only the steps a and b change (the cells between were free, so not the job's)."""
    T = len(column)
    new = column.copy()
    new[a:b] = True
    for t in (a, b):
        if t >= T:
            continue
        if t == 0:
            if job.current_gpus is None:
                continue
            prev_old = prev_new = was_current
        else:
            prev_old, prev_new = bool(column[t - 1]), bool(new[t - 1])
        delta = int(bool(new[t]) != prev_new) - int(bool(column[t]) != prev_old)
        if flips[t] + delta > job.swap_limit:
            return False
    return True
