"""`fast`: the hot-path heuristic. Legal by construction, whole queue and horizon in view.

1. Running jobs are pinned.
2. Realtime demand is placed as a curve, not a peak (allocator/policies/realtime.py):
   the fewest GPUs that meet demand while changing by at most `swap_limit` per step,
   rising ahead of a peak, on the GPUs batch work can use least.
3. Batch-like jobs are placed greedily under several value orders, each job at its
   earliest feasible start on the aligned block that best fits the hole it lands in
   (the block whose buddy is already busy). Occupancy only grows, so no later placement
   opens an earlier start for a job already placed: one pass per order is final.
4. The same is tried with realtime's later layers (its rises and peaks) placed after the
   batch work, into the gaps it leaves, the batch placement keeping that many GPUs per
   step spare; long batch runs then need not dodge peaks placed before them.
5. The best grid by objective wins, the baselines' grids among the candidates, so fast
   is never below fifo or priority on the same scenario.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from allocator import grid as gridlib
from allocator import reservations
from allocator.model import BatchJob, Scenario
from allocator.policies import baselines
from allocator.policies.blocks import BlockIndex
from allocator.policies.placement import find, place, run_length
from allocator.policies.realtime import RealtimePlacer, place_realtime

OrderKey = Callable[[BatchJob, int], tuple]

# Value orders tried for batch jobs; each is cheap, and different contention shapes favour
# different ones (big-first packs, short-first backfills, arrival order respects fairness,
# long-first keeps the longest runs away from the horizon's end).
ORDERS: tuple[OrderKey, ...] = (
    lambda j, i: (-j.priority, -j.gpus * j.duration_steps, j.arrival_step, i),
    lambda j, i: (-j.priority, j.arrival_step, j.duration_steps, i),
    lambda j, i: (-j.priority * j.gpus * j.duration_steps, i),
    lambda j, i: (-j.priority, -j.gpus, j.duration_steps, i),
    lambda j, i: (j.arrival_step, -j.priority, i),
    lambda j, i: (-j.priority, -j.duration_steps, i),  # the horizon cuts long jobs the most
)


# What the order search may spend, in job placements: 100 up to 16 GPUs, then less as a
# placement's cost grows with the GPUs it scans. More buys little on the benchmark
# scenarios and costs milliseconds (BENCHMARKS.md); `gpuplan plan --search N` overrides.
SEARCH_PLACEMENTS = 100


def fast(scenario: Scenario, *, search: int | None = None) -> np.ndarray:
    """The heuristic's grid; `search` bounds the order search in job placements (0: none).

    The bound is a count, not a time, so the same input always gives the same grid.
    """
    if search is None:
        search = SEARCH_PLACEMENTS * 16 // max(16, scenario.G)
    base = gridlib.empty(scenario)
    gridlib.pin_running(scenario, base)
    held = reservations.holds(scenario)  # reserved jobs are pinned like running ones
    held.pin(base)
    held.keep_realtime_off(base)
    realtime_first = base.copy()
    place_realtime(scenario, realtime_first)
    held.release(realtime_first)
    candidates = [place_batch(scenario, realtime_first, None, search, held)]
    if scenario.realtime_jobs:
        around = base.copy()
        placer = RealtimePlacer(scenario, around)
        placer.place(around, "first")
        placer.finish(around)
        reserve = placer.reserve()
        if reserve.any():
            around = place_batch(scenario, around, reserve, search, held)
            placer.place(around, "later")
            held.release(around)
            candidates.append(around)
    if not scenario.reservations:  # the baselines know nothing of reservations
        candidates += [baselines.priority(scenario), baselines.fifo(scenario)]
    scores = [gridlib.objective(scenario, g) for g in candidates]
    return candidates[int(np.argmax(scores))]  # ties keep the earlier candidate


class Free:
    """What batch placement may use: the block index, and spare GPUs per step (if reserved)."""

    def __init__(self, index: BlockIndex, spare: np.ndarray | None) -> None:
        self.index = index
        self.spare = spare

    def copy(self) -> Free:
        return Free(self.index.copy(), None if self.spare is None else self.spare.copy())


def place_batch(scenario: Scenario, grid: np.ndarray, reserve: np.ndarray | None,
                search: int, held: reservations.Holds | None = None) -> np.ndarray:
    """Batch jobs onto `grid` (a copy): the best of the value orders, then the order search.

    `held`: the reservations (their jobs already pinned; their blocks busy past the start).
    """
    grid = grid.copy()
    spare = None if reserve is None else (grid == gridlib.FREE).sum(axis=1) - reserve
    busy = grid >= 0 if held is None or held.batch_busy is None else \
        (grid >= 0) | held.batch_busy
    free = Free(BlockIndex(busy), spare)
    skip = frozenset() if held is None else held.reserved
    queued = [i for i, job in enumerate(scenario.jobs)
              if isinstance(job, BatchJob) and not job.running and i not in skip]
    decay = np.concatenate(([0.0], np.cumsum(scenario.weights.decay ** np.arange(scenario.T))))
    best_value, best_order, best_spots = -1.0, (), {}
    seen: set[tuple[int, ...]] = set()
    for key in ORDERS:
        order = tuple(sorted(queued, key=lambda i, key=key: key(scenario.jobs[i], i)))
        if order in seen:
            continue
        seen.add(order)
        value, spots = pack(scenario, free.copy(), order, decay)
        if value > best_value:
            best_value, best_order, best_spots = value, order, spots
    if queued and search >= len(queued):
        best_value, best_spots = improve_order(scenario, free, best_order, best_value,
                                               best_spots, decay, search // len(queued))
    for i, (start, first) in best_spots.items():
        place(grid, free.index, i, scenario.jobs[i], start, first)
    return grid


def improve_order(scenario: Scenario, free: Free, order: tuple[int, ...], value: float,
                  spots: dict[int, tuple[int, int]], decay: np.ndarray,
                  packs: int) -> tuple[float, dict[int, tuple[int, int]]]:
    """First-improvement search over orders: move a delayed job ahead of others, keep gains.

    The greedy decoder puts each job at its earliest free start, so the order alone decides
    who is delayed; moving a delayed (or left out) job forward is the change that can
    help it. A trial replays only the suffix it changes, from a saved prefix state.
    """
    jobs = scenario.jobs
    current = list(order)
    budget = packs * max(1, len(order))  # in placements
    while budget > 0:
        prefix = _prefix_states(scenario, free, current, decay)
        movable = [a for a in range(1, len(current))
                   if current[a] not in spots
                   or spots[current[a]][0] > jobs[current[a]].arrival_step]
        improved = False
        # Front positions first: most gains come from pulling a delayed job to the head.
        for b in range(len(current) - 1):
            base_free, base_value, base_spots = prefix[b]
            for a in (a for a in movable if a > b):
                if budget <= 0:
                    break
                trial = [*current[:b], current[a], *current[b:a], *current[a + 1 :]]
                budget -= len(trial) - b
                tail_value, tail_spots = pack(scenario, base_free.copy(), tuple(trial[b:]),
                                              decay)
                if base_value + tail_value > value + 1e-9:
                    current, value = trial, base_value + tail_value
                    spots = {**base_spots, **tail_spots}
                    improved = True
                    break
            if improved or budget <= 0:
                break
        if not improved:
            break
    return value, spots


def _prefix_states(scenario: Scenario, free: Free, order: list[int],
                   decay: np.ndarray) -> list[tuple[Free, float, dict]]:
    """The free state, value and spots before each position of `order`, for suffix replays."""
    state = free.copy()
    value = 0.0
    spots: dict[int, tuple[int, int]] = {}
    out = []
    for i in order:
        out.append((state.copy(), value, dict(spots)))
        gained, placed = pack(scenario, state, (i,), decay)
        value += gained
        spots.update(placed)
    return out


def pack(scenario: Scenario, free: Free, order: tuple[int, ...],
         decay: np.ndarray) -> tuple[float, dict[int, tuple[int, int]]]:
    """Greedy placement in `order`, each job at its earliest start; returns value and spots.

    `decay[t]` is the sum of decay**u for u < t, so a run's reward is one subtraction.
    """
    T = scenario.T
    value = 0.0
    spots: dict[int, tuple[int, int]] = {}
    for i in order:
        job = scenario.jobs[i]
        spot = _earliest(free, job, T)
        if spot is None:
            continue
        start, first = spot
        end = min(start + run_length(job), T)
        free.index.occupy(first, job.gpus, start, end)
        if free.spare is not None:
            free.spare[start:end] -= job.gpus
        value += job.priority * job.gpus * (decay[end] - decay[start])
        spots[i] = spot
    return value, spots


def _earliest(free: Free, job: BatchJob, T: int) -> tuple[int, int] | None:
    """The earliest block-feasible start that also leaves the reserved GPUs spare.

    Steps without `gpus` to spare count as busy in every block, so one search does both.
    """
    short = 0
    if free.spare is not None:
        for t in np.flatnonzero(free.spare < job.gpus).tolist():
            short |= 1 << t
    return find(free.index, job, job.arrival_step, best_fit=True, also_busy=short)
