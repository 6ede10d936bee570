"""MODEL.md's two baselines, never weakened: fifo (the seed's) and priority (Slurm-like backfill).

Both serve realtime from the static peak reservation; they differ only in the order
batch jobs are placed and in fifo's rule that no job starts before the previous one.
Both take the earliest start first, then the lowest aligned block, through fast's decoder
(compiled where built; `compiled=False` runs its Python reference).
"""

from __future__ import annotations

from allocator import grid as gridlib
from allocator.grid import Grid, Mask
from allocator.model import BatchJob, Scenario
from allocator.policies.decoder import Decoder, Jobs
from allocator.policies.peak_reservation import reserve_peak


def _start(scenario: Scenario, pinned: Grid | None = None) -> tuple[Grid, Mask]:
    """The grid with running jobs pinned (a copy of `pinned`, where the caller has it)
    and realtime's peak reservation; the cells batch work may not take."""
    if pinned is None:
        grid = gridlib.empty(scenario)
        gridlib.pin_running(scenario, grid)
    else:
        grid = pinned.copy()
    busy = grid >= 0
    reserve_peak(scenario, grid, busy)
    return grid, busy


def _queued(scenario: Scenario) -> dict[int, BatchJob]:
    """The batch jobs still to place, by their index in the scenario (file order)."""
    return {i: job for i, job in enumerate(scenario.jobs)
            if isinstance(job, BatchJob) and not job.running}


def _place(scenario: Scenario, order: list[int], fifo: bool, compiled: bool | None,
           start: tuple[Grid, Mask] | None = None, jobs: Jobs | None = None) -> Grid:
    """Each job of `order` at its earliest start (fifo: not before the last placed one's),
    on the lowest free aligned block; a job that fits nowhere is left out."""
    grid, busy = _start(scenario) if start is None else (start[0].copy(), start[1])
    decoder = Decoder.new(scenario, busy, None, jobs or Jobs.of(scenario), compiled,
                          best_fit=False, fifo=fifo)
    decoder.pack(order)
    decoder.write(scenario, grid)
    return grid


def _fifo_order(scenario: Scenario) -> list[int]:
    queued = _queued(scenario)
    return sorted(queued, key=lambda i: (queued[i].arrival_step, i))


def _priority_order(scenario: Scenario) -> list[int]:
    queued = _queued(scenario)
    return sorted(queued, key=lambda i: (-queued[i].priority, queued[i].arrival_step, i))


def fifo(scenario: Scenario, *, compiled: bool | None = None) -> Grid:
    """Arrival order (then file order); each start >= the last placed job's start."""
    return _place(scenario, _fifo_order(scenario), fifo=True, compiled=compiled)


def priority(scenario: Scenario, *, compiled: bool | None = None) -> Grid:
    """Highest priority first (ties: arrival, file order), each at its earliest feasible start."""
    return _place(scenario, _priority_order(scenario), fifo=False, compiled=compiled)


def both(scenario: Scenario, jobs: Jobs, pinned: Grid | None = None) -> tuple[Grid, Grid]:
    """priority's and fifo's grids from one peak reservation and fast's job arrays: fast
    scores both on every plan, so the shared start is worth keeping. `pinned`: the empty
    grid with running jobs pinned (gridlib.pin_running's), where the caller has it."""
    start = _start(scenario, pinned)
    return (_place(scenario, _priority_order(scenario), False, None, start, jobs),
            _place(scenario, _fifo_order(scenario), True, None, start, jobs))
