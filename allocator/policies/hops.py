"""Realtime hops: a block of a plan's realtime GPUs moved elsewhere for part of the day.

fast's layouts give each realtime layer one GPU for its whole run, and the layout climb
moves whole runs, so a service that sits on the block a large job needs later stays there
all day. The optimum often moves it: on a 12-GPU tuning seed, full keeps both services in
node 0 until step 14, then hands them to the top of the cluster so that an 8-GPU job gets
node 0 (fast, without hops: 91.6% of the optimum).

A hop takes the realtime cells of one aligned block Y over a window that opens at step 0
or closes at the horizon's end ([0, m) or [m, T)) and puts them on a block X of the same
size, each cell onto X's cell of the same step and offset, which must be free (X's other
cells may hold anything: a running job beside the service's landing GPU often does). At
the window's inner edge the service holds both GPUs for one step, so it changes one GPU
at a time (a swap limit of 1 suffices); a hop that still breaks a swap limit is not
taken. The batch work then judges the layout: per round, the hop whose best greedy pass
over the value orders earns most is kept, until a round finds none. The compiled search
(`_packc.hops`) and `_search_py` here (its reference, over the Python decoder) make the
same moves.
"""

from __future__ import annotations

import numpy as np

from allocator import grid as gridlib
from allocator.model import RealtimeJob, Scenario
from allocator.policies.decoder import (
    Decoder,
    Jobs,
    _packc,
    compiled_for,
    order_rows,
)
from allocator.policies.layout_climb import owners
from allocator.policies.topup import swaps_hold

# Blocks of 1, 2 and 4 GPUs hop (a service holds a few GPUs; an 8-GPU block of them is rare).
LARGEST_BLOCK = 4
# The search tries every block pair, window and step: about G^2 x T hops a round, so it
# stays on small clusters.
MAX_GPUS = 16


def compiled(scenario: Scenario) -> bool:
    """Whether the compiled search can run (built, and a horizon of at most 63 steps)."""
    return _packc is not None and compiled_for(scenario, None)


def layout(scenario: Scenario, grid: np.ndarray) -> np.ndarray:
    """`grid`'s running jobs and realtime cells, its queued batch work taken out."""
    out = gridlib.empty(scenario)
    gridlib.pin_running(scenario, out)
    for i, job in enumerate(scenario.jobs):
        if isinstance(job, RealtimeJob):
            out[grid == i] = i
    return out


def search(scenario: Scenario, start: np.ndarray, jobs: Jobs,
           orders: tuple[tuple[int, ...], ...], rounds: int, compiled: bool | None = None,
           stride: int = 1) -> tuple[np.ndarray, int]:
    """The layout `start` (no batch work) after up to `rounds` hops, and how many were kept.

    A layout is worth the best greedy pass of the batch work over `orders` (as
    place_batch starts). `stride`: windows whose inner edge is 1, 1 + stride, ... only
    (the hot path's light round)."""
    cells = np.ascontiguousarray(start, dtype=np.int64).copy()
    orders = tuple(dict.fromkeys(orders))
    if rounds <= 0 or not orders or not orders[0] or not scenario.realtime_jobs:
        return cells, 0
    if _packc is not None and compiled_for(scenario, compiled):
        _, kept = _packc.hops(cells, *_realtime(scenario), jobs.offset, jobs.count,
                              order_rows(orders), jobs.gpus, jobs.length, jobs.arrival,
                              jobs.weight, jobs.decay, LARGEST_BLOCK, rounds, stride, jobs.gap)
        return cells, int(kept)
    return _search_py(scenario, cells, jobs, orders, rounds, stride)


def _realtime(scenario: Scenario) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per job: realtime?, has current GPUs?, swap limit; per GPU: who holds it before 0."""
    n = len(scenario.jobs)
    is_rt = np.zeros(n, dtype=np.uint8)
    has_current = np.zeros(n, dtype=np.uint8)
    limit = np.zeros(n, dtype=np.int64)
    for i, job in enumerate(scenario.jobs):
        if isinstance(job, RealtimeJob):
            is_rt[i], limit[i] = 1, job.swap_limit
            has_current[i] = job.current_gpus is not None
    return is_rt, has_current, limit, owners(scenario)


def moves(G: int, T: int, stride: int = 1) -> list[tuple[int, int, int, int, int]]:
    """Every hop (k, y, x, a, b) in the order the search tries them (windows whose inner
    edge is 1, 1 + stride, ...)."""
    out = []
    k = 1
    while k <= LARGEST_BLOCK and 2 * k <= G:
        for y in range(0, G - k + 1, k):
            for x in range(0, G - k + 1, k):
                if x == y:
                    continue
                for m in range(1, T, stride):
                    out += [(k, y, x, 0, m), (k, y, x, m, T)]
        k *= 2
    return out


def hop(cells: np.ndarray, is_rt: np.ndarray, move: tuple[int, int, int, int, int]
        ) -> np.ndarray | None:
    """`cells` after one hop, or None where it does not apply (nothing of realtime to
    move, or a cell it would land on not free)."""
    k, y, x, a, b = move
    T = cells.shape[0]
    source, target = cells[a:b, y : y + k], cells[a:b, x : x + k]
    moving = (source >= 0) & is_rt[np.maximum(source, 0)].astype(bool)
    if not moving.any() or (moving & (target != gridlib.FREE)).any():
        return None
    out: np.ndarray = cells.copy()
    out[a:b, x : x + k] = np.where(moving, source, target)
    out[a:b, y : y + k] = np.where(moving, gridlib.FREE, source)
    for d in range(k):
        if a == 0 and b < T:  # prefix: the service returns to y at b
            v = cells[b, y + d]
            if v >= 0 and is_rt[v] and out[b - 1, x + d] == v and out[b - 1, y + d] == -1:
                out[b - 1, y + d] = v
        elif a > 0:  # suffix: the service left y for x at a
            v = cells[a - 1, y + d]
            if v >= 0 and is_rt[v] and out[a, x + d] == v and out[a - 1, x + d] == -1:
                out[a - 1, x + d] = v
    return out


def _search_py(scenario: Scenario, cells: np.ndarray, jobs: Jobs,
               orders: tuple[tuple[int, ...], ...], rounds: int, stride: int = 1
               ) -> tuple[np.ndarray, int]:
    """`search`'s loop over the Python decoder: the reference for the compiled one."""
    is_rt = _realtime(scenario)[0]

    def value(grid: np.ndarray) -> float:
        best, _ = Decoder.new(scenario, grid >= 0, None, jobs, compiled=False).best_of(orders)
        return -np.inf if best is None else best.value

    current, kept = cells, 0
    now = value(current)
    all_moves = moves(scenario.G, scenario.T, stride)
    for _ in range(rounds):
        top, best = now, None
        for move in all_moves:
            trial = hop(current, is_rt, move)
            if trial is None:
                continue
            v = value(trial)
            if v > top + 1e-9 and swaps_hold(scenario, trial):
                top, best = v, trial
        if best is None:
            break
        current, now, kept = best, top, kept + 1
    return current, kept
