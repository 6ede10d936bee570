"""fast's realtime layout climb: one layer's run at a time moved to another GPU, kept when
the batch work placed around it (one greedy pass) earns more.

Where fast loses most against full's plans is the realtime layout, not the batch order
(benchmarks/loss_anatomy.py: on the tuning seeds, fast's own batch placement on full's
realtime layout closes most of the gap). The layouts fast builds place each layer by a
local rule; the climb lets the batch work judge them. A run moves whole, to a GPU free for
all of its steps: every step keeps as many GPUs per service, and a step's swaps can only
fall (a run that lands beside another of its service's merges with it), so each move is
legal by construction. Runs held at step 0 by a service with current GPUs stay (moving
them would add a swap there).
"""

from __future__ import annotations

import numpy as np

from allocator import grid as gridlib
from allocator.model import RealtimeJob, Scenario
from allocator.policies.decoder import Decoder, Jobs, Orders, _CDecoder, _packc


def movable_runs(scenario: Scenario, layout: np.ndarray, step_zero_stays: bool = True
                 ) -> np.ndarray:
    """(R, 4) int64 rows (start, end, gpu, job) of the realtime runs the climb may move,
    the longest first (then by GPU and start): long runs shape the free blocks most.
    `step_zero_stays`: a run held at step 0 by a service with current GPUs is left out
    (moving it is a swap); False: every run (the re-cuts keep starts where they are).

    One scan of each GPU's column in plain Python: the climb runs up to 16 GPUs, where
    the numpy version's calls (a mask per service, diffs, argwhere) cost several times
    the scan. A GPU holds one job per step, so (gpu, start) tells runs apart and the sort
    is total."""
    if (_packc is not None and layout.dtype == np.int32 and layout.ndim == 2
            and layout.shape[1] > 0):  # the same rows from one C scan
        kind = np.zeros(len(scenario.jobs), dtype=np.int8)
        for i, job in enumerate(scenario.jobs):
            if isinstance(job, RealtimeJob):
                kind[i] = 2 if step_zero_stays and job.current_gpus is not None else 1
        out = np.empty((layout.size, 4), dtype=np.int64)
        found = _packc.runs(np.ascontiguousarray(layout), kind, out)
        return out[:found]
    return _movable_runs_py(scenario, layout, step_zero_stays)


def _movable_runs_py(scenario: Scenario, layout: np.ndarray, step_zero_stays: bool = True
                     ) -> np.ndarray:
    """`movable_runs` in plain Python: the reference for the compiled scan."""
    # per service: whether it has current GPUs (its runs held at step 0 stay: moving one
    # is a swap)
    pinned = {i: step_zero_stays and job.current_gpus is not None
              for i, job in enumerate(scenario.jobs) if isinstance(job, RealtimeJob)}
    runs: list[tuple[int, int, int, int]] = []
    for g, column in enumerate(layout.T.tolist()):
        held: int | None = None  # what the GPU holds since step `since`
        since = 0
        for t, cell in enumerate([*column, None]):  # None: past the end, closes a run
            if cell != held:
                if held is not None and held in pinned and not (since == 0 and pinned[held]):
                    runs.append((since, t, g, held))
                held, since = cell, t
    runs.sort(key=lambda run: (run[0] - run[1], run[2], run[0]))
    return np.array(runs, dtype=np.int64).reshape(len(runs), 4)


def owners(scenario: Scenario) -> np.ndarray:
    """Per GPU, the realtime job it is a current GPU of (-1: none): nobody else takes it."""
    owner = np.full(scenario.G, -1, dtype=np.int64)
    for i, job in enumerate(scenario.jobs):
        if isinstance(job, RealtimeJob) and job.current_gpus:
            owner[list(job.current_gpus)] = i
    return owner


def best_order(empty: Decoder, orders: tuple[tuple[int, ...], ...]) -> tuple[int, ...]:
    """The order whose greedy pass from `empty` earns most (the first on a tie). Value
    orders (`Orders`) are passed once each, as their rows laid out for the plan: a
    repeated order earns what its first copy did, so the same order wins."""
    if isinstance(orders, Orders):
        _, won = empty.best_of(orders.distinct, orders.rows)
        return orders.distinct[won] if won >= 0 else ()
    _, won = empty.best_of(orders)
    return orders[won] if won >= 0 else ()


def climb(scenario: Scenario, layout: np.ndarray, jobs: Jobs,
          orders: tuple[tuple[int, ...], ...], passes: int,
          compiled: bool | None = None) -> np.ndarray:
    """`layout` (running jobs and realtime placed, no batch work) with realtime runs moved
    while a greedy pass earns more, up to `passes` passes: a new grid. The pass follows
    the one of `orders` that earns most on `layout` itself.

    First improvement, runs in `movable_runs` order, GPUs lowest first; the scan starts
    again after each move kept. The compiled decoder runs the same loop in C.
    """
    runs = movable_runs(scenario, layout)
    if not len(runs) or not orders or passes <= 0:
        same: np.ndarray = layout.copy()
        return same
    owner = owners(scenario)
    empty = Decoder.new(scenario, layout >= 0, None, jobs, compiled)
    order = best_order(empty, orders)
    if isinstance(empty, _CDecoder) and _packc is not None:
        moved = runs.copy()
        _packc.climb(empty.words, empty.offset, empty.count,
                     np.asarray(order, dtype=np.int64), jobs.gpus, jobs.length, jobs.arrival,
                     jobs.weight, jobs.decay, moved, owner, passes, jobs.gap)
    else:
        moved = _climb_py(scenario, layout, jobs, order, runs, owner, passes)
    out: np.ndarray = layout.copy()
    for (a, b, g, _), (_, _, y, _) in zip(runs.tolist(), moved.tolist(), strict=True):
        if y != g:  # every moved run's old cells first: a later run may land on them
            out[a:b, g] = gridlib.FREE
    for a, b, g, i in moved.tolist():
        out[a:b, g] = i
    return out


def _climb_py(scenario: Scenario, layout: np.ndarray, jobs: Jobs, order: tuple[int, ...],
              runs: np.ndarray, owner: np.ndarray, passes: int) -> np.ndarray:
    """`climb`'s loop over the Python decoder: the reference for the compiled one."""
    busy = layout >= 0
    moved: np.ndarray = runs.copy()

    def value() -> float:
        state = Decoder.new(scenario, busy, None, jobs, compiled=False)
        state.pack(order)
        return state.value

    best, spent, improved = value(), 0, True
    while improved and spent < passes:
        improved = False
        for r in range(len(moved)):
            a, b, g, job = moved[r].tolist()
            for y in range(scenario.G):
                if spent >= passes:
                    break
                if y == g or busy[a:b, y].any() or owner[y] not in (-1, job):
                    continue
                busy[a:b, g], busy[a:b, y] = False, True
                spent += 1
                got = value()
                if got > best + 1e-9:
                    best, moved[r, 2], improved = got, y, True
                    break
                busy[a:b, y], busy[a:b, g] = False, True
            if improved or spent >= passes:
                break
    return moved
