"""Keep a job's previously planned start unless moving it gains enough: fast, replanned.

In a rolling replan (pipelines/simulate.py) fast re-optimises the whole queue every time,
so a queued job's start moves from plan to plan even when nothing about it changed, and
the start a user was first told does not hold. Given `anchors`, the start (and first GPU)
the previous plan gave each queued job, fast also builds *stable* candidates:

1. every anchored job keeps its previous start: on its previous block if that is still
   free for its whole run, else on another free aligned block at that step (all jobs'
   own blocks first, so that no job's fallback takes another's). A block is kept only
   while every step it covers leaves realtime as many free GPUs as its forecast (or the
   plain layout) holds;
2. realtime is placed around the kept blocks, marked off as a reserved block is (and,
   as a second candidate, not marked: realtime where it would go, a kept block it takes
   is given up); a job whose block realtime still took is placed afresh;
3. a kept job moves earlier where a hole opened before it (a job ended early);
4. the rest (new jobs, and those not kept) are placed around them by fast's own value
   orders and order search.

Each candidate, fresh or stable, is scored by its objective less `stability` x |the fresh
objective| x the share of anchored jobs it starts more than a step from their anchor (or
leaves out): moving every anchored job must gain more than `stability` (relative), one
job of n a n-th of it. Every candidate is built from free cells only, so it is legal.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from allocator import grid as gridlib
from allocator import reservations
from allocator.model import BatchJob, Scenario
from allocator.policies.realtime import place_realtime

# job id -> (start step in this scenario, first GPU) the previous plan gave it
Anchors = Mapping[str, tuple[int, int]]
# (grid, batch jobs already written into it) -> the grid with the other batch jobs placed
PlaceRest = Callable[[np.ndarray, frozenset[int]], np.ndarray]

# What moving every anchored job must gain, relative to the objective (docs/starvation.md,
# "Start estimates that hold": no value of it made first estimates hold better).
STABILITY = 0.01


def keep_starts(scenario: Scenario, fresh: np.ndarray, base: np.ndarray, anchors: Anchors,
         stability: float, held: reservations.Holds, place_rest: PlaceRest) -> np.ndarray:
    """The best of `fresh` and the stable candidates, each less its moves' penalty.

    `base`: running jobs and reserved runs pinned, realtime kept off reserved blocks, no
    realtime placed yet. A negative `stability` turns the term off (`fresh` is returned).
    """
    if stability < 0 or not anchors:
        return fresh
    variants = [(tails, mark) for tails in (False, True) for mark in (True, False)] \
        if scenario.realtime_jobs else [(False, False)]
    grids = [fresh, *(candidate(scenario, base, anchors, held, place_rest, tails, mark)
                      for tails, mark in variants)]
    score = gridlib.Scorer(scenario)
    scores = [score(g) for g in grids]
    index = {job.id: i for i, job in enumerate(scenario.jobs)}
    spots = {index[k]: v[0] for k, v in anchors.items()
             if k in index and index[k] not in held.reserved}
    per_job = stability * abs(scores[0]) / max(1, len(spots))
    scores = [v - per_job * moved(scenario, g, spots) for v, g in zip(scores, grids, strict=True)]
    return grids[int(np.argmax(scores))]  # ties keep fresh


def moved(scenario: Scenario, grid: np.ndarray, spots: Mapping[int, int]) -> int:
    """Queued jobs the grid starts more than a step from their anchor start, or leaves out
    (anchors outside the horizon or before its start are not counted)."""
    out = 0
    for i, start in spots.items():
        job = scenario.jobs[i]
        if not isinstance(job, BatchJob) or job.running or not 0 <= start < scenario.T:
            continue
        rows = np.flatnonzero((grid == i).any(axis=1))
        out += not len(rows) or abs(int(rows[0]) - start) > 1
    return out


def candidate(scenario: Scenario, base: np.ndarray, anchors: Anchors,
              held: reservations.Holds, place_rest: PlaceRest,
              tail_first: bool = False, mark: bool = True) -> np.ndarray:
    """Steps 1-4 of the module's docstring on `base`; `tail_first` is fast's realtime
    layout variant, `mark` whether realtime is kept off the kept blocks."""
    T = scenario.T
    plain = base.copy()
    place_realtime(scenario, plain, tail_first=tail_first)
    realtime = [i for i, job in enumerate(scenario.jobs) if not isinstance(job, BatchJob)]
    need = np.isin(plain, realtime).sum(axis=1)
    forecast = np.zeros(T, dtype=np.int64)
    for service in scenario.realtime_jobs:
        forecast += np.asarray(service.demand[:T], dtype=np.int64)
    spare = (base == gridlib.FREE).sum(axis=1) - np.maximum(need, forecast)
    busy = base >= 0 if held.batch_busy is None else (base >= 0) | held.batch_busy
    taken = np.zeros_like(busy)
    chosen: dict[int, tuple[int, int, int]] = {}  # job index -> (start, end, first GPU)
    wanted = _wanted(scenario, anchors, held)
    for fallback in (False, True):
        for start, i, first in wanted:
            job = scenario.batch_job_at(i)
            end = min(start + job.duration_steps, T)
            if i in chosen or (spare[start:end] < job.gpus).any():
                continue
            blocks = _blocks(first, job.gpus, scenario.G)
            for f in blocks[1:] if fallback else blocks[:1]:
                cells = (slice(start, end), slice(f, f + job.gpus))
                if f >= 0 and not (busy[cells].any() or taken[cells].any()):
                    taken[cells] = True
                    spare[start:end] -= job.gpus
                    chosen[i] = (start, end, f)
                    break
    if mark:
        grid = base.copy()
        grid[taken & (grid == gridlib.FREE)] = reservations.OFF
        place_realtime(scenario, grid, tail_first=tail_first)
        grid[grid == reservations.OFF] = gridlib.FREE
    else:
        grid = plain
        grid[grid == reservations.OFF] = gridlib.FREE
    kept: dict[int, tuple[int, int, int]] = {}
    for i, (start, end, f) in chosen.items():
        cells = (slice(start, end), slice(f, f + scenario.batch_job_at(i).gpus))
        if (grid[cells] == gridlib.FREE).all():
            grid[cells] = i
            kept[i] = (start, end, f)
    _pull_forward(scenario, grid, kept, held)
    return place_rest(grid, frozenset(kept))


def _pull_forward(scenario: Scenario, grid: np.ndarray, kept: dict[int, tuple[int, int, int]],
                  held: reservations.Holds) -> None:
    """Each kept job, by start, moves to its earliest free start on any aligned block when
    that is earlier than the kept one; it only takes free cells, so no other job moves."""
    T, G = scenario.T, scenario.G
    for i, (start, end, f) in sorted(kept.items(), key=lambda kv: kv[1]):
        if start == 0:
            continue
        job = scenario.batch_job_at(i)
        grid[start:end, f : f + job.gpus] = gridlib.FREE
        free = grid == gridlib.FREE
        if held.batch_busy is not None:
            free &= ~held.batch_busy
        best = (start, f)
        for b in range(0, G - job.gpus + 1, job.gpus):
            column = free[:, b : b + job.gpus].all(axis=1)
            for s in range(max(0, job.arrival_step), best[0]):
                if column[s : min(s + job.duration_steps, T)].all():
                    best = (s, b)
                    break
        s, b = best
        grid[s : min(s + job.duration_steps, T), b : b + job.gpus] = i


def _wanted(scenario: Scenario, anchors: Anchors, held: reservations.Holds
            ) -> list[tuple[int, int, int]]:
    """(start, job index, previous first GPU) of each queued, unreserved job whose anchor
    is inside the horizon and not before its arrival, by start."""
    out = []
    for i, job in enumerate(scenario.jobs):
        if not isinstance(job, BatchJob) or job.running or i in held.reserved:
            continue
        spot = anchors.get(job.id)
        if spot is not None and max(0, job.arrival_step) <= spot[0] < scenario.T:
            out.append((spot[0], i, spot[1]))
    return sorted(out)


def _blocks(first: int, gpus: int, G: int) -> list[int]:
    """The previous block (-1 if it is no longer an aligned block), then every other
    aligned one."""
    head = first if first % gpus == 0 and first + gpus <= G else -1
    return [head, *(f for f in range(0, G - gpus + 1, gpus) if f != first)]


def anchors_from(scenario: Scenario, grid: np.ndarray, shift: int = 0
                 ) -> dict[str, tuple[int, int]]:
    """The queued jobs' spots in a plan, as anchors for a plan `shift` steps later."""
    return {scenario.jobs[i].id: (p.start - shift, p.first_gpu)
            for i, p in gridlib.placements(scenario, grid, queued_only=True).items()}
