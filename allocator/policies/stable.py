"""Keep a job's previously planned start unless moving it gains enough: fast, replanned.

In a rolling replan (pipelines/simulate.py, `gpuplan plan-day --previous-plan`) fast
re-optimises the whole queue every time, so a queued job's start moves from plan to plan
even when nothing about it changed, and the start a user was first told does not hold.
Given `anchors`, the start (and first GPU) the previous plan gave each queued job, fast
also builds a *stable* candidate on each of its complete realtime layouts:

1. every anchored job, in order of its previous start, goes back to its previous start:
   on its previous block if that is still free for its whole run, else on the first free
   aligned block at that step; a job whose start cannot be kept is left to step 2;
2. the rest (new jobs, and those step 1 could not keep) are placed around them by fast's
   own value orders and order search.

The stable candidate is kept unless the best fresh candidate's objective beats it by more
than `stability` (relative). Both are built from free cells only, so the grid stays legal.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from allocator import grid as gridlib
from allocator import reservations
from allocator.model import BatchJob, Scenario

# job id -> (start step in this scenario, first GPU) the previous plan gave it
Anchors = Mapping[str, tuple[int, int]]
# (grid, jobs already written into it) -> the grid with the rest of the batch work placed
PlaceRest = Callable[[np.ndarray, frozenset[int]], np.ndarray]

# The relative objective gain a fresh plan needs to replace the stable one (chosen on the
# seed-11 starvation worlds: docs/starvation.md, "Start estimates that hold").
STABILITY = 0.01


def keep(scenario: Scenario, fresh: np.ndarray, layouts: Sequence[np.ndarray],
         anchors: Anchors, stability: float, held: reservations.Holds,
         place_rest: PlaceRest) -> np.ndarray:
    """`fresh`, unless a stable candidate is within `stability` of its objective.

    A negative `stability` turns the term off (the fresh grid always wins).
    """
    if stability < 0 or not anchors:
        return fresh
    stable = [candidate(scenario, layout, anchors, held, place_rest) for layout in layouts]
    scores = [gridlib.objective(scenario, g) for g in stable]
    k = int(np.argmax(scores))
    if gridlib.objective(scenario, fresh) > scores[k] + stability * abs(scores[k]):
        return fresh
    return stable[k]


def candidate(scenario: Scenario, layout: np.ndarray, anchors: Anchors,
              held: reservations.Holds, place_rest: PlaceRest) -> np.ndarray:
    """The previous starts kept where their cells are free, the rest placed around them."""
    T, G = scenario.T, scenario.G
    grid = layout.copy()
    busy = grid >= 0 if held.batch_busy is None else (grid >= 0) | held.batch_busy
    wanted: list[tuple[int, int, int]] = []  # (start, job index, previous first GPU)
    for i, job in enumerate(scenario.jobs):
        if not isinstance(job, BatchJob) or job.running or i in held.reserved:
            continue
        spot = anchors.get(job.id)
        if spot is not None and max(0, job.arrival_step) <= spot[0] < T:
            wanted.append((spot[0], i, spot[1]))
    kept: set[int] = set()
    for start, i, first in sorted(wanted):
        job = scenario.batch_job_at(i)
        end = min(start + job.duration_steps, T)
        blocks = [first] if first % job.gpus == 0 and first + job.gpus <= G else []
        blocks += [f for f in range(0, G - job.gpus + 1, job.gpus) if f != first]
        for f in blocks:
            cells = (slice(start, end), slice(f, f + job.gpus))
            if not busy[cells].any():
                grid[cells] = i
                busy[cells] = True
                kept.add(i)
                break
    return place_rest(grid, frozenset(kept))


def anchors_from(scenario: Scenario, grid: np.ndarray, shift: int = 0
                 ) -> dict[str, tuple[int, int]]:
    """The queued jobs' spots in a plan, as anchors for a plan `shift` steps later."""
    return {scenario.jobs[i].id: (p.start - shift, p.first_gpu)
            for i, p in gridlib.placements(scenario, grid, queued_only=True).items()}
