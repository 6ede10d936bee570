"""Re-cuts: two overlapping runs of one service trade their ends (or starts) across their
two GPUs, at no cost in swaps.

A service whose demand rises for a while holds a second GPU over the rise, and the
layouts give each layer one GPU for its run: when the demand falls again, the GPU the top
layer sat on is the one let go, whichever of the two the batch work wants. A hop can move
a service off a GPU, but it pays a swap at each edge of its window, and a service with a
swap limit of 1 has none to spare. Trading the ends of two overlapping runs costs nothing:
with runs [a1, b1) on GPU X and [a2, b2) on GPU Y (a1 <= a2 < b1), X can hold [a1, b2)
and Y [a2, b1) instead; at every step the service acquires and releases as many GPUs as
before, only which of its two it lets go differs. Trading the starts is the same move at
the other end (both starts past step 0, where current GPUs fix who holds what). Two
events on one GPU at one step can only cancel, so no step's swaps rise: each re-cut is
legal by construction, and the batch work placed again around it judges it.

On the tuning seeds of benchmarks/bench_quality.py, after plan-day's trials and hops, it
lifts 17 of 189 proven plans (up to 97.80 -> 100% of the optimum), lowers none, for about
3% more of plan-day's time (BENCHMARKS.md, "Re-cuts").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from allocator import grid as gridlib
from allocator.model import RealtimeJob, Scenario

# Re-cut layouts judged per round (each a full batch placement): past this many, the rest
# wait for the next round. The family's plans up to 16 GPUs offer a few dozen.
MAX_TRIALS = 64
# The clusters re-cut: every candidate is a batch placement, whose cost grows with the GPUs.
MAX_GPUS = 16


def runs(layout: np.ndarray, realtime: np.ndarray) -> list[tuple[int, int, int, int]]:
    """(job, gpu, start, end) of every maximal run of one service on one GPU in `layout`
    (`realtime[i]`: whether job index i is a service), GPU by GPU, in time order."""
    out: list[tuple[int, int, int, int]] = []
    T = layout.shape[0]
    for g, column in enumerate(layout.T.tolist()):
        t = 0
        while t < T:
            cell = column[t]
            if cell >= 0 and realtime[cell]:
                start = t
                while t < T and column[t] == cell:
                    t += 1
                out.append((cell, g, start, t))
            else:
                t += 1
    return out


def _moved(layout: np.ndarray, job: int, x: int, y: int, old: tuple[int, int, int, int],
           new: tuple[int, int, int, int]) -> np.ndarray | None:
    """`layout` with the service's runs [old[0], old[1]) on GPU x and [old[2], old[3]) on
    y replaced by [new[0], new[1]) and [new[2], new[3]), or None where a new cell is not
    free."""
    out: np.ndarray = layout.copy()
    out[old[0]:old[1], x] = gridlib.FREE
    out[old[2]:old[3], y] = gridlib.FREE
    if (out[new[0]:new[1], x] != gridlib.FREE).any() or \
            (out[new[2]:new[3], y] != gridlib.FREE).any():
        return None
    out[new[0]:new[1], x] = job
    out[new[2]:new[3], y] = job
    return out


def recuts(scenario: Scenario, layout: np.ndarray) -> Iterator[np.ndarray]:
    """Every layout one re-cut away from `layout` (its realtime and running cells only):
    per pair of overlapping runs of one service, the ends traded, then the starts."""
    realtime = np.zeros(len(scenario.jobs), dtype=bool)
    for i, job in enumerate(scenario.jobs):
        realtime[i] = isinstance(job, RealtimeJob)
    found = runs(layout, realtime)
    for service, x, a1, b1 in found:
        for other, y, a2, b2 in found:
            if other != service or y == x or not a1 <= a2 < b1 or b1 == b2:
                continue  # (a pair with a1 == a2 is met from both sides: the same cuts)
            traded = _moved(layout, service, x, y, (a1, b1, a2, b2), (a1, b2, a2, b1))
            if traded is not None:
                yield traded
            if 0 < a1 < a2:  # the starts traded: x from a2, y from a1
                traded = _moved(layout, service, x, y, (a1, b1, a2, b2), (a2, b1, a1, b2))
                if traded is not None:
                    yield traded


def search(scenario: Scenario, best: np.ndarray, layout_of: Callable[[np.ndarray], np.ndarray],
           place: Callable[[np.ndarray], np.ndarray], score: gridlib.Scorer,
           rounds: int) -> np.ndarray:
    """`best`, or the best plan `place` makes on a re-cut of its layout (`layout_of`: the
    plan's realtime and running cells), round after round while one lifts the plan."""
    if scenario.G > MAX_GPUS or not scenario.realtime_jobs:
        return best
    value = score(best)
    for _ in range(rounds):
        lifted = None
        for k, cells in enumerate(recuts(scenario, layout_of(best))):
            if k >= MAX_TRIALS:
                break
            grid = place(cells)
            got = score(grid)
            if got > value + 1e-9:
                lifted, value = grid, got
        if lifted is None:
            break
        best = lifted
    return best
