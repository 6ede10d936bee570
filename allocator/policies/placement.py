"""Where a batch job can go: aligned power-of-two blocks free over a run, found with numpy.

Shared by every policy, so that all of them read constraints 2, 3 and 5 the same way.
"""

from __future__ import annotations

import functools

import numpy as np

from allocator.model import BatchJob


def run_length(job: BatchJob) -> int:
    return job.running.remaining_steps if job.running else job.duration_steps


def feasible(busy: np.ndarray, gpus: int, length: int, earliest: int) -> np.ndarray:
    """ok[s, i]: block i (GPUs [i*gpus, (i+1)*gpus)) is free at every step of a run from s.

    `busy` is a (T, G) bool array of cells that cannot be used. A run from s covers
    steps s .. min(s + length, T) - 1 (constraint 5; a run may pass the horizon's end).
    """
    T, G = busy.shape
    blocks = G // gpus
    if blocks == 0 or earliest >= T:
        return np.zeros((T, max(blocks, 0)), dtype=bool)
    if gpus == 1:
        per_block = busy
    else:
        per_block = busy[:, : blocks * gpus].reshape(T, blocks, gpus).any(axis=2)
    cum = per_block.cumsum(axis=0, dtype=np.int32)
    starts, lasts = _windows(T, length)
    ok = (cum[lasts] - cum[starts] + per_block[starts]) == 0
    ok[: max(earliest, 0)] = False
    return ok


@functools.lru_cache(maxsize=4096)
def _windows(T: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Start and last step of a run from every start: the same few pairs, computed once."""
    starts = np.arange(T)
    return starts, np.minimum(starts + length, T) - 1


def earliest_lowest(busy: np.ndarray, job: BatchJob, earliest: int) -> tuple[int, int] | None:
    """The baselines' rule: the earliest start >= `earliest`, then the lowest aligned block."""
    ok = feasible(busy, job.gpus, run_length(job), earliest)
    rows = ok.any(axis=1)
    if not rows.any():
        return None
    start = int(rows.argmax())
    return start, int(ok[start].argmax()) * job.gpus


def occupy(grid: np.ndarray, busy: np.ndarray, index: int, job: BatchJob, start: int,
           first_gpu: int) -> None:
    end = min(start + run_length(job), grid.shape[0])
    grid[start:end, first_gpu : first_gpu + job.gpus] = index
    busy[start:end, first_gpu : first_gpu + job.gpus] = True
