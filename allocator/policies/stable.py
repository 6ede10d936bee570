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

from collections.abc import Callable, Mapping

import numpy as np

from allocator import grid as gridlib
from allocator import reservations
from allocator.model import BatchJob, Scenario
from allocator.policies.realtime import place_realtime

# job id -> (start step in this scenario, first GPU) the previous plan gave it
Anchors = Mapping[str, tuple[int, int]]
# (grid, jobs already written into it) -> the grid with the rest of the batch work placed
PlaceRest = Callable[[np.ndarray, frozenset[int], tuple[int, ...] | None], np.ndarray]

# The relative objective gain a fresh plan needs to replace the stable one (chosen on the
# seed-11 starvation worlds: docs/starvation.md, "Start estimates that hold").
STABILITY = 0.01


def keep(scenario: Scenario, fresh: np.ndarray, base: np.ndarray, anchors: Anchors,
         stability: float, held: reservations.Holds, place_rest: PlaceRest) -> np.ndarray:
    """`fresh`, unless a stable candidate is within `stability` of its objective.

    `base`: running jobs and reserved runs pinned, realtime kept off reserved blocks, no
    realtime placed yet. A negative `stability` turns the term off (`fresh` always wins).
    """
    if stability < 0 or not anchors:
        return fresh
    stable = [candidate(scenario, base, anchors, held, place_rest, tails, mark)
              for tails in ((False, True) if scenario.realtime_jobs else (False,))
              for mark in ((True, False) if scenario.realtime_jobs else (False,))]
    if FILTER:
        short = shortfall(scenario, fresh)
        stable = [g for g in stable if shortfall(scenario, g) <= short]  # never less realtime
    grids = [fresh, *stable]
    scores = [gridlib.objective(scenario, g) for g in grids]
    if PENALTY:
        ids = {job.id: i for i, job in enumerate(scenario.jobs)}
        spots = {ids[k]: v[0] for k, v in anchors.items() if k in ids}
        per_job = stability * abs(scores[0]) / max(1, len(spots))
        scores = [v - per_job * moved(scenario, g, spots) for v, g in zip(scores, grids)]
        return grids[int(np.argmax(scores))]
    k = 1 + int(np.argmax(scores[1:])) if stable else 0
    if scores[0] > scores[k] + stability * abs(scores[k]):
        return fresh
    return grids[k]


PENALTY = True


def moved(scenario: Scenario, grid: np.ndarray, spots: dict[int, int]) -> int:
    """Anchored queued jobs the grid starts more than a step away from their anchor (or
    leaves out)."""
    out = 0
    for i, start in spots.items():
        job = scenario.jobs[i]
        if not isinstance(job, BatchJob) or job.running or not 0 <= start < scenario.T:
            continue
        rows = np.flatnonzero((grid == i).any(axis=1))
        out += not len(rows) or abs(int(rows[0]) - start) > 1
    return out


def shortfall(scenario: Scenario, grid: np.ndarray) -> int:
    """GPU-steps of realtime forecast demand the plan leaves unserved."""
    out = 0
    for i, job in enumerate(scenario.jobs):
        if not isinstance(job, BatchJob):
            have = (grid == i).sum(axis=1)
            out += int(np.maximum(np.asarray(job.demand[: scenario.T]) - have, 0).sum())
    return out


def candidate(scenario: Scenario, base: np.ndarray, anchors: Anchors,
              held: reservations.Holds, place_rest: PlaceRest,
              tail_first: bool = False, mark: bool = True) -> np.ndarray:
    """The previous starts kept where they still fit, realtime placed around them, the rest
    placed after.

    Realtime is placed with the kept blocks marked off (as a reserved block is), so it
    moves around them where it can; it keeps a GPU it holds now if it cannot pay the swap,
    and a job whose block it kept is placed afresh. A block is marked only while every
    step it covers keeps enough free GPUs for realtime's forecast demand.
    """
    T = scenario.T
    busy = base >= 0 if held.batch_busy is None else (base >= 0) | held.batch_busy
    need = np.zeros(T, dtype=np.int64)
    for rt in scenario.realtime_jobs:
        need += np.asarray(rt.demand[:T], dtype=np.int64)
    if HELD:
        plain = base.copy()
        place_realtime(scenario, plain, tail_first=tail_first)
        rt_codes = [i for i, j in enumerate(scenario.jobs) if not isinstance(j, BatchJob)]
        need = np.maximum(need, np.isin(plain, rt_codes).sum(axis=1))
    spare = (base == gridlib.FREE).sum(axis=1) - need
    marks = np.zeros_like(busy)
    chosen: dict[int, tuple[int, int, int]] = {}  # job index -> (start, end, first GPU)
    wanted = _wanted(scenario, anchors, held)
    # Twice: each job on its own block first, so that no job's fallback takes another's.
    for fallback in (False, True):
        for start, i, first in wanted:
            job = scenario.batch_job_at(i)
            end = min(start + job.duration_steps, T)
            if i in chosen or (spare[start:end] < job.gpus).any():
                continue
            blocks = _blocks(first, job.gpus, scenario.G)
            for f in blocks[1:] if fallback else blocks[:1]:
                cells = (slice(start, end), slice(f, f + job.gpus))
                if f >= 0 and not (busy[cells].any() or marks[cells].any()):
                    marks[cells] = True
                    spare[start:end] -= job.gpus
                    chosen[i] = (start, end, f)
                    break
    grid = base.copy()
    if mark:
        grid[marks & (grid == gridlib.FREE)] = reservations.OFF
    place_realtime(scenario, grid, tail_first=tail_first)
    grid[grid == reservations.OFF] = gridlib.FREE
    kept: dict[int, tuple[int, int, int]] = {}
    for i, (start, end, f) in chosen.items():
        cells = (slice(start, end), slice(f, f + scenario.batch_job_at(i).gpus))
        if (grid[cells] == gridlib.FREE).all():
            grid[cells] = i
            kept[i] = (start, end, f)
    if MODE == "order":
        grid[np.isin(grid, list(kept))] = gridlib.FREE
        return place_rest(grid, frozenset(), stable_order(scenario, anchors, held))
    if PULL:
        _pull_forward(scenario, grid, kept, held)
    return place_rest(grid, frozenset(kept), None)


PULL = False
MODE = "order"
MARK = True
FILTER = True
HELD = True
PRIO = True


def stable_order(scenario: Scenario, anchors: Anchors, held: reservations.Holds
                 ) -> tuple[int, ...]:
    """Queued, unreserved batch jobs: by priority, then previous start (new jobs last)."""
    queued = [i for i, job in enumerate(scenario.jobs)
              if isinstance(job, BatchJob) and not job.running and i not in held.reserved]
    def key(i: int) -> tuple[float, ...]:
        job = scenario.batch_job_at(i)
        spot = anchors.get(job.id)
        after = float(scenario.T if spot is None else spot[0])
        return (-job.priority if PRIO else 0.0, after, float(spot is None),
                -job.priority, -job.gpus * job.duration_steps, float(i))
    return tuple(sorted(queued, key=key))


def _pull_forward(scenario: Scenario, grid: np.ndarray, kept: dict[int, tuple[int, int, int]],
                  held: reservations.Holds) -> None:
    """Each kept job, by start, moves to its earliest free start on any aligned block when
    that is earlier than the kept one (a job that ended early left a hole)."""
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
            col = free[:, b : b + job.gpus].all(axis=1)
            for s in range(max(0, job.arrival_step), best[0]):
                e = min(s + job.duration_steps, T)
                if col[s:e].all():
                    best = (s, b)
                    break
        s, b = best
        e = min(s + job.duration_steps, T)
        grid[s:e, b : b + job.gpus] = i


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
    """The previous block (none if it is no longer an aligned block), then every other
    aligned one."""
    head = [first] if first % gpus == 0 and first + gpus <= G else [-1]
    return head + [f for f in range(0, G - gpus + 1, gpus) if f != first]


def anchors_from(scenario: Scenario, grid: np.ndarray, shift: int = 0
                 ) -> dict[str, tuple[int, int]]:
    """The queued jobs' spots in a plan, as anchors for a plan `shift` steps later."""
    return {scenario.jobs[i].id: (p.start - shift, p.first_gpu)
            for i, p in gridlib.placements(scenario, grid, queued_only=True).items()}
