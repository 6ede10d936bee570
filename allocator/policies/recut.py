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

On the tuning seeds of benchmarks/bench_quality.py up to 16 GPUs, after plan-day's trials
and hops, it lifts 17 of 189 proven plans (up to 97.80 -> 100% of the optimum), lowers
none, for about 3% more of plan-day's time (BENCHMARKS.md, "Re-cuts"). On the hot path it
would cost more than it lifts (the same section), so it runs where `hops` do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple

import numpy as np

from allocator import grid as gridlib
from allocator.model import Scenario
from allocator.policies import layout_climb

# Re-cut layouts judged per round (each a full batch placement), the most promising first
# (`ranked`): the family's plans up to 16 GPUs offer a few dozen, at 64 GPUs more.
MAX_TRIALS = 64
# The clusters re-cut: every trial is a batch placement, whose cost grows with the GPUs. At
# 64 GPUs, on plan-day's plans of the 64-GPU tuning seeds, 11 of 30 rise (+0.06% on
# average), none falls, for about 10% more of plan-day's time.
MAX_GPUS = 64


class Cut(NamedTuple):
    """One re-cut: the service's runs `old` on GPUs x and y become `new` (each a pair of
    [start, end) per GPU), which moves its cells over `window` from GPU `off` to `onto`."""

    service: int
    x: int
    y: int
    old: tuple[int, int, int, int]
    new: tuple[int, int, int, int]
    off: int
    onto: int
    window: tuple[int, int]


def cuts(scenario: Scenario, layout: np.ndarray) -> list[Cut]:
    """Every re-cut of `layout` (its realtime and running cells) whose new cells are free:
    per pair of overlapping runs of one service, the ends traded, then the starts."""
    # every run of a service on a GPU, GPU by GPU in time order
    found = [(job, gpu, start, end) for start, end, gpu, job in
             sorted(layout_climb.movable_runs(scenario, layout, step_zero_stays=False).tolist(),
                    key=lambda run: (run[2], run[0]))]
    free = layout == gridlib.FREE
    out: list[Cut] = []
    for service, x, a1, b1 in found:
        for other, y, a2, b2 in found:
            if other != service or y == x or not a1 <= a2 < b1 or b1 == b2:
                continue  # (a pair with a1 == a2 is met from both sides: the same cuts)
            old = (a1, b1, a2, b2)
            # the ends traded: the later end's cells move to the other GPU
            off, onto, window = (x, y, (b2, b1)) if b1 > b2 else (y, x, (b1, b2))
            if free[window[0]:window[1], onto].all():
                out.append(Cut(service, x, y, old, (a1, b2, a2, b1), off, onto, window))
            # the starts traded (past step 0): x from a2, y from a1
            if 0 < a1 < a2 and free[a1:a2, y].all():
                out.append(Cut(service, x, y, old, (a2, b1, a1, b2), x, y, (a1, a2)))
    return out


def _block_around(taken: np.ndarray, gpu: int) -> int:
    """The largest aligned block holding `gpu` with no GPU `taken` (0: `gpu` is taken)."""
    if taken[gpu]:
        return 0
    size, G = 1, len(taken)
    while True:
        lo = gpu // (2 * size) * (2 * size)
        if lo + 2 * size > G or taken[lo:lo + 2 * size].any():
            return size
        size *= 2


def promise(busy: np.ndarray, cut: Cut) -> int:
    """What `cut` offers batch work over its window: the aligned block it frees around the
    GPU it leaves (after the move), less the one it breaks around the GPU it takes."""
    before: np.ndarray = np.asarray(busy[cut.window[0]:cut.window[1]].any(axis=0))
    after = before.copy()
    after[cut.off], after[cut.onto] = False, True
    return _block_around(after, cut.off) - _block_around(before, cut.onto)


def ranked(scenario: Scenario, layout: np.ndarray) -> list[Cut]:
    """`cuts`, the most `promise` first (ties in `cuts`' order), so the cap on the trials
    keeps the moves batch work can use (at 64 GPUs a plan offers more than the cap)."""
    busy = layout != gridlib.FREE
    found = cuts(scenario, layout)
    gain = [promise(busy, cut) for cut in found]
    return [found[k] for k in sorted(range(len(found)), key=lambda k: -gain[k])]


def applied(layout: np.ndarray, cut: Cut) -> np.ndarray:
    """`layout` with `cut` made."""
    out: np.ndarray = layout.copy()
    old, new = cut.old, cut.new
    out[old[0]:old[1], cut.x] = gridlib.FREE
    out[old[2]:old[3], cut.y] = gridlib.FREE
    out[new[0]:new[1], cut.x] = cut.service
    out[new[2]:new[3], cut.y] = cut.service
    return out


def recuts(scenario: Scenario, layout: np.ndarray) -> Iterator[np.ndarray]:
    """Every layout one re-cut away from `layout`, the most promising first (`ranked`)."""
    return (applied(layout, cut) for cut in ranked(scenario, layout))


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
