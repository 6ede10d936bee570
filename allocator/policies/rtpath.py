"""Realtime re-routed around a plan's batch work: each service's layers laid again as paths
through the free cells, handing a GPU over a step at a time, by a shortest-path search.

fast's layers are runs on one GPU each; where batch work takes a service's GPU mid-day the
layer ends and the service is short until a later layer pays its swaps. At swap limit 1 a
move costs two steps (acquire, then release), which no run-by-run layout plans ahead: a
service left short beside free GPUs (replan3 s1433, 65.7% of the optimum). Here the batch
work stays as planned and every service is laid again, layer by layer, each layer the
cheapest path through the cells left free: shortfall first, then changes.
"""

from __future__ import annotations

import numpy as np

from allocator import grid as gridlib
from allocator.model import RealtimeJob, Scenario
from allocator.policies.decoder import _packc
from allocator.policies.topup import swaps_hold

SHORT = 1000.0  # a step short outweighs any number of changes
IDLE = 0.1  # a step held above demand: a surplus GPU is let go where the budget allows


def rerouted(scenario: Scenario, grid: np.ndarray, score: gridlib.Scorer,
             keep_off: np.ndarray | None = None) -> np.ndarray:
    """`grid` with every service laid again around its batch work, in the order of the
    services that fits best (by priority, then the tightest swap limit first), where that
    raises the objective; `keep_off` marks cells realtime may not take (reservations)."""
    realtime = [(i, j) for i, j in enumerate(scenario.jobs) if isinstance(j, RealtimeJob)]
    if not realtime or score.shortfall_cost(grid) <= 0:
        return grid
    best, value = grid, score(grid)
    orders = [sorted(realtime, key=lambda x: (-x[1].priority, x[1].swap_limit, x[0])),
              sorted(realtime, key=lambda x: (x[1].swap_limit, -x[1].priority, x[0]))]
    tried: list[list[int]] = []
    for order in orders:
        indices = [i for i, _ in order]
        if indices in tried:
            continue
        tried.append(indices)
        laid = _laid(scenario, grid, order, keep_off)
        if laid is None or not swaps_hold(scenario, laid):
            continue
        got = score(laid)
        if got > value + 1e-9:
            best, value = laid, got
    return best


def _laid(scenario: Scenario, grid: np.ndarray, order: list[tuple[int, RealtimeJob]],
          keep_off: np.ndarray | None) -> np.ndarray | None:
    """The batch work of `grid` with the services laid in `order`; None where a layer finds
    no legal path."""
    out: np.ndarray = grid.copy()
    services = {i for i, _ in order}
    out[np.isin(out, list(services))] = gridlib.FREE
    waiting = dict(order)
    for i, job in order:
        del waiting[i]
        taken = out != gridlib.FREE
        if keep_off is not None:
            taken |= keep_off
        others = [g for j in waiting.values() for g in (j.current_gpus or ())]
        if others:  # a service still to be laid keeps its current GPUs at step 0
            taken[0, others] = True
        if not _lay_service(out, taken, i, job):
            return None
    return out


def _lay_service(out: np.ndarray, taken: np.ndarray, i: int, job: RealtimeJob) -> bool:
    """Every layer of service `i` laid into `out` (cells `taken` excluded, updated)."""
    T, _ = out.shape
    demand = np.asarray(job.demand[:T], dtype=np.int64)
    budget = np.full(T, job.swap_limit, dtype=np.int64)
    if job.current_gpus is None:
        budget[0] = 1 << 20  # no current GPUs given: step 0 is not checked
    current = list(job.current_gpus or ())
    holding = len(current)
    layers = max(int(demand.max(initial=0)), holding)
    for level in range(1, layers + 1):
        starts = current if level <= holding else []  # each current GPU starts a layer
        path = _layer_path(taken, demand >= level, budget, starts)
        if path is None:
            return False
        cells, used, start = path
        for t, g in cells:
            out[t, g] = i
            taken[t, g] = True
        budget -= used
        if start is not None:
            current.remove(start)
    return True


def _layer_path(taken: np.ndarray, needed: np.ndarray, budget: np.ndarray,
                starts: list[int]) -> tuple[list[tuple[int, int]], np.ndarray, int | None] | None:
    """`layer_path`, in C where the extension is built (`_packc.path`: the same moves,
    costs and ties; a test holds the two to the same paths)."""
    if _packc is None:
        return layer_path(taken, needed, budget, starts)
    T, G = taken.shape
    out = np.empty((4, T), dtype=np.int64)
    start = _packc.path(np.ascontiguousarray(taken, dtype=np.uint8),
                        np.ascontiguousarray(needed, dtype=np.uint8),
                        np.ascontiguousarray(budget, dtype=np.int64),
                        np.asarray(starts, dtype=np.int64), out)
    if start < 0:
        return None
    state, owed, before, used = out
    cells = [(t, int(g)) for t, g in enumerate(state.tolist()) if g < G]
    cells += [(t, int(before[t])) for t in np.flatnonzero(owed).tolist()]
    return cells, used.copy(), (int(start) if starts else None)


def layer_path(taken: np.ndarray, needed: np.ndarray, budget: np.ndarray,
               starts: list[int]) -> tuple[list[tuple[int, int]], np.ndarray, int | None] | None:
    """The cheapest path of one layer through the free cells: (cells held, changes per
    step, the current GPU it starts from), or None where none keeps within `budget`.

    A state is the GPU held (or none, the last state) and whether a release is owed this
    step (a hand-over: the new GPU acquired a step before the old one is let go, both held
    that step). A move costs its changes (a stay none, an acquire or a release one, a
    switch two); each state's best predecessor is one of a few (itself, none, the best or
    second-best GPU), so a step costs O(GPUs).
    """
    T, G = taken.shape
    n = G + 1
    inf = np.inf
    value = np.full((2, n), inf)  # [release owed][state] at step t - 1
    if starts:
        value[0, starts] = 0.0
    else:
        value[0, G] = 0.0
    back = np.zeros((T, 2, n, 2), dtype=np.int64)  # (owed before, state before)
    moved = np.zeros((T, 2, n), dtype=np.int64)  # the move's changes (the owed one apart)
    states = np.arange(n)
    for t in range(T):
        ok = np.ones(n, dtype=bool)
        ok[:G] = ~taken[t]
        new = np.full((2, n), inf)
        for owed in (0, 1):
            row = value[owed]
            room = budget[t] - owed
            if room < 0 or not np.isfinite(row).any():
                continue
            gpus = row[:G]
            first, second = _two_lowest(gpus)
            # (cost, predecessor, changes) per target, for the plain moves
            cost = np.where(ok, row, inf)  # stay (none -> none included)
            pred = states.copy()
            changes = np.zeros(n, dtype=np.int64)
            if room >= 1:
                acquire = np.where(ok, row[G] + 1.0, inf)  # none -> a GPU
                acquire[G] = inf
                take = acquire < cost
                cost, pred, changes = (np.where(take, acquire, cost), np.where(take, G, pred),
                                       np.where(take, 1, changes))
                if G and gpus[first] + 1.0 < cost[G]:  # a GPU -> none
                    cost[G], pred[G], changes[G] = gpus[first] + 1.0, first, 1
            if room >= 2 and G > 1:  # a switch from the best other GPU
                other = np.where(states[:G] == first, second, first)
                switch = np.where(ok[:G] & (other != states[:G]), row[other] + 2.0, inf)
                take = switch < cost[:G]
                cost[:G] = np.where(take, switch, cost[:G])
                pred[:G] = np.where(take, other, pred[:G])
                changes[:G] = np.where(take, 2, changes[:G])
            _keep(new, back, moved, t, 0, cost + owed, pred, changes, owed)
            if room >= 1 and G > 1:  # a hand-over from a GPU still free now
                held = np.where(ok[:G], gpus, inf)
                a, b = _two_lowest(held)
                other = np.where(states[:G] == a, b, a)
                hand = np.full(n, inf)
                hand[:G] = np.where(ok[:G] & (other != states[:G]), held[other] + 1.0, inf)
                hand_pred = np.full(n, G)
                hand_pred[:G] = other
                _keep(new, back, moved, t, 1, hand + owed, hand_pred,
                      np.ones(n, dtype=np.int64), owed)
        short = np.zeros(n)
        short[G] = SHORT if needed[t] else 0.0
        if not needed[t]:
            short[:G] = IDLE
        value = new + short[None, :]
        if not np.isfinite(value).any():
            return None
    owed, state = (int(x) for x in np.unravel_index(int(value.argmin()), value.shape))
    cells: list[tuple[int, int]] = []
    used = np.zeros(T, dtype=np.int64)
    for t in range(T - 1, -1, -1):
        before_owed, before = (int(x) for x in back[t, owed, state])
        if state < G:
            cells.append((t, state))
        if owed:
            cells.append((t, before))  # the GPU handed over, held one more step
        used[t] += moved[t, owed, state] + before_owed
        owed, state = before_owed, before
    return cells, used, (state if starts else None)


def _two_lowest(x: np.ndarray) -> tuple[int, int]:
    """The index of the lowest entry and of the lowest of the others (the first on a tie;
    a one-entry row gives its index twice, an empty one 0, 0)."""
    if len(x) < 2:
        return 0, 0
    first = int(x.argmin())
    rest = x.copy()
    rest[first] = np.inf
    return first, int(rest.argmin())


def _keep(new: np.ndarray, back: np.ndarray, moved: np.ndarray, t: int, owe: int,
          cost: np.ndarray, pred: np.ndarray, changes: np.ndarray, owed: int) -> None:
    """Where `cost` beats the best so far into [owe][state]: keep it and its predecessor."""
    better = cost < new[owe]
    if better.any():
        new[owe] = np.where(better, cost, new[owe])
        back[t, owe, better, 0] = owed
        back[t, owe, better, 1] = pred[better]
        moved[t, owe, better] = changes[better]
