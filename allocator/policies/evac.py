"""Block evacuation: every realtime cell of an aligned block moved off it from a step on.

A hop (hops.py) moves one block's realtime cells onto one other block, and is kept only
if it pays alone, so a layout where a large job needs a block that two services (or two
runs of one) must leave together is out of its reach. An evacuation clears an aligned
block B of 4 or 8 GPUs over a window [t, T) or [0, t): each realtime run in B there moves,
on its own, onto a GPU outside B free for its span (`RULES`: by default the lowest
numbered). A run crossing the window's edge hands its GPU over: the service holds both
GPUs for one step, and a service's second and later hand-overs are staggered a step
apart (two where its swap limit is 1), so it changes one GPU at a time. A move that
still breaks a swap limit is not taken. As with hops, the best greedy pass of the batch work
over the value orders judges a layout, and a round keeps the evacuation that earns most.
The search runs in C (`_packc.evacuate`, rule "low"); the Python one is its reference
and runs the other rules.
"""

from __future__ import annotations

import numpy as np

from allocator import grid as gridlib
from allocator.model import Scenario, largest_queued
from allocator.policies.decoder import (
    Decoder,
    Jobs,
    _CDecoder,
    _packc,
    compiled_for,
    order_rows,
)
from allocator.policies.hops import _realtime
from allocator.policies.realtime import preference
from allocator.policies.topup import swaps_hold

# Blocks of 4 and 8 GPUs are cleared: what the queue's large jobs need (a 2-GPU block is
# one hop's reach already).
SIZES = (4, 8)
# Where a moved run lands: "low", the lowest-numbered free GPU outside the block (the
# services then gather where large jobs are not yet running); "top", the one the realtime
# layouts prefer (realtime.preference); "cost", the one whose taking breaks batch blocks
# least (realtime's block cost). Each rule is one more pass over the moves. On the tuning
# seeds with plan-day's trials, "low" alone lifted the same plans as all three (tuning2
# s1048 96.17 -> 98.63%), at a third of the time.
RULES: tuple[str, ...] = ("low",)

Move = tuple[int, int, int, bool]  # (size, first GPU, t, suffix)


def moves(G: int, T: int) -> list[Move]:
    """Every evacuation (k, first, t, suffix) in the order the search tries them:
    suffix clears [t, T), else [0, t)."""
    return [(k, first, t, suffix) for k in SIZES if k <= G
            for first in range(0, G - k + 1, k) for t in range(1, T)
            for suffix in (True, False)]


def _runs(column: np.ndarray, is_rt: np.ndarray) -> list[tuple[int, int, int]]:
    """The realtime runs (start, end, job) of one GPU's column."""
    out = []
    t, T = 0, len(column)
    while t < T:
        v = int(column[t])
        if v >= 0 and is_rt[v]:
            s = t
            while t < T and column[t] == v:
                t += 1
            out.append((s, t, v))
        else:
            t += 1
    return out


class Evacuation:
    """A layout's evacuations: the fixed inputs built once, a move applied by `apply`."""

    def __init__(self, scenario: Scenario, jobs: Jobs) -> None:
        self.scenario = scenario
        is_rt, _, limit, owner = _realtime(scenario)
        self.is_rt, self.limit, self.owner = is_rt.astype(bool), limit, owner
        self.largest = largest_queued(scenario)
        self.rank = preference(scenario.G, self.largest)
        self.jobs = jobs

    def apply(self, cells: np.ndarray, move: Move, rule: str) -> np.ndarray | None:
        """`cells` with block `move`'s realtime runs moved off it by `rule`, or None where
        the move does not apply (nothing to move, or a run with nowhere to go)."""
        k, first, t, suffix = move
        T = cells.shape[0]
        pending = []
        for g in range(first, first + k):
            for s, e, v in _runs(cells[:, g], self.is_rt):
                if (e > t) if suffix else (s < t):
                    pending.append((s - e, g, s, e, v))
        if not pending:
            return None
        pending.sort()  # the longest first, then by GPU
        out = cells.copy()
        handed: dict[int, int] = {}
        for _, g, s, e, v in pending:
            gap = 1 if self.limit[v] >= 2 else 2
            j = handed.get(v, 0)
            if suffix:
                edge = t - gap * j  # the service releases g here, after a step on both
                if s >= edge:
                    span, freed = (s, e), (s, e)
                else:
                    if edge - 1 < s or edge < 1:
                        return None
                    span, freed = (edge - 1, e), (edge, e)
                    handed[v] = j + 1
            else:
                edge = t + gap * j  # the service is back on g here, still on the other
                if e <= edge:
                    span, freed = (s, e), (s, e)
                else:
                    if edge >= T:
                        return None
                    span, freed = (s, edge + 1), (s, edge)
                    handed[v] = j + 1
            target = self._target(out, v, first, k, *span, rule)
            if target is None:
                return None
            out[freed[0]:freed[1], g] = gridlib.FREE
            out[span[0]:span[1], target] = v
        moved: np.ndarray = out
        return moved

    def _target(self, cells: np.ndarray, v: int, first: int, k: int, a: int, b: int,
                rule: str) -> int | None:
        """The GPU outside [first, first + k) free over [a, b) that `rule` picks."""
        free = cells[a:b] == gridlib.FREE
        mine = (self.owner == -1) | (self.owner == v)
        mine[first:first + k] = False
        ok = np.flatnonzero(mine & free.all(axis=0))
        if not len(ok):
            return None
        if rule == "low":
            return int(ok[0])
        if rule == "top":
            return int(ok[np.argmax(self.rank[ok])])
        if _packc is not None:
            got = _packc.choose(cells == gridlib.FREE, mine, self.rank, a, b, self.largest,
                                False)
            return None if got is None or got[1] != a else int(got[0])
        from allocator.policies.realtime import _choose_py
        got = _choose_py(cells == gridlib.FREE, mine, self.rank, a, b, self.largest)
        return None if got is None or got[1] != a else int(got[0])

    def value(self, cells: np.ndarray, orders: tuple[tuple[int, ...], ...],
              compiled: bool | None) -> float:
        """The best greedy pass of the batch work over `orders` on `cells`."""
        empty = Decoder.new(self.scenario, cells >= 0, None, self.jobs, compiled)
        if isinstance(empty, _CDecoder) and _packc is not None and empty.bound < 0:
            j = self.jobs
            got, _ = _packc.best_of(
                empty.words, empty.offset, empty.count, empty.spare,
                np.array(orders, dtype=np.int64).reshape(len(orders), -1), j.gpus,
                j.length, j.arrival, j.weight, j.decay, empty.start.copy(),
                empty.first.copy(), empty.best_fit, -1, empty.spill, None, None, j.gap)
            return float(got)
        best, _ = empty.best_of(orders)
        return -np.inf if best is None else best.value


def search(scenario: Scenario, cells: np.ndarray, jobs: Jobs,
           orders: tuple[tuple[int, ...], ...], compiled: bool | None = None,
           rules: tuple[str, ...] | None = None) -> np.ndarray | None:
    """The layout `cells` (running and realtime, no batch work) after the evacuation whose
    best greedy pass earns most, if one earns more than `cells` and keeps every swap
    limit; else None. `rules`: where moved runs land (None: `RULES`); "low" runs in C, the
    others in Python, and the best of all their moves wins (the compiled one on a tie)."""
    rules = RULES if rules is None else rules
    orders = tuple(dict.fromkeys(orders))
    if not orders or not orders[0] or not scenario.realtime_jobs:
        return None
    low, floor = None, -np.inf
    if _packc is not None and compiled_for(scenario, compiled) and "low" in rules:
        moved = np.ascontiguousarray(cells, dtype=np.int64).copy()
        value, found = _packc.evacuate(moved, *_realtime(scenario), jobs.offset, jobs.count,
                                       order_rows(orders), jobs.gpus, jobs.length,
                                       jobs.arrival, jobs.weight, jobs.decay,
                                       np.array(SIZES, dtype=np.int64), jobs.gap)
        low, floor = (moved, value) if found else (None, floor)
        rules = tuple(r for r in rules if r != "low")
        if not rules:
            return low
    other = _search_py(scenario, cells, jobs, orders, compiled, rules=rules, floor=floor)
    return low if other is None else other


def _search_py(scenario: Scenario, cells: np.ndarray, jobs: Jobs,
               orders: tuple[tuple[int, ...], ...], compiled: bool | None,
               rules: tuple[str, ...] | None = None, floor: float = -np.inf
               ) -> np.ndarray | None:
    """`search` in Python (each layout judged by `compiled`'s decoder): the reference for
    the compiled one, and every rule's search (`rules`, None: `RULES`); a move must also
    earn more than `floor` (what another search found)."""
    ev = Evacuation(scenario, jobs)
    top = max(ev.value(cells, orders, compiled), floor)
    best = None
    for move in moves(scenario.G, scenario.T):
        for rule in RULES if rules is None else rules:
            trial = ev.apply(cells, move, rule)
            if trial is None:
                continue
            got = ev.value(trial, orders, compiled)
            if got > top + 1e-9 and swaps_hold(scenario, trial):
                top, best = got, trial
    return best
