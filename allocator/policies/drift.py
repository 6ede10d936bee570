"""fast's drift layout for a replan: services walk toward the GPUs batch blocks need least.

The layer layouts (realtime.py) keep a service's base layers on its current GPUs all day:
a held GPU never moves. On a replan that can leave a service on the one aligned block a
large job needs, though its demand rises and falls through the day: each rise could take
a GPU realtime's rank prefers and each fall let go of one it likes least, at no cost in
swaps beyond the curve's own. Here the layout is made step by step: every service follows
its target curve, releasing its least preferred GPUs and acquiring the most preferred free
ones, and where its swap budget has room it moves one GPU from an aligned block to a
better one outside it (at swap limit 1 over two steps: the new GPU a step early).

The flipped drift layout (`until` > 0) is the same walk with the rank turned over before
step `until`: services first sit on the aligned blocks (the GPUs batch blocks need most)
while the tail and broken blocks go to batch work that starts now, then walk out at their
swap limit's pace, freeing a whole block for a large job later in the day. On a fresh plan
the layer layouts never build that shape: every one of them prefers the tail from step 0.

Legal by construction: a service takes only GPUs free at that step (not running work's,
not another service's), and each step's changes are counted against its swap limit.
"""

from __future__ import annotations

import numpy as np

from allocator import grid as gridlib
from allocator.model import RealtimeJob, Scenario
from allocator.policies.decoder import _packc
from allocator.policies.realtime import RealtimePlacer


def drift_layout(scenario: Scenario, base: np.ndarray, placer: RealtimePlacer,
                 until: int = 0) -> np.ndarray:
    """`base` (running work pinned) with every service's cells laid step by step: its
    curve followed, releases from its least preferred GPUs, acquires on the most preferred
    free ones, and spare swap budget spent moving off aligned blocks toward better GPUs;
    before step `until`, the rank flipped and no drift (the flipped layout).
    In C where the extension is built (`_packc.drift`; `_drift_layout_py` its reference)."""
    G = scenario.G
    block = max(placer.largest, 1)
    whole = (G // block) * block
    # the aligned largest block each GPU sits in (-1: outside every one, the tail)
    home = np.where(np.arange(G) < whole, np.arange(G) // block, -1).astype(np.int64)
    jobs = {i: j for i, j in enumerate(scenario.jobs) if isinstance(j, RealtimeJob)}
    services = sorted(jobs, key=lambda i: -jobs[i].priority)
    # a curve capped by others' current GPUs (the layer layouts keep off them all day)
    # would miss the GPUs they let go here: the curve over every free GPU where it differs
    curves = {i: placer.wanted.get(i, placer.curves[i]) for i in services}
    if _packc is None or base.dtype != np.int32:
        return _drift_layout_py(scenario, base, placer.rank, home, jobs, services, curves,
                                until)
    grid: np.ndarray = np.ascontiguousarray(base, dtype=np.int32).copy()
    current = np.full((len(services), G), -1, dtype=np.int64)
    for row, i in enumerate(services):
        gpus = jobs[i].current_gpus or ()
        current[row, :len(gpus)] = gpus
    _packc.drift(grid, np.ascontiguousarray(placer.rank, dtype=np.float64), home,
                 np.array([curves[i] for i in services], dtype=np.int64).reshape(
                     len(services), scenario.T),
                 np.array(services, dtype=np.int64),
                 np.array([jobs[i].swap_limit for i in services], dtype=np.int64), current,
                 until)
    return grid


def _drift_layout_py(scenario: Scenario, base: np.ndarray, rank: np.ndarray,
                     home: np.ndarray, jobs: dict[int, RealtimeJob], services: list[int],
                     curves: dict[int, np.ndarray], until: int = 0) -> np.ndarray:
    """`drift_layout` in numpy: the reference for the compiled one."""
    T, G = scenario.T, scenario.G
    grid: np.ndarray = base.copy()
    held = {i: list(jobs[i].current_gpus or ()) for i in services}
    straight, flipped = rank, -rank
    for t in range(T):
        rank = flipped if t < until else straight
        taken = np.zeros(G, dtype=bool)
        released: dict[int, int] = {}  # per service, the GPUs let go at t (kept ones a subset)
        # releases first (the curve's falls), so a GPU let go is free to another this step
        for i in services:
            want = int(curves[i][t])
            keep = [g for g in held[i] if grid[t, g] == gridlib.FREE]
            if len(keep) > want:
                keep = sorted(keep, key=lambda g: rank[g])[len(keep) - want:]
            released[i] = len(held[i]) - len(keep)
            held[i] = keep
            taken[keep] = True
        free = (grid[t] == gridlib.FREE) & ~taken
        for i in services:
            job = jobs[i]
            want = int(curves[i][t])
            changes = released[i]
            while len(held[i]) < want and changes < job.swap_limit:
                pick = _most_preferred(free, rank)
                if pick < 0:
                    break
                held[i].append(pick)
                free[pick] = False
                changes += 1
            if t >= until:
                _drift(job, t, T, held[i], free, rank, home, changes, curves[i])
            for g in held[i]:
                free[g] = False
        for i in services:
            for g in held[i]:
                grid[t, g] = i
    return grid


def _most_preferred(free: np.ndarray, rank: np.ndarray) -> int:
    """The GPU of `free` realtime's rank likes best (-1: none)."""
    options = np.flatnonzero(free)
    return int(options[np.argmax(rank[options])]) if len(options) else -1


def _drift(job: RealtimeJob, t: int, T: int, held: list[int], free: np.ndarray,
           rank: np.ndarray, home: np.ndarray, changes: int, curve: np.ndarray) -> None:
    """Spend spare budget at t moving the service's least preferred GPU in an aligned
    block to a more preferred free one in another block (or the tail): a swap where two
    changes fit, else (the curve not rising next step) the new GPU taken now and the old
    one let go next step by the curve's own release rule. `held` and `free` change in
    place."""
    spare = job.swap_limit - changes
    while held and spare >= 1:
        worst = min(held, key=lambda g: rank[g])
        if home[worst] < 0:
            return  # already off every aligned block
        pick = _most_preferred(free & (home != home[worst]) & (rank > rank[worst]), rank)
        if pick < 0:
            return
        if spare >= 2:
            held.remove(worst)
            held.append(pick)
            free[pick] = False
            spare -= 2
            continue
        if t + 1 >= T:
            return
        nxt, now = int(curve[t + 1]), len(held)
        # a rise next step takes a preferred GPU anyway; else next step holds now + 1
        # GPUs down to `nxt`: that many releases must fit
        if nxt > now or now + 1 - nxt > job.swap_limit:
            return
        held.append(pick)
        free[pick] = False
        return
