"""`fast`: the hot-path heuristic. Legal by construction, whole queue and horizon in view.

1. Running jobs are pinned.
2. Realtime demand is placed as a curve, not a peak: the fewest GPUs that meet demand
   while changing by at most `swap_limit` per step (rising ahead of a peak), held on
   the highest-numbered GPUs so that low aligned blocks stay whole for batch work.
3. Batch-like jobs are placed greedily under several value orders, each job at its
   earliest feasible start on the aligned block that best fits the hole it lands in
   (the block whose buddy is already busy).
4. The best grid by objective wins, the baselines' grids among the candidates, so fast
   is never below fifo or priority on the same scenario.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from allocator import grid as gridlib
from allocator.model import BatchJob, RealtimeJob, Scenario
from allocator.policies import baselines
from allocator.policies.placement import feasible, occupy, run_length

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
    queued = [i for i, job in enumerate(scenario.jobs)
              if isinstance(job, BatchJob) and not job.running]
    candidates = []
    seen_orders = set()
    for key in ORDERS:
        order = tuple(sorted(queued, key=lambda i, key=key: key(scenario.jobs[i], i)))
        if order in seen_orders:
            continue
        seen_orders.add(order)
        candidates.append(pack(scenario, base, order))
    candidates.append(baselines.priority(scenario))
    candidates.append(baselines.fifo(scenario))
    scores = [gridlib.objective(scenario, g) for g in candidates]
    return candidates[int(np.argmax(scores))]


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
    """Constraint 4 by construction: each step changes at most `swap_limit` GPUs."""
    G = scenario.G
    realtime = [(i, j) for i, j in enumerate(scenario.jobs) if isinstance(j, RealtimeJob)]
    realtime.sort(key=lambda p: (-p[1].priority, p[0]))
    reserved_current = np.zeros(G, dtype=bool)
    for _, job in realtime:
        if job.current_gpus:
            reserved_current[list(job.current_gpus)] = True
    for index, job in realtime:
        own = np.zeros(G, dtype=bool)
        if job.current_gpus:
            own[list(job.current_gpus)] = True
        free = (grid == gridlib.FREE) & ~(reserved_current & ~own)  # (T, G)
        # Only GPUs free from t to the horizon's end: a GPU once taken is never lost.
        usable = np.flip(np.logical_and.accumulate(np.flip(free, 0), axis=0), 0)
        capacity = usable.sum(axis=1)
        start = len(job.current_gpus) if job.current_gpus is not None else None
        target = target_curve(np.asarray(job.demand), job.swap_limit, start, capacity)
        held = set(job.current_gpus) if job.current_gpus is not None else None
        for t in range(scenario.T):
            free_now = [g for g in range(G - 1, -1, -1) if usable[t, g]]  # preferred first
            held = _step(held, free_now, int(target[t]), job.swap_limit)
            grid[t, sorted(held)] = index
        if job.current_gpus:
            reserved_current[list(job.current_gpus)] = False


def _step(held: set[int] | None, free_now: list[int], target: int, limit: int) -> set[int]:
    """The next held set: toward `target` GPUs, then toward preferred GPUs, within `limit`."""
    if held is None:  # step 0 with no current GPUs: unconstrained
        return set(free_now[:target])
    rank = {g: r for r, g in enumerate(free_now)}
    keep = set(held)  # usable GPUs stay usable, so nothing held is ever lost
    budget = limit
    if len(keep) < target:
        add = [g for g in free_now if g not in keep][: min(target - len(keep), budget)]
        keep |= set(add)
        budget -= len(add)
    elif len(keep) > target:
        drop = sorted(keep, key=rank.__getitem__, reverse=True)[: min(len(keep) - target, budget)]
        keep -= set(drop)
        budget -= len(drop)
    # Migrate toward the preferred (high) GPUs, two changes per move, while it helps.
    while budget >= 2 and keep:
        worst = max(keep, key=rank.__getitem__)
        better = next((g for g in free_now if g not in keep), None)
        if better is None or rank[better] >= rank[worst]:
            break
        keep = (keep - {worst}) | {better}
        budget -= 2
    return keep


# -- batch -------------------------------------------------------------------------------

def pack(scenario: Scenario, base: np.ndarray, order: tuple[int, ...]) -> np.ndarray:
    """Greedy placement in `order`, each job at its earliest start.

    Occupancy only grows, so no later placement can open an earlier start for a job
    already placed, nor room for one left out: one pass is final.
    """
    grid = base.copy()
    busy = grid >= 0
    for i in order:
        spot = best_spot(busy, scenario.jobs[i])
        if spot is not None:
            occupy(grid, busy, i, scenario.jobs[i], *spot)
    return grid


def best_spot(busy: np.ndarray, job: BatchJob) -> tuple[int, int] | None:
    """Earliest start; among its blocks the one whose buddy is busiest (best fit)."""
    k = job.gpus
    ok = feasible(busy, k, run_length(job), job.arrival_step)
    rows = ok.any(axis=1)
    if not rows.any():
        return None
    start = int(rows.argmax())
    blocks = np.flatnonzero(ok[start])
    if len(blocks) == 1:
        return start, int(blocks[0]) * k
    end = min(start + run_length(job), busy.shape[0])
    nb = ok.shape[1]
    used = busy[start:end, : nb * k].sum(axis=0).reshape(nb, k).sum(axis=1)
    buddy = blocks ^ 1
    window = (end - start) * k
    fit = np.where(buddy < nb, used[np.minimum(buddy, nb - 1)], window)
    return start, int(blocks[int(np.argmax(fit))]) * k
