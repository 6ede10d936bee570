"""The grid as the policies hold it: a (T, G) int32 array of job indices, -1 for free.

Job indices are positions in `scenario.jobs`; ids appear only at the edges.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from allocator.model import BatchJob, Scenario

FREE = -1

# The plan as the policies hold it (see above); MODEL.md's id grid exists only at the edges.
Grid = NDArray[np.int32]
# A (T, G) or per-GPU yes/no: busy cells, pinned cells, blocked columns.
Mask = NDArray[np.bool_]


def empty(scenario: Scenario) -> Grid:
    return np.full((scenario.T, scenario.G), FREE, dtype=np.int32)


def pin_running(scenario: Scenario, grid: Grid) -> None:
    """Constraint 2, inherited work: a running job holds its block from step 0."""
    for index, job in enumerate(scenario.jobs):
        if isinstance(job, BatchJob) and job.running:
            first = job.running.first_gpu
            grid[: min(job.running.remaining_steps, scenario.T), first : first + job.gpus] = index


class Placement(NamedTuple):
    """Where a batch job sits in a grid: steps [start, end), GPUs from first_gpu."""

    start: int
    first_gpu: int
    end: int


def placement(grid: Grid, index: int) -> Placement | None:
    """Job `index`'s cells in `grid` as a placement (None: it has none)."""
    rows, cols = np.nonzero(grid == index)
    if not len(rows):
        return None
    return Placement(int(rows.min()), int(cols.min()), int(rows.max()) + 1)


def placements(scenario: Scenario, grid: Grid, *,
               queued_only: bool = False) -> dict[int, Placement]:
    """Every placed batch job's placement, by job index (running jobs left out if
    `queued_only`: their placement is pinned, not chosen)."""
    out = {}
    for i, job in enumerate(scenario.jobs):
        if isinstance(job, BatchJob) and not (queued_only and job.running):
            found = placement(grid, i)
            if found is not None:
                out[i] = found
    return out


def to_ids(scenario: Scenario, grid: Grid) -> list[list[str | None]]:
    ids = [job.id for job in scenario.jobs]
    return [[ids[c] if c >= 0 else None for c in row] for row in grid.tolist()]


def objective(scenario: Scenario, grid: Grid) -> float:
    """MODEL.md's objective, vectorised for comparing candidate grids inside a policy.

    The validator's `compute_metrics` is the reference; a test holds the two equal.
    """
    n = len(scenario.jobs)
    T = scenario.T
    if n == 0:
        return 0.0
    # Cells per (step, job); FREE (-1) wraps to the last column, which is dropped.
    rows = np.repeat(np.arange(T) * (n + 1), scenario.G)
    counts = np.bincount(rows + grid.ravel() % (n + 1), minlength=T * (n + 1))
    counts = counts.reshape(T, n + 1)[:, :n]
    decay = scenario.weights.decay ** np.arange(T)
    total = 0.0
    for i, job in enumerate(scenario.jobs):
        if isinstance(job, BatchJob):
            total += job.priority * float(decay @ counts[:, i])
        else:
            short = np.maximum(np.asarray(job.demand) - counts[:, i], 0).sum()
            total -= scenario.weights.realtime_penalty * job.priority * float(short)
    return total
