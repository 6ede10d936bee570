"""A batch job's run length and block search, shared by every policy.

Shared so that all of them read constraints 2, 3 and 5 the same way.
"""

from __future__ import annotations

from allocator.grid import Grid
from allocator.model import BatchJob
from allocator.policies.blocks import BlockIndex


def run_length(job: BatchJob) -> int:
    return job.running.remaining_steps if job.running else job.duration_steps


def find(index: BlockIndex, job: BatchJob, earliest: int, best_fit: bool,
         also_busy: int = 0, gap: bool = False) -> tuple[int, int] | None:
    return index.find(job.gpus, run_length(job), earliest, best_fit, also_busy, gap)


def place(grid: Grid, index: BlockIndex, job_index: int, job: BatchJob, start: int,
          first_gpu: int) -> None:
    """Constraint 5: one block, every step from the start to the run's end (or the horizon's)."""
    end = min(start + run_length(job), grid.shape[0])
    grid[start:end, first_gpu : first_gpu + job.gpus] = job_index
    index.occupy(first_gpu, job.gpus, start, end)
