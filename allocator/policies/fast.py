"""`fast`: the hot-path heuristic. Legal by construction, whole queue and horizon in view.

1. Running jobs are pinned.
2. Realtime demand is placed as a curve, not a peak: the fewest GPUs that meet demand
   while changing by at most `swap_limit` per step (rising ahead of a peak), held on
   the highest-numbered GPUs so that low aligned blocks stay whole for batch work.
3. Batch-like jobs are placed greedily under several value orders, each job at its
   earliest feasible start on the aligned block that best fits the hole it lands in
   (the block whose buddy is already busy). Occupancy only grows, so no later placement
   opens an earlier start for a job already placed: one pass per order is final.
4. The best grid by objective wins, the baselines' grids among the candidates, so fast
   is never below fifo or priority on the same scenario.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from allocator import grid as gridlib
from allocator.model import BatchJob, RealtimeJob, Scenario
from allocator.policies import baselines
from allocator.policies.blocks import BlockIndex
from allocator.policies.placement import find, place, run_length

OrderKey = Callable[[BatchJob, int], tuple]

# Value orders tried for batch jobs; each is cheap, and different contention shapes favour
# different ones (big-first packs, short-first backfills, arrival order respects fairness).
ORDERS: tuple[OrderKey, ...] = (
    lambda j, i: (-j.priority, -j.gpus * j.duration_steps, j.arrival_step, i),
    lambda j, i: (-j.priority, j.arrival_step, j.duration_steps, i),
    lambda j, i: (-j.priority * j.gpus * j.duration_steps, i),
    lambda j, i: (-j.priority, -j.gpus, j.duration_steps, i),
    lambda j, i: (j.arrival_step, -j.priority, i),
)


def fast(scenario: Scenario) -> np.ndarray:
    base = gridlib.empty(scenario)
    gridlib.pin_running(scenario, base)
    place_realtime(scenario, base)
    index = BlockIndex(base >= 0)
    queued = [i for i, job in enumerate(scenario.jobs)
              if isinstance(job, BatchJob) and not job.running]
    decay = np.concatenate(([0.0], np.cumsum(scenario.weights.decay ** np.arange(scenario.T))))
    best_value, best_spots = -1.0, {}
    seen: set[tuple[int, ...]] = set()
    for key in ORDERS:
        order = tuple(sorted(queued, key=lambda i, key=key: key(scenario.jobs[i], i)))
        if order in seen:
            continue
        seen.add(order)
        value, spots = pack(scenario, index.copy(), order, decay)
        if value > best_value:
            best_value, best_spots = value, spots
    grid = base
    for i, (start, first) in best_spots.items():
        place(grid, index, i, scenario.jobs[i], start, first)
    candidates = [grid, baselines.priority(scenario), baselines.fifo(scenario)]
    scores = [gridlib.objective(scenario, g) for g in candidates]
    return candidates[int(np.argmax(scores))]  # ties keep fast's own grid


def pack(scenario: Scenario, index: BlockIndex, order: tuple[int, ...],
         decay: np.ndarray) -> tuple[float, dict[int, tuple[int, int]]]:
    """Greedy placement in `order`, each job at its earliest start; returns value and spots.

    `decay[t]` is the sum of decay**u for u < t, so a run's reward is one subtraction.
    """
    T = scenario.T
    value = 0.0
    spots: dict[int, tuple[int, int]] = {}
    for i in order:
        job = scenario.jobs[i]
        spot = find(index, job, job.arrival_step, best_fit=True)
        if spot is None:
            continue
        start, first = spot
        end = min(start + run_length(job), T)
        index.occupy(first, job.gpus, start, end)
        value += job.priority * job.gpus * (decay[end] - decay[start])
        spots[i] = spot
    return value, spots


# -- realtime ----------------------------------------------------------------------------

def target_curve(demand: np.ndarray, swap_limit: int, start: int | None,
                 capacity: np.ndarray) -> np.ndarray:
    """The fewest GPUs per step that cover demand with steps of at most `swap_limit`.

    Backward pass: rise early enough to meet each peak; forward pass: never drop faster
    than the limit allows (from `start`, the count held before step 0, when known).
    """
    need = np.minimum(demand.astype(np.int64), capacity)
    T = len(need)
    for t in range(T - 2, -1, -1):
        need[t] = max(need[t], need[t + 1] - swap_limit)
    previous = start
    for t in range(T):
        if previous is not None:
            need[t] = max(need[t], previous - swap_limit)
        need[t] = min(need[t], capacity[t])
        previous = need[t]
    return need


def place_realtime(scenario: Scenario, grid: np.ndarray) -> None:
    """Constraint 4 by construction: each step changes at most `swap_limit` GPUs.

    Realtime jobs go in priority order, each on GPUs free from now to the horizon's end
    (so a GPU once taken is never lost to anyone), preferring the highest-numbered.
    """
    G = scenario.G
    realtime = [(i, j) for i, j in enumerate(scenario.jobs) if isinstance(j, RealtimeJob)]
    realtime.sort(key=lambda p: (-p[1].priority, p[0]))
    others_current = np.zeros(G, dtype=bool)
    for _, job in realtime:
        if job.current_gpus:
            others_current[list(job.current_gpus)] = True
    for index, job in realtime:
        own = np.zeros(G, dtype=bool)
        if job.current_gpus:
            own[list(job.current_gpus)] = True
        free = (grid == gridlib.FREE) & ~(others_current & ~own)
        usable = np.flip(np.logical_and.accumulate(np.flip(free, 0), axis=0), 0)
        start = len(job.current_gpus) if job.current_gpus is not None else None
        target = target_curve(np.asarray(job.demand), job.swap_limit, start,
                              usable.sum(axis=1))
        held = own.copy() if job.current_gpus is not None else None
        for t in range(scenario.T):
            held = _step(held, usable[t], int(target[t]), job.swap_limit)
            grid[t, held] = index
        others_current &= ~own


def _step(held: np.ndarray | None, usable: np.ndarray, target: int, limit: int) -> np.ndarray:
    """The next held set: toward `target` GPUs, then toward higher GPUs, within `limit`."""
    if held is None:  # step 0 with no current GPUs: unconstrained
        held = np.zeros(len(usable), dtype=bool)
        held[np.flatnonzero(usable)[::-1][:target]] = True
        return held
    held = held.copy()
    count = int(held.sum())
    budget = limit
    if count < target:
        add = np.flatnonzero(usable & ~held)[::-1][: min(target - count, budget)]
        held[add] = True
        budget -= len(add)
    elif count > target:
        drop = np.flatnonzero(held)[: min(count - target, budget)]  # lowest first
        held[drop] = False
        budget -= len(drop)
    moves = budget // 2
    if moves:  # swap the lowest held GPUs for the highest free ones, while that climbs
        up = np.flatnonzero(usable & ~held)[::-1][:moves]
        down = np.flatnonzero(held)[: len(up)]
        n = int((up[: len(down)] > down).sum())
        held[down[:n]] = False
        held[up[:n]] = True
    return held
