"""The baselines' static peak reservation, exactly as MODEL.md's fine print spells it out.

Every realtime job reserves max(demand) GPUs for the whole horizon, taken from the top,
in file order; one with `current_gpus` keeps its own first and migrates within its
swap limit (acquire missing GPUs first, highest first, then release, highest first).
"""

from __future__ import annotations

from itertools import islice

import numpy as np

from allocator.grid import Grid, Mask
from allocator.model import BatchJob, RealtimeJob, Scenario


def reserve_peak(scenario: Scenario, grid: Grid, busy: Mask,
                 blocked: Mask | None = None) -> None:
    """Fill the realtime cells of `grid` and mark every reserved GPU busy for batch work.

    A reserved GPU not yet acquired stays idle: busy for batch jobs, empty in the grid.
    `blocked` (G bools): GPUs promised to a waiting job (the Slurm-style baseline), never
    taken; MODEL.md's baselines pass none.
    """
    T, G = scenario.T, scenario.G
    pinned = np.zeros(G, dtype=bool)
    for job in scenario.jobs:
        if isinstance(job, BatchJob) and job.running:
            # A running block is not free "at every step": it is pinned from step 0.
            pinned[job.running.first_gpu : job.running.first_gpu + job.gpus] = True
    someones_current = np.zeros(G, dtype=bool)
    for job in scenario.realtime_jobs:
        if job.current_gpus:
            someones_current[list(job.current_gpus)] = True
    taken_mask = pinned.copy()
    if blocked is not None:
        taken_mask |= blocked
    # plain lists for the per-GPU scans below (numpy's scalar reads cost more)
    taken, others = taken_mask.tolist(), someones_current.tolist()
    for index, job in enumerate(scenario.jobs):
        if not isinstance(job, RealtimeJob):
            continue
        size = max(job.demand)
        own = sorted(job.current_gpus or (), reverse=True)[:size]
        top_up = list(islice((g for g in range(G - 1, -1, -1)
                              if not taken[g] and not others[g]), max(size - len(own), 0)))
        reservation = set(own) | set(top_up)
        for g in reservation:
            taken[g] = True
        if job.current_gpus is None:
            grid[:, sorted(reservation)] = index
        else:
            for t, held in enumerate(_trajectory(job, reservation, T)):
                grid[t, sorted(held)] = index
                busy[t, sorted(held)] = True
        busy[:, sorted(reservation)] = True


def _trajectory(job: RealtimeJob, reservation: set[int], T: int) -> list[set[int]]:
    held = set(job.current_gpus or ())
    out = []
    for _ in range(T):
        budget = job.swap_limit
        acquire = sorted(reservation - held, reverse=True)[:budget]
        held = held | set(acquire)
        budget -= len(acquire)
        release = sorted(held - reservation, reverse=True)[:budget]
        held = held - set(release)
        out.append(held)
    return out
