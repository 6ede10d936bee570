"""`backfill`: what a Slurm user runs today, for the replay: priority order, backfill, and
the top job's reservation.

MODEL.md's `priority` baseline (static peak reservation for realtime, jobs by priority at
their earliest feasible start on the lowest free block), plus the scenario's reservations
honoured as Slurm's backfill scheduler honours its top job's planned start: the reserved
job is pinned to its block, and other jobs only backfill there if they end before it.
Which job is reserved, and keeping its start across replans, is the replay's choice
(pipelines/guard.py). Without reservations this is exactly `priority`.
"""

from __future__ import annotations

import numpy as np

from allocator import grid as gridlib
from allocator import reservations
from allocator.grid import Grid, Mask
from allocator.model import BatchJob, Scenario
from allocator.policies.blocks import BlockIndex
from allocator.policies.peak_reservation import reserve_peak
from allocator.policies.placement import find, place


def backfill(scenario: Scenario) -> Grid:
    """Priority order with backfill around the reserved jobs (legal by construction)."""
    grid = gridlib.empty(scenario)
    gridlib.pin_running(scenario, grid)
    held = reservations.holds(scenario)
    busy = grid >= 0
    if held.realtime_off is None:
        reserve_peak(scenario, grid, busy)
    else:
        reserve_peak(scenario, grid, busy, blocked=np.asarray(held.realtime_off.any(axis=0)))
        held.pin(grid)
        if held.batch_busy is not None:
            busy |= held.batch_busy
    index = BlockIndex(busy)
    queued = {i: job for i, job in enumerate(scenario.jobs)
              if isinstance(job, BatchJob) and not job.running and i not in held.reserved}
    order = sorted(queued, key=lambda i: (-queued[i].priority, queued[i].arrival_step, i))
    for i in order:
        job = queued[i]
        spot = find(index, job, job.arrival_step, best_fit=False)
        if spot is not None:
            place(grid, index, i, job, *spot)
    return grid


def static_columns(scenario: Scenario) -> Mask:
    """The GPUs the static realtime reservation takes (a reservation must avoid them)."""
    grid = gridlib.empty(scenario)
    gridlib.pin_running(scenario, grid)
    busy = grid >= 0
    pinned = busy.copy()
    reserve_peak(scenario, grid, busy)
    columns: Mask = (busy & ~pinned).any(axis=0)
    return columns
