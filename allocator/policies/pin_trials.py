"""fast's optional trials: a delayed job pinned to an earlier block, or a started job held
back a step, the rest planned again.

Neither the candidate layouts nor the order moves reach a plan where a service and several
jobs all move so that one delayed job starts earlier (BENCHMARKS.md, "Pin trials"). A
trial pins such a job, as a reservation, at a start where no running or reserved job
holds an aligned block of its size (the one that pays most once the services' shortfall
beside the block is charged), and plans the rest again around it: realtime kept off the
block from the start to the run's end, other batch work there only before it
(allocator/reservations.py). The best grid by objective is kept,
the incumbent on a tie. A reservation only adds constraints, so a trial's grid is legal
for the scenario itself.

Defer trials are the other direction. The greedy decoder starts every job at its
earliest feasible start, and the optimum often does not: a large job started early
strands cells that long small jobs would fill, or takes the block a better job needs. A
defer trial moves one started job's earliest start a step past the start the plan gave
it, and plans again. A later arrival only adds constraints too.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import replace

import numpy as np

from allocator import grid as gridlib
from allocator import reservations
from allocator.core.errors import InputError
from allocator.model import BatchJob, Reservation, Scenario

# Whether a trial's pin has realtime leave the block ahead of the start as a promise does
# (`reservations.realtime_off_from`): the lead is kept for the next plans' sake, and a
# trial's pin is not kept past its plan. Without it a service stays on the block until the
# run starts (replan3 s1597: the pin full's optimum makes, 13 steps in, reaches it: 598
# against 469; with the lead -663).
LEAD = False
# Which start a job's spot takes: "earliest", or "net", the best of its reward less the
# realtime demand its block would leave short (`_net_of_start`).
SPOT = "net"


def spots(scenario: Scenario, grid: np.ndarray) -> list[Reservation]:
    """An earlier block for each delayed or left-out queued job, the largest gain first.

    Per job, among the starts from its arrival, before its start in `grid`, at which an
    aligned block (the lowest) is held by no running or reserved job for the job's run
    (inside the horizon): the earliest, or with SPOT "net" where services run the one
    whose run pays most once the demand its block leaves short is charged (the earliest
    of those); ranked by priority times the steps gained. One spot per job
    (on the tuning seeds more blocks per job spent the trials on one job, for less), and
    blocks of a held reservation skipped (its promise forbids other work there past its
    start). Every job is looked up in one (jobs x steps) table over every size's blocks
    at once: a cheap trial uses only the first spot, and small numpy calls per job, then
    per size, cost as much as the trial's replan at 64 GPUs.
    """
    T, G = scenario.T, scenario.G
    reserved = {r.id for r in scenario.reservations}
    batch = [(i, job) for i, job in enumerate(scenario.jobs) if isinstance(job, BatchJob)]
    first = first_steps(grid, len(scenario.jobs))
    delayed = [(i, job) for i, job in batch  # queued jobs not at their earliest start
               if not (job.running or job.id in reserved) and first[i] > job.arrival_step]
    if not delayed:
        return []
    is_fixed = np.zeros(len(scenario.jobs) + 1, dtype=bool)  # the last entry: no job
    is_fixed[[i for i, job in batch if job.running or job.id in reserved]] = True
    fixed = is_fixed[np.where(grid >= 0, grid, len(scenario.jobs))]
    kept = np.zeros(G, dtype=bool)
    for r in scenario.reservations:
        kept[r.first_gpu:r.first_gpu + r.gpus] = True
    sizes = sorted({job.gpus for _, job in delayed})
    free, offsets = _free_from(fixed, kept, sizes)
    longest = np.full((len(sizes), T), -1, dtype=np.int64)  # per size and step
    for s, (lo, hi) in enumerate(itertools.pairwise(offsets)):
        if hi > lo:
            longest[s] = free[:T, lo:hi].max(axis=1)
    size = np.array([sizes.index(job.gpus) for _, job in delayed])
    steps = np.arange(T)
    ends = np.minimum(steps[None, :] + np.array([job.duration_steps for _, job in delayed]
                                                )[:, None], T)
    fits = ((steps >= np.array([job.arrival_step for _, job in delayed])[:, None])
            & (steps < first[[i for i, _ in delayed]][:, None])
            & (longest[size] >= ends))  # some block of its size free for the run from there
    found = np.flatnonzero(fits.any(axis=1))
    begin = fits[found].argmax(axis=1)  # the earliest start, then its lowest block
    if SPOT == "net" and scenario.realtime_jobs:
        net = np.where(fits[found], _net_of_start(scenario, fixed, [delayed[r][1] for r in found],
                                                  ends[found]), -np.inf)
        begin = (net >= net.max(axis=1, keepdims=True) - 1e-9).argmax(axis=1)  # the first
        # of the best starts (a tie within rounding goes to the earlier)
    end = ends[found, begin]
    column = np.arange(offsets[-1])
    own = ((column >= np.array(offsets[:-1])[size[found], None])
           & (column < np.array(offsets[1:])[size[found], None]))  # its size's blocks
    block = ((free[begin] >= end[:, None]) & own).argmax(axis=1) \
        - np.array(offsets[:-1])[size[found]]
    ranked: list[tuple[float, int, Reservation]] = []
    for row, s, b in zip(found.tolist(), begin.tolist(), block.tolist(), strict=True):
        i, job = delayed[row]
        ranked.append((job.priority * (int(first[i]) - s), -i,
                       Reservation(job.id, s, b * job.gpus, job.gpus, lead=LEAD)))
    ranked.sort(key=lambda x: (-x[0], -x[1], x[2].start, x[2].first_gpu))
    return [r for _, _, r in ranked]


def _net_of_start(scenario: Scenario, fixed: np.ndarray, jobs: list[BatchJob],
                  ends: np.ndarray) -> np.ndarray:
    """Per job (rows) and start (columns): the run's reward from there less the realtime
    penalty of the demand that does not fit beside its block while it runs (the GPUs no
    running or reserved job holds, less the block), charged at the cheapest service's
    rate. A cheap estimate: the other batch work and the swap limits are left out."""
    T, G = fixed.shape
    w = scenario.weights
    cumulative = np.concatenate(([0.0], np.cumsum(w.decay ** np.arange(T))))
    steps = np.arange(T)
    rate = np.array([j.priority * j.gpus for j in jobs], dtype=float)[:, None]
    reward = rate * (cumulative[ends] - cumulative[steps][None, :])
    demand = np.sum([np.asarray(rt.demand[:T], dtype=np.int64)
                     for rt in scenario.realtime_jobs], axis=0)
    room = G - fixed.sum(axis=1)  # per step, before the block
    cheapest = w.realtime_penalty * min(rt.priority for rt in scenario.realtime_jobs)
    short = np.empty((len(jobs), T + 1))
    short[:, 0] = 0.0
    sizes = np.array([j.gpus for j in jobs])[:, None]
    short[:, 1:] = np.cumsum(np.maximum(0, demand[None, :] - (room[None, :] - sizes)), axis=1)
    penalty = cheapest * (short[np.arange(len(jobs))[:, None], ends] - short[:, :T])
    net: np.ndarray = reward - penalty
    return net


def free_until(fixed: np.ndarray, kept: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per aligned block of `k` GPUs: from each step (T + 1 rows), the step it stays free
    until (T where it stays free to the end), held by no `fixed` cell and no `kept`
    (promised) GPU; and per step (T rows) the longest of them. A run of steps [a, b) fits
    a block iff its entry at `a` is >= b: one lookup per start, where window sums cost a
    row of blocks each."""
    free, _ = _free_from(fixed, kept, [k])
    return free, free[:-1].max(axis=1, initial=-1)


def _free_from(fixed: np.ndarray, kept: np.ndarray, sizes: list[int]
               ) -> tuple[np.ndarray, list[int]]:
    """`free_until`'s table for every size in `sizes` at once: the blocks of size
    sizes[s] are columns offsets[s] to offsets[s + 1]."""
    T, G = fixed.shape
    busy, offsets = [], [0]
    for k in sizes:
        blocks = G // k
        promised = kept[:blocks * k].reshape(blocks, k).any(axis=1)
        busy.append(fixed[:, :blocks * k].reshape(T, blocks, k).any(axis=2) | promised)
        offsets.append(offsets[-1] + blocks)
    free = np.full((T + 1, offsets[-1]), T, dtype=np.int64)
    # the first busy step at or after each step: a running minimum from the end (one
    # numpy pass; a loop over the steps was a tenth of fast's time at 64 GPUs)
    busy_at = np.where(np.hstack(busy), np.arange(T)[:, None], T)
    free[:T] = np.minimum.accumulate(busy_at[::-1], axis=0)[::-1]
    return free, offsets


def first_steps(grid: np.ndarray, jobs: int) -> np.ndarray:
    """Per job index, the first step `grid` runs it (T where it never runs): one pass over
    the grid into a (steps x jobs) table of who runs when, not one pass per job (a
    thousand jobs on 1024 GPUs made that a tenth of fast's time) nor a sort of the cells."""
    T, _ = grid.shape
    runs = np.zeros((T, jobs + 1), dtype=bool)  # the last column: free cells
    runs[np.arange(T)[:, None], np.where(grid >= 0, grid, jobs)] = True
    runs[:, jobs] = False
    seen: np.ndarray = np.asarray(runs.any(axis=0))
    first: np.ndarray = np.where(seen, runs.argmax(axis=0), T).astype(np.int64)
    return first[:jobs]


# Trials per round: each round tries up to this many pins (`spots` of the best grid so far,
# in order), keeps the one that lifted the plan most, and the next round pins more jobs
# around it. On the tuning seeds two rounds of 12 beat one of 24 (tuning 99.24 -> 99.40%
# of the optimum, tuning2 98.76 -> 98.79%) and rounds of 6 did worse (BENCHMARKS.md).
ROUND = 12


def pin_trials(scenario: Scenario, grid: np.ndarray,
               plan: Callable[[Scenario], np.ndarray], trials: int,
               score: gridlib.Scorer | None = None) -> np.ndarray:
    """The best of `grid` and up to `trials` replans, each with one more job pinned
    (`spots`, in order, where the pin is a sound reservation: `reservations.problems`),
    in rounds of `ROUND`, each round's best pin kept for the next; `plan` is the policy
    without trials, `score` the scenario's scorer where the caller has one."""
    def pins(here: Scenario, best: np.ndarray) -> Iterator[Scenario]:
        for spot in spots(here, best):
            pinned = (*here.reservations, spot)
            if not reservations.problems(scenario, pinned):  # e.g. realtime cannot move
                yield replace(here, reservations=pinned)  # off the block's GPUs by then

    return _in_rounds(scenario, grid, plan, trials, pins, score)


def _in_rounds(scenario: Scenario, grid: np.ndarray, plan: Callable[[Scenario], np.ndarray],
               trials: int, moves: Callable[[Scenario, np.ndarray], Iterator[Scenario]],
               score: gridlib.Scorer | None = None) -> np.ndarray:
    """The best of `grid` and up to `trials` replans of the scenarios `moves` makes from
    the kept scenario and the best grid so far, up to `ROUND` per round; each round's best
    scenario is kept for the next, and the rounds stop when one lifts nothing. A move is
    fetched only when the round has room for it (making one can cost a check)."""
    score = gridlib.Scorer(scenario) if score is None else score
    best, value = grid, score(grid)
    here = scenario  # grows by the best move of each round that lifted the plan
    tried = 0
    while tried < trials:
        round_best = None
        done = 0
        offered = moves(here, best)
        while done < ROUND and tried < trials:
            moved = next(offered, None)
            if moved is None:
                break
            tried += 1
            done += 1
            try:
                trial = plan(moved)
            except InputError:
                continue  # e.g. no legal plan vacates a reserved block by then
            got = score(trial)
            if got > value + 1e-9:
                best, value, round_best = trial, got, moved
        if round_best is None:
            break
        here = round_best
    return best


def defers(scenario: Scenario, grid: np.ndarray) -> list[tuple[int, int]]:
    """(job index, new earliest start) per queued job `grid` starts inside the horizon: one
    step past that start; the jobs holding the most cells first (their start shapes the
    most room), then the lower index."""
    reserved = {r.id for r in scenario.reservations}
    first = first_steps(grid, len(scenario.jobs))
    cells = np.bincount(grid[grid >= 0], minlength=len(scenario.jobs))
    ranked: list[tuple[int, int, int]] = []
    for i, job in enumerate(scenario.jobs):
        if not isinstance(job, BatchJob) or job.running or job.id in reserved:
            continue
        if first[i] + 1 >= scenario.T:
            continue  # never starts, or at the last step: no later start inside the horizon
        ranked.append((-int(cells[i]), i, int(first[i]) + 1))
    ranked.sort()
    return [(i, at) for _, i, at in ranked]


def deferred(scenario: Scenario, i: int, at: int) -> Scenario:
    """`scenario` with job `i` arriving at step `at`."""
    jobs = list(scenario.jobs)
    job = jobs[i]
    assert isinstance(job, BatchJob)
    jobs[i] = replace(job, arrival_step=at)
    return replace(scenario, jobs=tuple(jobs))


def defer_trials(scenario: Scenario, grid: np.ndarray,
                 plan: Callable[[Scenario], np.ndarray], trials: int) -> np.ndarray:
    """The best of `grid` and up to `trials` replans, each with one more started job's
    earliest start a step past its start (`defers`, in order), in rounds of `ROUND`, each
    round's best deferral kept for the next; `plan` is the policy without trials."""
    def later(here: Scenario, best: np.ndarray) -> Iterator[Scenario]:
        return (deferred(here, i, at) for i, at in defers(here, best))

    return _in_rounds(scenario, grid, plan, trials, later)
