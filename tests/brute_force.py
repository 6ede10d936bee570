"""Slow, obviously correct optima for tiny scenarios: the yardstick `fast` must never beat.

`brute_force` (G <= 4, T <= 4, a few jobs): every batch placement is enumerated
(not placed, or any start >= arrival on any aligned block; running jobs pinned);
for each, every way of handing each step's free GPUs to the realtime jobs is
enumerated, linked step to step under the swap limits (a Viterbi pass: the
realtime term is a sum over steps and the swap limit ties only neighbouring
steps, so keeping the best path into each assignment loses nothing). Every
finished candidate grid is scored by the validator's `compute_metrics`.

`every_grid_optimum` (at most 6 cells, 2 jobs) is dumber still: every grid of
job ids, kept when the validator finds no violation. The two cross-check each other.
"""

from __future__ import annotations

import itertools

from allocator.model import BatchJob, RealtimeJob, Scenario
from allocator.validator import compute_metrics, violations

Grid = list[list[str | None]]


def _mask(gpus: tuple[int, ...] | set[int]) -> int:
    return sum(1 << g for g in gpus)


def _batch_options(scenario: Scenario, job: BatchJob) -> list[tuple[int, int] | None]:
    """Every legal (start, first_gpu) for one batch job, or None for "not placed"."""
    if job.running:
        return [(0, job.running.first_gpu)]
    k = job.gpus
    return [None] + [(s, b) for s in range(job.arrival_step, scenario.T)
                     for b in range(0, scenario.G - k + 1, k)]


def _place(grid: Grid, job: BatchJob, start: int, first: int) -> bool:
    """Write the job's run into `grid`; False if any cell is already taken."""
    length = job.running.remaining_steps if job.running else job.duration_steps
    for t in range(start, min(start + length, len(grid))):
        for g in range(first, first + job.gpus):
            if grid[t][g] is not None:
                return False
            grid[t][g] = job.id
    return True


def _realtime_fill(scenario: Scenario, grid: Grid) -> Grid | None:
    """The best legal realtime cells on top of a batch grid (None if there are none)."""
    rts = [j for j in scenario.jobs if isinstance(j, RealtimeJob)]
    if not rts:
        return grid
    G = scenario.G
    penalty = scenario.weights.realtime_penalty

    def assignments(t: int) -> list[tuple[int, ...]]:
        free = [g for g in range(G) if grid[t][g] is None]
        out = []
        for owners in itertools.product(range(len(rts) + 1), repeat=len(free)):
            masks = [0] * len(rts)
            for g, owner in zip(free, owners, strict=True):
                if owner:
                    masks[owner - 1] |= 1 << g
            out.append(tuple(masks))
        return out

    def cost(t: int, masks: tuple[int, ...]) -> float:
        return penalty * sum(job.priority * max(0, job.demand[t] - m.bit_count())
                             for job, m in zip(rts, masks, strict=True))

    def swaps_ok(before: tuple[int | None, ...], now: tuple[int, ...]) -> bool:
        return all(b is None or (b ^ n).bit_count() <= job.swap_limit
                   for job, b, n in zip(rts, before, now, strict=True))

    current = tuple(_mask(j.current_gpus) if j.current_gpus is not None else None for j in rts)
    layers: list[dict[tuple[int, ...], tuple[float, tuple[int, ...] | None]]] = []
    layer = {a: (cost(0, a), None) for a in assignments(0) if swaps_ok(current, a)}
    layers.append(layer)
    for t in range(1, scenario.T):
        previous = layers[-1]
        layer = {}
        for a in assignments(t):
            options = [(c, p) for p, (c, _) in previous.items() if swaps_ok(p, a)]
            if options:
                best_cost, best_prev = min(options, key=lambda o: o[0])
                layer[a] = (best_cost + cost(t, a), best_prev)
        layers.append(layer)
    if not layers[-1]:
        return None
    a = min(layers[-1], key=lambda k: layers[-1][k][0])
    filled = [row[:] for row in grid]
    for t in range(scenario.T - 1, -1, -1):
        for job, m in zip(rts, a, strict=True):
            for g in range(G):
                if m >> g & 1:
                    filled[t][g] = job.id
        back = layers[t][a][1]
        if back is not None:
            a = back
    return filled


def brute_force(scenario: Scenario) -> tuple[float, Grid]:
    """The optimum objective and one grid that reaches it."""
    batch = [j for j in scenario.jobs if isinstance(j, BatchJob)]
    best: tuple[float, Grid] | None = None
    for choice in itertools.product(*(_batch_options(scenario, j) for j in batch)):
        grid: Grid = [[None] * scenario.G for _ in range(scenario.T)]
        if not all(spot is None or _place(grid, job, *spot)
                   for job, spot in zip(batch, choice, strict=True)):
            continue
        filled = _realtime_fill(scenario, grid)
        if filled is None:
            continue
        value = compute_metrics(scenario, filled).objective
        if best is None or value > best[0]:
            best = (value, filled)
    assert best is not None, "the empty plan (realtime keeping its GPUs) is always legal"
    return best


def every_grid_optimum(scenario: Scenario) -> tuple[float, Grid]:
    """The optimum over literally every grid of job ids that the validator accepts."""
    ids: list[str | None] = [None, *(j.id for j in scenario.jobs)]
    T, G = scenario.T, scenario.G
    best: tuple[float, Grid] | None = None
    for cells in itertools.product(ids, repeat=T * G):
        grid = [list(cells[t * G : (t + 1) * G]) for t in range(T)]
        if violations(scenario, grid):
            continue
        value = compute_metrics(scenario, grid).objective
        if best is None or value > best[0]:
            best = (value, grid)
    assert best is not None
    return best
