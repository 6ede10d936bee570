"""A batch job's run length and block search, shared by every policy.

Shared so that all of them read constraints 2, 3 and 5 the same way.
"""

from __future__ import annotations

from allocator.model import BatchJob
from allocator.policies.blocks import BlockIndex


def run_length(job: BatchJob) -> int:
    return job.running.remaining_steps if job.running else job.duration_steps


def find(index: BlockIndex, job: BatchJob, earliest: int, best_fit: bool,
         also_busy: int = 0) -> tuple[int, int] | None:
    return index.find(job.gpus, run_length(job), earliest, best_fit, also_busy)
