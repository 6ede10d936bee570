"""Window rebuilds: a large-neighbourhood step on a finished plan. The queued batch jobs
that run inside a window of steps (and the most earning of those the plan leaves out) are
lifted off and placed again around the rest, which stays exactly where it is; the new
placement is kept where the batch work earns more.

The greedy decoder puts each job at its earliest start in one order of the whole queue,
and some optima are no such pass: on tuning2 s1059 the optimum runs many long one-GPU
jobs first and the 8-GPU jobs last; on the optimum's own realtime layout fast's batch
placement (its orders, the order search, the pair step) ends 6.5% below it
(benchmarks/loss_anatomy.py), and the optimum's own order of starts, placed greedily, 12%.
Re-placing a few jobs around the others fixed reaches plans no single pass makes. Realtime
is not touched, so every rebuild is legal by the batch placement's construction and the
plan's objective moves by the batch value alone (BENCHMARKS.md, "Window rebuilds").
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from allocator import grid as gridlib
from allocator.model import Scenario
from allocator.policies.decoder import Jobs

# The windows, as (width, stride) in steps: every window of `width` steps whose first step
# is a multiple of `stride`, swept in turn until a whole sweep keeps nothing. Chosen on the
# tuning seeds (BENCHMARKS.md): wider and denser windows lift a few more plans for
# several times the cost.
WIDTH = 12
STRIDE = 4
# A bound on the windows tried, in sweeps: a plan that keeps improving stops here.
MAX_SWEEPS = 4
# The jobs the plan leaves out that a window lifts too: this many, those that earn most a
# step first. A real Philly queue at 14-16 GPUs leaves up to a hundred out, each placed
# again in every window: fast's median on those snapshots 19.2 -> 17.8 ms at 14 GPUs and
# 17.7 -> 17.2 at 16 with the cap, one of 101 plans 0.3% lower and one higher; no tuning
# plan changes (BENCHMARKS.md, "Window rebuilds to 16 GPUs"). A negative number: all.
OUT_CAP = 16

# (grid, kept batch jobs) -> the grid with the others placed again (fast.place_batch)
Place = Callable[[np.ndarray, frozenset[int]], np.ndarray]


def windows(horizon: int, width: int = WIDTH, stride: int = STRIDE) -> list[tuple[int, int]]:
    """[start, end) of each window, the last one ending at the horizon."""
    if horizon <= width:
        return [(0, horizon)]
    firsts = list(range(0, horizon - width + 1, stride))
    if firsts[-1] != horizon - width:
        firsts.append(horizon - width)
    return [(t, t + width) for t in firsts]


def spots(grid: np.ndarray, queued: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each queued job's first step and first GPU in `grid` (-1, -1 where it is not placed):
    a batch run is a rectangle, so its first cell in row-major order is its corner."""
    ids, first_cell = np.unique(grid.ravel(), return_index=True)
    at = np.searchsorted(ids, queued)
    found = (at < len(ids)) & (ids[np.minimum(at, len(ids) - 1)] == queued)
    cell = np.where(found, first_cell[np.minimum(at, len(ids) - 1)], -1)
    G = grid.shape[1]
    return np.where(found, cell // G, -1), np.where(found, cell % G, -1)


def rebuilt(scenario: Scenario, grid: np.ndarray, *, queued: tuple[int, ...], jobs: Jobs,
            place: Place, max_sweeps: int = MAX_SWEEPS) -> np.ndarray:
    """`grid` with the window rebuilds that raise its batch value (the same grid where none
    does). `queued`: the batch jobs a rebuild may move (not running, not reserved)."""
    if not queued:
        return grid
    index = np.asarray(queued, dtype=np.int64)
    start, first = spots(grid, index)
    length, weight, cum = jobs.length[index], jobs.weight[index], jobs.decay
    T = scenario.T

    def value(begins: np.ndarray) -> float:
        """What the jobs earn from these starts (-1: not placed)."""
        on = begins >= 0
        ends = np.minimum(begins[on] + length[on], T)
        return float(np.sum(weight[on] * (cum[ends] - cum[begins[on]])))

    spans = windows(T, WIDTH, STRIDE)
    idle = tried = 0  # windows in a row that kept nothing; windows tried
    now = value(start)
    left_out = _most_earning(start < 0, weight, OUT_CAP)  # (changes only with the plan)
    while idle < len(spans) and tried < max_sweeps * len(spans):
        lo, hi = spans[tried % len(spans)]
        tried += 1
        lifted = (start >= 0) & (start < hi) & (start + length > lo)
        if not lifted.any():
            idle += 1
            continue
        moving = lifted | left_out
        work = grid.copy()
        for at, gpu, steps, i in zip(start[lifted].tolist(), first[lifted].tolist(),
                                     length[lifted].tolist(), index[lifted].tolist(),
                                     strict=True):
            work[at : at + steps, gpu : gpu + int(jobs.gpus[i])] = gridlib.FREE
        kept = frozenset(index[~moving].tolist())
        again = place(work, kept)
        new_start, new_first = spots(again, index)
        if (got := value(new_start)) > now + 1e-9 * max(1.0, abs(now)):
            grid, start, first, now = again, new_start, new_first, got
            left_out = _most_earning(start < 0, weight, OUT_CAP)
            idle = 0
        else:
            idle += 1
    return grid


def _most_earning(out: np.ndarray, weight: np.ndarray, cap: int) -> np.ndarray:
    """The `cap` jobs of `out` that earn most a step (ties: queue order); a negative
    `cap`: all of them."""
    if cap < 0 or int(out.sum()) <= cap:
        return out
    which = np.flatnonzero(out)
    top = which[np.argsort(-weight[which], kind="stable")[:cap]]
    chosen = np.zeros_like(out)
    chosen[top] = True
    return chosen
