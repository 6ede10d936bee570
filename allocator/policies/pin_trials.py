"""fast's optional pin trials: a delayed job pinned to an earlier block, the rest planned again.

Neither the candidate layouts nor the order moves reach a plan where a service and several
jobs all move so that one delayed job starts earlier (BENCHMARKS.md, "The stacked realtime
layout"). A trial pins such a job, as a reservation, at the earliest start where no running
or reserved job holds an aligned block of its size, and plans the rest again around it:
realtime kept off the block ahead of the start, other batch work there only before it
(allocator/reservations.py). The best grid by objective is kept, the incumbent on a tie.
A reservation only adds constraints, so a trial's grid is legal for the scenario itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from allocator import grid as gridlib
from allocator import reservations
from allocator.model import BatchJob, Reservation, Scenario


def spots(scenario: Scenario, grid: np.ndarray) -> list[Reservation]:
    """Earlier blocks for the delayed or left-out queued jobs, the largest gain first.

    Per job and aligned block, the earliest start from the job's arrival, before its start
    in `grid`, where no running or reserved job holds the block for the job's run (inside
    the horizon); ranked by priority times the steps gained. Blocks of a held reservation
    are skipped (its promise forbids other work there past its start).
    """
    T, G = scenario.T, scenario.G
    reserved = {r.id for r in scenario.reservations}
    fixed = np.zeros(grid.shape, dtype=bool)
    for i, job in enumerate(scenario.jobs):
        if isinstance(job, BatchJob) and (job.running or job.id in reserved):
            fixed |= grid == i
    kept = np.zeros(G, dtype=bool)
    for r in scenario.reservations:
        kept[r.first_gpu:r.first_gpu + r.gpus] = True
    ranked: list[tuple[float, int, Reservation]] = []
    for i, job in enumerate(scenario.jobs):
        if not isinstance(job, BatchJob) or job.running or job.id in reserved:
            continue
        steps = np.flatnonzero((grid == i).any(axis=1))
        start = int(steps[0]) if len(steps) else T
        if start <= job.arrival_step:
            continue  # already at its earliest start
        for first in range(0, G - job.gpus + 1, job.gpus):
            if kept[first:first + job.gpus].any():
                continue
            cols: np.ndarray = np.asarray(fixed[:, first:first + job.gpus].any(axis=1))
            for s in range(job.arrival_step, start):
                if not cols[s:s + job.duration_steps].any():
                    ranked.append((job.priority * (start - s), -i,
                                   Reservation(job.id, s, first, job.gpus)))
                    break
    ranked.sort(key=lambda x: (-x[0], -x[1], x[2].start, x[2].first_gpu))
    return [r for _, _, r in ranked]


def pin_trials(scenario: Scenario, grid: np.ndarray,
               plan: Callable[[Scenario], np.ndarray], trials: int) -> np.ndarray:
    """The best of `grid` and up to `trials` replans, each with one more job pinned
    (`spots`, in order, where the pin is a sound reservation: `reservations.problems`);
    `plan` is the policy without trials."""
    best, value = grid, gridlib.objective(scenario, grid)
    tried = 0
    for spot in spots(scenario, grid):
        if tried >= trials:
            break
        pinned = (*scenario.reservations, spot)
        if reservations.problems(scenario, pinned):
            continue  # e.g. realtime cannot move off the block's GPUs by then
        tried += 1
        trial = plan(replace(scenario, reservations=pinned))
        got = gridlib.objective(scenario, trial)
        if got > value + 1e-9:
            best, value = trial, got
    return best
