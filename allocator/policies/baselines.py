"""MODEL.md's two baselines, never weakened: fifo (the seed's) and priority (Slurm-like backfill).

Both serve realtime from the static peak reservation; they differ only in the order
batch jobs are placed and in fifo's rule that no job starts before the previous one.
Both take the earliest start first, then the lowest aligned block.
"""

from __future__ import annotations

import numpy as np

from allocator import grid as gridlib
from allocator.model import BatchJob, Scenario
from allocator.policies.blocks import BlockIndex
from allocator.policies.placement import find, place
from allocator.policies.reservation import reserve


def _start(scenario: Scenario) -> tuple[np.ndarray, BlockIndex]:
    grid = gridlib.empty(scenario)
    gridlib.pin_running(scenario, grid)
    busy = grid >= 0
    reserve(scenario, grid, busy)
    return grid, BlockIndex(busy)


def _queued(scenario: Scenario) -> list[int]:
    return [i for i, job in enumerate(scenario.jobs)
            if isinstance(job, BatchJob) and not job.running]


def fifo(scenario: Scenario) -> np.ndarray:
    """Arrival order (then file order); each start >= the last placed job's start."""
    grid, index = _start(scenario)
    order = sorted(_queued(scenario), key=lambda i: (scenario.jobs[i].arrival_step, i))
    bound = 0
    for i in order:
        job = scenario.jobs[i]
        spot = find(index, job, max(job.arrival_step, bound), best_fit=False)
        if spot is None:
            continue  # fits nowhere: left out, and it does not block the ones after it
        place(grid, index, i, job, *spot)
        bound = spot[0]
    return grid


def priority(scenario: Scenario) -> np.ndarray:
    """Highest priority first (ties: arrival, file order), each at its earliest feasible start."""
    grid, index = _start(scenario)
    order = sorted(_queued(scenario),
                   key=lambda i: (-scenario.jobs[i].priority, scenario.jobs[i].arrival_step, i))
    for i in order:
        job = scenario.jobs[i]
        spot = find(index, job, job.arrival_step, best_fit=False)
        if spot is not None:
            place(grid, index, i, job, *spot)
    return grid
