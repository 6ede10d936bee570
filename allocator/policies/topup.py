"""Realtime topped up from the cells a finished plan leaves free.

Realtime is laid out before (or around) the batch work, on GPUs chosen when the batch
placement is not known yet, and one service may not take another's current GPUs (the
owner may want them at step 0). Once the plan is complete, a service can be short of its
demand at a step where a GPU stays free: another service's current GPU, released later,
or a gap the batch work left. Each such run is taken, within the service's swap limit:
the cells were free, so nothing else moves, and every filled cell of shortfall is worth
`realtime_penalty x priority` (on a Philly replan snapshot, 8 such cells were fast's
whole loss against the proven optimum).

`exchange` goes further: services hand runs of one GPU to each other where the objective
rises. It lifts one-shot plans where services want more GPUs than they can have, but it
trades the tops of forecast peaks, and the rolling replay got worse, so fast makes it
opt-in (`fast(exchange=True)`, BENCHMARKS.md).
"""

from __future__ import annotations

import numpy as np

from allocator import grid as gridlib
from allocator.model import RealtimeJob, Scenario
from allocator.policies.decoder import _packc


def gain_bound(counts: np.ndarray, realtime: np.ndarray, demand: np.ndarray,
               penalty: np.ndarray, surplus: bool = False) -> float:
    """The most `top_up` (with `surplus`, then `exchange(surplus_only=True)` and `top_up`
    again) can add to the objective: at each step, the cells it may take (free ones, and
    with `surplus` the whole GPUs services hold above their demand) priced at the dearest
    short service, and no more than the whole shortfall's price; 0 where no service is
    short at a step with such a cell. `counts`: cells per step and job, FREE in the last
    column, as `gridlib.Scorer.counts` gives them; `penalty` per service."""
    if not len(realtime):
        return 0.0
    if len(realtime) == 1:  # one service: the same terms, with no gathers and no dot
        return _gain_bound_one(counts, int(realtime[0]), demand[:, 0], float(penalty[0]),
                               surplus)
    held = counts[:, realtime]
    short = np.maximum(demand - held, 0)
    dearest = np.where(short > 0, penalty, 0).max(axis=1)
    spare = counts[:, -1].astype(np.float64)
    if surplus:
        spare = spare + np.floor(np.maximum(held - demand, 0)).sum(axis=1)
    return float(np.minimum(short @ penalty, spare * dearest).sum())


def _gain_bound_one(counts: np.ndarray, service: int, demand: np.ndarray, penalty: float,
                    surplus: bool) -> float:
    """`gain_bound` for one service: its column alone (a one-term dot or max is that
    term; 0.0 plus a product is what the dot of one term gives)."""
    held = counts[:, service]
    short = np.maximum(demand - held, 0)
    dearest = np.where(short > 0, penalty, 0.0)
    spare = counts[:, -1].astype(np.float64)
    if surplus:
        spare = spare + np.floor(np.maximum(held - demand, 0))
    return float(np.minimum(0.0 + short * penalty, spare * dearest).sum())


def top_up(scenario: Scenario, grid: np.ndarray, keep_off: np.ndarray | None = None) -> bool:
    """Fill services' shortfall from free cells of `grid` in place, the highest priority
    first, each time the run of one GPU that covers the most short steps and keeps the
    swap limit; True if anything changed. `keep_off`: cells realtime must not take (a
    reservation's block ahead of its start). Compiled where the C extension is built
    (`_packc.top_up`), else `_top_up_py`, its reference."""
    changed = False
    realtime = sorted(((i, j) for i, j in enumerate(scenario.jobs)
                       if isinstance(j, RealtimeJob)), key=lambda ij: -ij[1].priority)
    compiled = _packc is not None and grid.dtype == np.int32 and grid.flags.c_contiguous
    off = np.zeros(grid.shape, dtype=bool) if keep_off is None else \
        np.ascontiguousarray(keep_off, dtype=bool)
    for i, job in realtime:
        if compiled:
            changed |= _packc.top_up(grid, i, np.asarray(job.demand, dtype=np.float64),
                                     _current(job, grid.shape[1]),
                                     job.current_gpus is not None, job.swap_limit, off)
        else:
            changed |= _top_up_py(job, i, grid, off)
    return changed


def _top_up_py(job: RealtimeJob, i: int, grid: np.ndarray, keep_off: np.ndarray) -> bool:
    """One service's top-up in numpy: the reference for the compiled one."""
    demand = np.asarray(job.demand)
    changed = False
    while True:
        free = (grid == gridlib.FREE) & ~keep_off
        mine = grid == i
        short = demand > mine.sum(axis=1)
        if not (short[:, None] & free).any():
            return changed
        run = _best_run(job, mine, free, short)
        if run is None:
            return changed
        gpu, a, b = run
        grid[a:b, gpu] = i
        changed = True


def _best_run(job: RealtimeJob, mine: np.ndarray, free: np.ndarray, short: np.ndarray
              ) -> tuple[int, int, int] | None:
    """(gpu, a, b): the run of one free GPU, from a short step to a short step, that covers
    the most short steps within the swap limit (the lowest such GPU, then the earliest run,
    on a tie); None if none fits.

    Taking the free cells [a, b) of a GPU changes the job's GPU flips at steps a and b
    only, each by +1 or -1 by whether the job holds that GPU at step a - 1 (at b), so the
    start and the end fit independently: in each maximal free interval the best run starts
    at its first short step that fits and ends after its last one that fits."""
    T, G = free.shape
    held_before, flips = holding(job, mine)
    limit = job.swap_limit
    fits_start = flips[:, None] + 1 - 2 * held_before.astype(np.int64) <= limit
    if job.current_gpus is None:
        fits_start[0] = True  # step 0 has no flips to count
    fits_end = np.ones_like(free)  # ending after cell t changes the flips at step t + 1
    fits_end[:-1] = flips[1:, None] + 1 - 2 * mine[1:].astype(np.int64) <= limit
    usable = free & short[:, None]
    starts = (usable & fits_start).T.ravel()  # by GPU, then step: label order is (gpu, a)
    ends = (usable & fits_end).T.ravel()
    cells = free.T
    opens = cells.copy()
    opens[:, 1:] &= ~cells[:, :-1]
    label = np.cumsum(opens.ravel()) - 1  # the maximal free interval of each free cell
    if not starts.any() or not ends.any():
        return None
    step = np.tile(np.arange(T), G)
    first = np.full(int(label[-1]) + 1 if len(label) else 0, T)
    last = np.full_like(first, -1)
    np.minimum.at(first, label[starts], step[starts])
    np.maximum.at(last, label[ends], step[ends] + 1)
    cum = np.concatenate(([0], np.cumsum(short)))
    valid = first < last
    if not valid.any():
        return None
    covered = np.where(valid, cum[np.minimum(last, T)] - cum[np.minimum(first, T)], -1)
    best = int(np.argmax(covered))  # the first of the most: lowest GPU, then earliest run
    gpu = int(np.flatnonzero(opens.ravel())[best]) // T
    return gpu, int(first[best]), int(last[best])


def exchange(scenario: Scenario, grid: np.ndarray, keep_off: np.ndarray | None = None,
             surplus_only: bool = False) -> bool:
    """Move runs of one GPU from one service to another where the objective rises, within
    both swap limits; True if anything moved. `surplus_only`: only cells the giving
    service holds above its demand (it loses nothing the plan promised it).

    Layouts keep each service on its current GPUs, and no service takes another's, so
    when services together want more GPUs than they can have, the one that keeps its GPUs
    is not the one whose shortfall costs most. Handing a run over changes both services'
    flips at its first step and the step after its last one only, so the best run within
    one service's stretch on a GPU is a best sub-array with its ends filtered. `keep_off`:
    cells that stay where they are (a reservation's block)."""
    realtime = [(i, j) for i, j in enumerate(scenario.jobs) if isinstance(j, RealtimeJob)]
    if len(realtime) < 2:
        return False
    price = scenario.weights.realtime_penalty
    if not _may_move(realtime, grid, price, keep_off, surplus_only):
        return False
    changed = False
    for _ in range(grid.size):  # each move raises the objective: a bound, never reached
        move = _best_move(realtime, grid, price, keep_off, surplus_only)
        if move is None:
            return changed
        receiver, gpu, a, b = move
        grid[a:b, gpu] = receiver
        changed = True
    return changed


def _may_move(realtime: list[tuple[int, RealtimeJob]], grid: np.ndarray, price: float,
              keep_off: np.ndarray | None, surplus_only: bool) -> bool:
    """Whether `_best_move` can find anything: some step where one service gains from
    one more GPU more than another, holding a movable cell there, loses by giving it.
    A hand-over earns the sum of that difference over its steps, so without such a step
    none earns more than 0; checked for every pair at once (on most plans no pair
    passes, and the per-pair scans were most of fast's top-up time at 64 GPUs)."""
    held, gain, loss = _hand_over_terms(realtime, grid, price)
    mine = held if keep_off is None else held & ~keep_off[None, :, :]
    movable = np.asarray(mine.any(axis=2))  # (services, T): a cell the giver may hand over
    if surplus_only:
        movable &= loss == 0
    worth = gain[:, None, :] - loss[None, :, :]  # (receiver, giver, T)
    passes = (worth > 0) & movable[None, :, :]
    passes[np.arange(len(realtime)), np.arange(len(realtime))] = False  # not to oneself
    return bool(passes.any())


def _hand_over_terms(realtime: list[tuple[int, RealtimeJob]], grid: np.ndarray, price: float
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per service (in `realtime`'s order): the cells it holds (services, T, G), and per
    step what one more GPU gains it and what one fewer loses it (services, T)."""
    ids = np.array([i for i, _ in realtime])
    held: np.ndarray = grid[None, :, :] == ids[:, None, None]
    count = held.sum(axis=2)
    demand = np.array([j.demand for _, j in realtime], dtype=np.float64)
    weight = price * np.array([j.priority for _, j in realtime], dtype=np.float64)[:, None]
    return held, weight * np.clip(demand - count, 0, 1), weight * np.clip(demand - count + 1,
                                                                          0, 1)


def _current(job: RealtimeJob, gpus: int) -> np.ndarray:
    """Per GPU, whether the job holds it before step 0 (`current_gpus`)."""
    before = np.zeros(gpus, dtype=bool)
    if job.current_gpus:
        before[list(job.current_gpus)] = True
    return before


def holding(job: RealtimeJob, mine: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(held at the step before each cell (current GPUs at step 0), flips per step; step
    0's flips are 0 when the job has no current GPUs to count them against)."""
    held_before = np.vstack([_current(job, mine.shape[1]), mine[:-1]])
    flips = (mine ^ held_before).sum(axis=1)
    if job.current_gpus is None:
        flips[0] = 0
    return held_before, flips


def swaps_hold(scenario: Scenario, grid: np.ndarray) -> bool:
    """Every realtime job within its swap limit at every step (constraint 4)."""
    for i, job in enumerate(scenario.jobs):
        if not isinstance(job, RealtimeJob):
            continue
        # `holding`'s flips, step 0 apart (its flips count only against current GPUs):
        # fewer numpy calls, as fast checks every realtime-last candidate
        mine = grid == i
        if (mine[1:] ^ mine[:-1]).sum(axis=1).max(initial=0) > job.swap_limit:
            return False
        if job.current_gpus is not None and len(mine) and \
                (mine[0] ^ _current(job, mine.shape[1])).sum() > job.swap_limit:
            return False
    return True


def _best_move(realtime: list[tuple[int, RealtimeJob]], grid: np.ndarray, price: float,
               keep_off: np.ndarray | None, surplus_only: bool
               ) -> tuple[int, int, int, int] | None:
    """(receiver, gpu, a, b): the hand-over of one GPU's cells [a, b) from the service
    holding them to another that raises the objective most, within both swap limits."""
    T, _ = grid.shape
    held, gains, losses = _hand_over_terms(realtime, grid, price)
    state = {i: (job, held[r], gains[r], losses[r]) for r, (i, job) in enumerate(realtime)}
    flipped: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # holding(), for pairs scanned
    best: tuple[float, int, int, int, int] | None = None
    for r, _ in realtime:
        rjob, rmine, gain, _ = state[r]
        if not gain.any():
            continue
        for d, _ in realtime:
            if d == r:
                continue
            djob, dmine, _, loss = state[d]
            worth = gain - loss
            movable = dmine if keep_off is None else dmine & ~keep_off
            if surplus_only:  # a stretch ends where the giver would fall short
                movable = movable & (loss == 0)[:, None]
            # A run earns the sum of `worth` over its steps: none beats 0 unless some
            # movable cell has worth > 0 (most pairs, on most plans: skip the scans).
            if not (movable & (worth > 0)[:, None]).any():
                continue
            prefix = np.concatenate(([0.0], np.cumsum(worth)))
            for k, kjob, kmine in ((r, rjob, rmine), (d, djob, dmine)):
                if k not in flipped:
                    flipped[k] = holding(kjob, kmine)
            (rbefore, rflips), (dbefore, dflips) = flipped[r], flipped[d]
            # start a: r takes the GPU at a, d gives it up; end b: the reverse at step b
            start_ok = ((rflips[:, None] + 1 - 2 * rbefore <= rjob.swap_limit)
                        | (rjob.current_gpus is None) & (np.arange(T) == 0)[:, None]) & \
                ((dflips[:, None] + 2 * dbefore - 1 <= djob.swap_limit)
                 | (djob.current_gpus is None) & (np.arange(T) == 0)[:, None])
            end_ok = np.ones_like(dmine)  # ending after cell t: step t + 1's flips
            end_ok[:-1] = (rflips[1:, None] + 1 - 2 * rmine[1:] <= rjob.swap_limit) & \
                (dflips[1:, None] + 2 * dmine[1:] - 1 <= djob.swap_limit)
            for gpu in np.flatnonzero(movable.any(axis=0)).tolist():
                column = movable[:, gpu].tolist()
                low = None  # the lowest prefix at a feasible start in this stretch
                for t in range(T):
                    if not column[t]:
                        low = None
                        continue
                    if start_ok[t, gpu] and (low is None or prefix[t] < low[0]):
                        low = (prefix[t], t)
                    if low is not None and end_ok[t, gpu]:
                        value = prefix[t + 1] - low[0]
                        if value > 1e-9 and (best is None or value > best[0] + 1e-12):
                            best = (value, r, gpu, low[1], t + 1)
    return None if best is None else best[1:]
