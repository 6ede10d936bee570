"""Hand-over shifts: a service's move from one GPU to another made a few steps earlier or
later, the batch work placed again around it.

A service that moves holds its old GPU X over [a1, b1) and its new GPU Y over [a2, b2),
with a1 < a2 <= b1 <= b2 (a step on both where a2 < b1, none where a2 == b1). The layouts
and the steps after them time that move by the service's own curve and swap limit, not
by what the batch work around it needs: on tuning5 s3235 (14 GPUs) a service leaves a
4-GPU block one step after the block's next job could start there, and a 6-step job of
priority 5 no longer fits before the service's evening rise; the optimum moves it one
step earlier (94.1% -> 100% of the optimum; BENCHMARKS.md, "Hand-over shifts"). A hop or
an evacuation cannot make that move (the new GPU is the service's own, not free), and a
re-cut trades the ends of two runs, not the step of the move.

Shifted by d steps: X holds [a1, b1 - d) and Y [a2 - d, b2), or X [a1, b1 + d) and Y
[a2 + d, b2). The service still gains one GPU and loses one, d steps off, and holds as
many GPUs as before outside the two d-step spans the shift moves (one more over one, one
fewer over the other, where they do not overlap: the objective's shortfall term prices
it). A shift that breaks a swap limit is not tried. fast runs none on a scenario with
reservations: a layout here does not mark the reserved cells realtime must keep off.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import islice

import numpy as np

from allocator import grid as gridlib
from allocator.model import Scenario
from allocator.policies import layout_climb
from allocator.policies.topup import swaps_hold

# The steps a move is shifted by, each way. On the family tuning sets (tuning2-4, the
# greedy filter on): 1 step lifts 99.227 -> 99.231% of the proven optima, 2 steps 99.239%,
# 3 the same as 2 for more time (BENCHMARKS.md, "Hand-over shifts").
MAX_SHIFT = 2
# Shifted layouts placed per plan (each a batch placement with its order search), the
# smallest shifts first; with `search`'s judge, only those its greedy pass prefers to the
# plan's layout. 8 keeps every lift 48 found on the tuning and replan sets.
MAX_TRIALS = 8


def shifts(scenario: Scenario, layout: np.ndarray) -> Iterator[np.ndarray]:
    """Every layout one shift away from `layout` (its realtime and running cells) whose
    new cells are free and that keeps every swap limit, the smallest shifts first."""
    runs = layout_climb.movable_runs(scenario, layout, step_zero_stays=False).tolist()
    free = layout == gridlib.FREE
    T = layout.shape[0]
    found: list[tuple[int, int, int, int, int, int, bool]] = []  # (d, v, X, Y, b1, a2, earlier)
    for a1, b1, x, v in runs:
        for a2, b2, y, w in runs:
            if w != v or y == x or not a1 < a2 <= b1 <= b2 or (a1, b1) == (a2, b2):
                continue
            for d in range(1, MAX_SHIFT + 1):
                if b1 - d > a1 and a2 - d >= 0 and free[a2 - d:a2, y].all():
                    found.append((d, v, x, y, b1, a2, True))
                if b1 + d <= T and a2 + d < b2 and free[b1:b1 + d, x].all():
                    found.append((d, v, x, y, b1, a2, False))
    found.sort(key=lambda item: item[0])  # stable: found order within a shift's size
    for d, v, x, y, b1, a2, earlier in found:
        moved = layout.copy()
        if earlier:  # X lets go d steps sooner, Y taken d steps sooner
            moved[b1 - d:b1, x] = gridlib.FREE
            moved[a2 - d:a2, y] = v
        else:  # X held d steps longer, Y taken d steps later
            moved[b1:b1 + d, x] = v
            moved[a2:a2 + d, y] = gridlib.FREE
        if swaps_hold(scenario, moved):
            yield moved


def search(scenario: Scenario, best: np.ndarray, layout_of: Callable[[np.ndarray], np.ndarray],
           place: Callable[[np.ndarray], np.ndarray], score: gridlib.Scorer,
           judge: Callable[[np.ndarray], float] | None = None) -> np.ndarray:
    """`best`, or the best plan `place` makes on a shift of its layout (`layout_of`: the
    plan's realtime and running cells) where that earns more and keeps every swap limit;
    up to MAX_TRIALS shifts are placed. `judge`: a layout's greedy value (no search), where
    given only the shifts it values above the plan's own layout are placed (placing every
    shift kept 0.006 points more of the optima on tuning2-3 for several times the shifts' time)."""
    if not scenario.realtime_jobs:
        return best
    value = score(best)
    layout = layout_of(best)
    tried = shifts(scenario, layout)
    if judge is not None:
        floor = judge(layout)
        tried = (cells for cells in tried if judge(cells) > floor)
    for cells in islice(tried, MAX_TRIALS):
        grid = place(cells.astype(best.dtype))
        got = score(grid)
        if got > value + 1e-9 and swaps_hold(scenario, grid):
            best, value = grid, got
    return best
