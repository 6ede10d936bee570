"""fast's last step: clear an aligned block for a delayed batch job by moving what is in it.

fast places realtime layers once and never moves a held GPU, and places batch jobs in
one order; the optimum often moves a service's layer to another GPU (within its swap
limit) to open an earlier aligned block for a long job, and re-places the rest around
it. This step tries exactly that on fast's best grid: for a batch job that starts late
(or not at all), an earlier window on an aligned block holding some realtime cells and
no running or reserved job; the realtime cells migrate to free GPUs outside the block
(with a one-step handover where the swap limit needs it), the job is pinned on the
window and every other queued batch job is placed again by fast.place_batch (its value
orders and a bounded order search). The trial is kept if the objective rises.

Legal by construction: a realtime job keeps at least as many GPUs every step, and each
migration is checked against its swap limit before it is kept; the pinned job takes a
window left free; running and reserved jobs never move, realtime stays off reserved
blocks, and place_batch keeps the reservations' rules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from allocator import grid as gridlib
from allocator import reservations
from allocator.model import RealtimeJob, Scenario
from allocator.policies.decoder import Jobs

# Per plan: trials (a window cleared, the batch work placed again, the objective compared),
# windows screened (realtime moved out or found immovable: cheap), windows per delayed job,
# and GPUs tried per realtime piece. Chosen on the tuning seeds of benchmarks/bench_quality.py
# for cost as much as gain: 6 trials and 12 screens gain 0.07 points more at 1.5x the time.
TRIALS = 2
SCREENS = 4
WINDOWS = 1
MIGRATE_TO = 4
# A job whose delay loses less than this share of the objective is not worth a trial.
MIN_LOSS = 0.02
# Below this many queued jobs the step is skipped: there fast's whole plan must stay under
# a millisecond (the 8 GPU / 10 job latency target) and one trial costs about 0.15 ms; on
# the tuning seeds it gained nothing there.
MIN_QUEUE = 10

Placer = Callable[..., np.ndarray]  # fast.place_batch


def clear_blocks(scenario: Scenario, grid: np.ndarray, jobs: Jobs,
                 held: reservations.Holds, search: int, place: Placer) -> np.ndarray:
    """`grid` (fast's best) improved by first-improvement block clearing; a new array.

    A trial keeps the realtime, running and reserved cells, migrates the realtime cells
    out of one delayed job's window, pins the job there and re-places every other batch
    job with `place` (fast.place_batch, its order search bounded by `search`).
    """
    n = len(scenario.jobs)
    is_rt = np.zeros(n + 1, dtype=bool)  # index n: FREE (the grid's -1 maps to it)
    movable = np.zeros(n + 1, dtype=bool)
    for i, job in enumerate(scenario.jobs):
        if isinstance(job, RealtimeJob):
            is_rt[i] = True
        elif not job.running and i not in held.reserved:
            movable[i] = True
    if not is_rt.any() or movable.sum() < MIN_QUEUE:
        return grid
    trials, screens = TRIALS, SCREENS
    objective = gridlib.Scorer(scenario)
    best, value = grid, objective(grid)
    tried: set[tuple[int, int, int]] = set()
    while trials > 0:
        improved = False
        least = MIN_LOSS * abs(value)
        for j, windows in _candidates(best, jobs, is_rt, movable, held, tried, least):
            for s, blk in windows:
                tried.add((j, s, blk))
                screens -= 1
                layout = _clear(scenario, best, jobs, j, s, blk, movable, held)
                if layout is not None:
                    trials -= 1
                    trial = place(scenario, layout, None, search, held=held, jobs=jobs,
                                  pinned=frozenset((j,)))
                    score = objective(trial)
                    if score > value + 1e-9:
                        best, value, improved = trial, score, True
                        break
                if trials <= 0 or screens <= 0:
                    break
            if improved or trials <= 0 or screens <= 0:
                break
        if not improved:
            break
    return best


def _candidates(grid: np.ndarray, jobs: Jobs, is_rt: np.ndarray, movable: np.ndarray,
                held: reservations.Holds, tried: set[tuple[int, int, int]], least: float
                ) -> Iterator[tuple[int, list[tuple[int, int]]]]:
    """Delayed jobs, the most value lost first, each with its earliest clearable windows.

    A window is clearable when no running or reserved job is in it and some realtime cell
    is (else the decoder could have taken it); fewest realtime cells first.
    """
    T, G = grid.shape
    n = len(movable) - 1
    start = _starts(grid, n)
    decay, length, arrival, gpus = jobs.decay, jobs.length, jobs.arrival, jobs.gpus
    lost = []
    for i in np.flatnonzero(movable[:n]).tolist():
        a = int(arrival[i])
        if a >= T or start[i] == a or gpus[i] > G:
            continue
        ideal = jobs.weight[i] * (decay[min(a + length[i], T)] - decay[a])
        s = int(start[i])
        have = 0.0 if s < 0 else jobs.weight[i] * (decay[min(s + length[i], T)] - decay[s])
        if ideal - have >= least:
            lost.append((-(ideal - have), i))
    lost.sort()
    code = np.where(grid < 0, n, grid)
    rt_cells = is_rt[code]
    blocked = ~(rt_cells | movable[code] | (code == n))
    if held.batch_busy is not None:
        blocked |= held.batch_busy
    pb, pr = _prefix(blocked.astype(np.int64)), _prefix(rt_cells.astype(np.int64))
    for _, j in lost:
        g, a = int(gpus[j]), int(arrival[j])
        stop = T if start[j] < 0 else int(start[j])
        steps = np.arange(a, stop)
        ends = np.minimum(steps + length[j], T)
        blocks = np.arange(0, G - g + 1, g)
        nb = _window_sums(pb, steps, ends, blocks, g)
        nr = _window_sums(pr, steps, ends, blocks, g)
        si, bi = np.nonzero((nb == 0) & (nr > 0) & (nr < (ends - steps)[:, None] * g))
        windows = []
        for k in np.lexsort((nr[si, bi], si)).tolist():
            spot = (int(steps[si[k]]), int(blocks[bi[k]]))
            if (j, *spot) not in tried:
                windows.append(spot)
            if len(windows) >= WINDOWS:
                break
        if windows:
            yield j, windows


def _starts(grid: np.ndarray, n: int) -> np.ndarray:
    """Per job: the first step it holds a GPU (-1: absent)."""
    start = np.full(n, -1)
    flat = grid.ravel()
    at = np.argsort(flat, kind="stable")  # np.unique's work, without its overhead
    ids = flat[at]
    first_of = np.concatenate(([True], ids[1:] != ids[:-1]))
    ids, at = ids[first_of], at[first_of]
    keep = ids >= 0
    start[ids[keep]] = at[keep] // grid.shape[1]
    return start


def _clear(scenario: Scenario, grid: np.ndarray, jobs: Jobs, j: int, s: int, blk: int,
           movable: np.ndarray, held: reservations.Holds) -> np.ndarray | None:
    """The grid without its queued batch work, realtime moved out of [s, e) x [blk,
    blk + g) and job j there; None if a realtime piece finds no legal GPU."""
    T = grid.shape[0]
    g = int(jobs.gpus[j])
    e = min(s + int(jobs.length[j]), T)
    new: np.ndarray = grid.copy()
    new[movable[np.where(new < 0, len(movable) - 1, new)]] = gridlib.FREE
    window = new[s:e, blk : blk + g]
    for r in sorted(set(window[window >= 0].tolist())):
        for col in range(blk, blk + g):
            steps = np.flatnonzero(new[s:e, col] == r)
            if not len(steps):
                continue
            for piece in np.split(steps, np.flatnonzero(np.diff(steps) > 1) + 1):
                if not _migrate(scenario, new, r, col, s + int(piece[0]),
                                s + int(piece[-1]) + 1, blk, g, held):
                    return None
    new[s:e, blk : blk + g] = j
    return new


def _prefix(mask: np.ndarray) -> np.ndarray:
    out = np.zeros((mask.shape[0] + 1, mask.shape[1] + 1), dtype=np.int64)
    out[1:, 1:] = mask.cumsum(axis=0).cumsum(axis=1)
    return out


def _window_sums(p: np.ndarray, steps: np.ndarray, ends: np.ndarray, blocks: np.ndarray,
                 g: int) -> np.ndarray:
    """Sum over [s, e) x [b, b + g) for every start (rows) and block (columns)."""
    s, e = steps[:, None], ends[:, None]
    lo, hi = blocks[None, :], blocks[None, :] + g
    sums: np.ndarray = p[e, hi] - p[s, hi] - p[e, lo] + p[s, lo]
    return sums


def _migrate(scenario: Scenario, grid: np.ndarray, r: int, col: int, p: int, q: int,
             blk: int, g: int, held: reservations.Holds) -> bool:
    """Move realtime job r's hold of GPU `col` over [p, q) to a free GPU outside the block,
    in place; variants with a one-step handover or staying on the new GPU past q. False
    (grid untouched) when none keeps the swap limit."""
    T, G = grid.shape
    job = scenario.jobs[r]
    assert isinstance(job, RealtimeJob)
    free = grid == gridlib.FREE
    if held.realtime_off is not None:
        free &= ~held.realtime_off
    run_end = q
    while run_end < T and grid[run_end, col] == r:
        run_end += 1
    before = p > 0 and grid[p - 1, col] == r
    after = q < T and grid[q, col] == r
    outside = np.ones(G, dtype=bool)
    outside[blk : blk + g] = False
    candidates = np.flatnonzero(outside & free[p:q].all(axis=0)).tolist()
    # GPUs the job already holds next to the piece first: the move then costs no change.
    candidates.sort(key=lambda c: (-int(p > 0 and grid[p - 1, c] == r)
                                   - int(q < T and grid[q, c] == r), -c))
    for c in candidates[:MIGRATE_TO]:
        stay = after and bool(free[q:run_end, c].all())
        early = before and bool(free[p - 1, c])
        late = after and bool(free[q, c])
        variants = [(0, 0), (0, run_end - q) if stay else None,  # stay on c to the run's end
                    (1, 0) if early else None,  # a one-step handover before p
                    (1, run_end - q) if early and stay else None,
                    (0, -1) if late else None,  # a one-step handover after q
                    (1, -1) if early and late else None]
        for variant in variants:
            if variant is None:
                continue
            head, tail = variant
            lo, hi = p - head, q + max(tail, 0) + (tail < 0)
            saved = grid[lo:hi, [col, c]].copy()
            grid[p : q + max(tail, 0), col] = gridlib.FREE
            grid[lo:hi, c] = r
            if _swaps_ok(job, grid, r, lo, hi):
                return True
            grid[lo:hi, [col, c]] = saved
    return False


def _swaps_ok(job: RealtimeJob, grid: np.ndarray, r: int, lo: int, hi: int) -> bool:
    """Constraint 4 for realtime job r at the steps a change to rows [lo, hi) can move:
    lo .. hi (each step against the one before; step 0 against its current GPUs)."""
    first = max(lo - 1, 0)
    held = grid[first : min(hi + 1, grid.shape[0])] == r
    if ((held[1:] ^ held[:-1]).sum(axis=1) > job.swap_limit).any():
        return False
    if first == 0 and job.current_gpus is not None:
        now = np.zeros(grid.shape[1], dtype=bool)
        now[list(job.current_gpus)] = True
        if (held[0] ^ now).sum() > job.swap_limit:
            return False
    return True
