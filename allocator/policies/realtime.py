"""fast's realtime placement: demand as a curve of layers, each layer on one GPU.

A realtime job's target curve (the fewest GPUs that cover demand while changing by at
most `swap_limit` per step, rising ahead of a peak) is cut into layers: layer l is held
wherever the curve is >= l. Each maximal run of a layer is one interval that wants one
GPU for its whole length, so a held GPU never moves, and each step changes exactly as
many GPUs as the curve moves. Intervals of every realtime job are placed together, the
longest first (then the highest priority), so the flat base of each curve takes the
GPUs batch work can use least, and short peaks fill in around them.

Legal by construction: an interval only takes a GPU free for all of it, and every
acquire and release is charged to the job's per-step swap budget before it is made; an
interval that does not fit whole is split once at the point a GPU frees up, or left
out (a shortfall, priced by the objective, never an illegal plan).
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field, replace
from itertools import accumulate

import numpy as np

from allocator import grid as gridlib
from allocator.core.envelope import target_curve
from allocator.model import RealtimeJob, Scenario, largest_queued
from allocator.policies.decoder import _packc
from allocator.reservations import OFF

# Realtime prefers GPUs whose aligned blocks running work breaks anyway (`preference`).
# False: the static top-first order alone (benchmarks compare the two).
BROKEN_FIRST = True


def layer_intervals(curve: np.ndarray) -> list[tuple[int, int]]:
    """Maximal runs [a, b) of every layer l = 1..max(curve) of a held-count curve, layer by
    layer, each layer's runs in time order.

    One pass over the steps: a rise from p to q opens layers p+1..q, a fall closes them.
    Plain lists: fast builds this for every service on every plan, and a numpy pass per
    layer cost more than the placement at 64 GPUs."""
    runs: list[list[tuple[int, int]]] = []
    opened: list[int] = []  # opened[l - 1]: where layer l's current run began
    before = 0
    for t, now in enumerate([*np.asarray(curve).tolist(), 0]):
        now = max(int(now), 0)
        for level in range(now, before):  # layers now+1..before close at t
            runs[level].append((opened[level], t))
        for level in range(before, now):  # layers before+1..now open at t
            if level == len(runs):
                runs.append([])
                opened.append(t)
            opened[level] = t
        before = now
    return [run for layer in runs for run in layer]


def fifo_intervals(curve: np.ndarray) -> list[tuple[int, int]]:
    """Runs [a, b) of a held-count curve where a fall lets go of the GPUs held longest
    (first in, first out), not the latest taken: the same acquisitions and releases at
    every step as `layer_intervals`, so the same swaps, but a service that rises and
    falls walks across GPUs instead of keeping a base run all day."""
    held: deque[int] = deque()
    runs: list[tuple[int, int]] = []
    before = 0
    for t, now in enumerate([*np.asarray(curve).tolist(), 0]):
        now = max(int(now), 0)
        for _ in range(before - now):
            runs.append((held.popleft(), t))
        for _ in range(now - before):
            held.append(t)
        before = now
    return runs


def curve_layers(demand: tuple[int, ...], swap_limit: int, start: int | None,
                 capacity: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """`target_curve` and its `layer_intervals`, in one C call where the extension is
    built (the same curve and runs; a test holds them equal): fast builds them for every
    service on every plan, and in Python they were a third of the placer's set-up."""
    if _packc is None:
        curve = target_curve(demand, swap_limit, start, capacity)
        return curve, layer_intervals(curve)
    curve = np.empty(len(capacity), dtype=np.int64)
    runs = _packc.layers(np.asarray(demand, dtype=np.int64),
                         np.ascontiguousarray(capacity, dtype=np.int64), swap_limit,
                         -1 if start is None else start, curve)
    return curve, runs


def preference(G: int, largest_block: int, pinned: np.ndarray | None = None) -> np.ndarray:
    """A rank per GPU (higher: better for realtime): what batch blocks can use least first.

    GPUs that fit in no aligned block of the queued sizes (the tail of a cluster whose
    size is not a power of two) come first; then, with `pinned` (a (T, G) mask of the
    cells running work holds), the GPUs whose aligned blocks running jobs break for at
    least half the horizon, the largest such block first; then the highest-numbered. So
    realtime stacks where blocks stay broken anyway, else at the top, and leaves whole
    aligned blocks to batch work: a replan's running jobs sit anywhere, and a static
    top-first order kept services on the one clean block left. A block broken for a few
    steps only does not count (it is whole again soon; counting it spread services over
    several blocks on the tuning seeds).
    """
    if _packc is not None:  # the same ranks in one C call (fast ranks GPUs on every plan)
        rank = np.empty(G, dtype=np.float64)
        _packc.prefer(None if pinned is None else np.ascontiguousarray(pinned, dtype=np.bool_),
                      largest_block, rank)
        return rank
    return _preference_py(G, largest_block, pinned)


def crowded(scenario: Scenario, rank: np.ndarray, largest_block: int,
            busy: np.ndarray | None = None) -> np.ndarray:
    """`rank` led by how much of each GPU's aligned blocks (2 up to `largest_block` GPUs)
    is taken at step 0, by services' current GPUs or by running work (`busy`, per GPU),
    summed over the sizes: a GPU outside every block of a size (the tail) counts as wholly
    taken there. `rank` orders each level; `rank` itself where no service holds a GPU.

    On a replan every layout keeps a service on the current GPUs `rank` likes best, which
    can leave it on a block it barely touches while another it crowds stays broken (replan
    tuning seed 1225: the optimum lets go of the two it holds in one 4-block, freeing it
    at step 0 for a 4-GPU job, and keeps three in blocks already broken). Crowded, it
    keeps and grows where blocks are broken already.
    """
    G = scenario.G
    held = np.zeros(G, dtype=bool)
    for job in scenario.realtime_jobs:
        if job.current_gpus:
            held[list(job.current_gpus)] = True
    if not held.any():
        return rank
    if busy is not None:
        held |= busy
    crowd = np.zeros(G)
    k = 2
    while k <= max(largest_block, 2):
        whole = (G // k) * k
        if whole:
            crowd[:whole] += np.repeat(held[:whole].reshape(-1, k).mean(axis=1), k)
        crowd[whole:] += 1.0
        k *= 2
    ranked: np.ndarray = np.lexsort((rank, crowd)).argsort().astype(np.float64)
    return ranked


def _preference_py(G: int, largest_block: int, pinned: np.ndarray | None = None
                   ) -> np.ndarray:
    """`preference` in numpy: the reference for the compiled one."""
    gpus = np.arange(G)
    outside = np.zeros(G, dtype=np.int64)
    broken = np.zeros(G, dtype=np.int64)  # bit log2(k): the GPU's k-block stays broken
    steps = 0 if pinned is None else len(pinned)
    half = (steps + 1) // 2  # broken for at least half the steps (integer counts)
    k = 2
    while k <= largest_block:
        whole = (G // k) * k
        if whole < G:  # (each numpy call skipped counts: fast ranks GPUs on every plan)
            outside[whole:] += 1
        if pinned is not None and steps and whole:
            per_block = pinned[:, :whole].reshape(steps, -1, k).any(axis=2)
            stays = per_block.sum(axis=0) >= half
            if stays.any():
                broken[:whole] += np.repeat(stays, k) * k
        k *= 2
    return np.lexsort((gpus, broken, outside)).argsort().astype(np.float64)


@dataclass
class SwapLedger:
    """One realtime job's swap budget spent per step and the GPUs it holds at step 0: what
    every acquire and release is charged against, so no placement breaks the swap limit."""

    index: int
    job: RealtimeJob
    changes: np.ndarray  # swap budget used per step (a row of its placer's `changes`)
    current: set[int] = field(default_factory=set)
    unused_current: set[int] = field(default_factory=set)


def place_realtime(scenario: Scenario, grid: np.ndarray, tail_first: bool = False,
                   stack: bool = False) -> None:
    """Fill `grid` (running jobs already pinned) with every realtime job's GPUs.

    `tail_first`: an interval that would break a batch block everywhere starts instead
    on a GPU no block misses once it frees up (its head placed apart).
    `stack`: each interval on the most preferred GPU (`preference`) instead of the one
    that breaks blocks least, moving off a service's current GPU once one frees
    (`_choose_stacked`): realtime packed at the top leaves whole aligned blocks below,
    where breaking blocks least, one layer at a time, spreads it over several.
    """
    placer = RealtimePlacer(scenario, grid, tail_first, stack)
    placer.place(grid)
    placer.finish(grid)
    placer.refill(grid)


def released_at_zero(scenario: Scenario, grid: np.ndarray) -> dict[int, frozenset[int]]:
    """Per realtime job (by index), the current GPUs `grid` has it let go at step 0."""
    out: dict[int, frozenset[int]] = {}
    for i, job in enumerate(scenario.jobs):
        if isinstance(job, RealtimeJob) and job.current_gpus:
            gone = frozenset(g for g in job.current_gpus if grid[0, g] != i)
            if gone:
                out[i] = gone
    return out


class RealtimePlacer:
    """Realtime layers placed in one go, or in two phases around the batch work.

    Two phases: the layers held at step 0 first (they decide what happens to current
    GPUs), the later ones (peaks) after batch jobs are placed, into the gaps they leave;
    `later_demand` tells the batch placement how many GPUs per step to leave for them.

    `released`: per job, current GPUs it lets go at step 0 (as an earlier layout showed it
    can): its release is charged there up front and the GPUs are anyone's from step 0.
    A service's layers otherwise keep off another's current GPUs all day, and the refill
    after them cannot always pay the swaps a split layer needs: a service short of a rise
    that only a GPU another let go could serve stayed short (a real replan, Philly).
    """

    def __init__(self, scenario: Scenario, grid: np.ndarray, tail_first: bool = False,
                 stack: bool = False, hold_through_off: bool = False,
                 released: dict[int, frozenset[int]] | None = None,
                 crowd: bool = False) -> None:
        T, G = scenario.T, scenario.G
        self.T = T
        # the scenario whose current GPUs crowd the rank (`crowded`; rebased keeps it)
        self.crowd_of = scenario if crowd else None
        self.tail_first = tail_first
        self.stack = stack
        realtime = [(i, j) for i, j in enumerate(scenario.jobs) if isinstance(j, RealtimeJob)]
        self.largest = largest_queued(scenario)
        self.static_rank = preference(G, self.largest)
        self.rank = preference(G, self.largest, grid >= 0) if BROKEN_FIRST else self.static_rank
        if self.crowd_of is not None:
            self.rank = crowded(scenario, self.rank, self.largest, grid[0] >= 0)
        self.owner = np.full(G, -1)  # whose current GPU this is: nobody else may take it
        for i, job in realtime:
            if job.current_gpus:
                self.owner[list(job.current_gpus)] = i
        released = released or {}
        for gpus in released.values():  # let go at step 0: anyone's from then on
            self.owner[sorted(gpus)] = -1
        # With `hold_through_off`, a service may go on holding its current GPUs in cells a
        # reservation keeps realtime off (OFF): holding on is legal, acquiring there is not.
        # Its curve counts such GPUs only as far as its swap limit forces it to (it cannot
        # release them faster), so it still leaves the block as fast as it can; counted
        # out, the curve fell faster than the limit at step 0 and the releases went unpaid.
        self.holding = (self.owner >= 0) if hold_through_off else None
        free = grid == gridlib.FREE
        holdable = None
        if self.holding is not None:
            holdable = np.logical_and.accumulate(free | (grid == OFF), axis=0) & self.holding
        self.intervals: list[tuple[int, float, int, int, int]] = []  # (-length, -prio, a, i, b)
        self.jobs: dict[int, SwapLedger] = {}
        # per job, the GPUs per step its curve was capped at, and the curve (`rebased`)
        self.available: dict[int, np.ndarray] = {}
        self.curves: dict[int, np.ndarray] = {}
        # per job whose curve another's current GPUs capped: the curve over every free GPU
        # (`refill` places what the layers left short of it)
        self.wanted: dict[int, np.ndarray] = {}
        # the GPUs each job may take: nobody's current ones, and its own
        self.allowed = {i: (self.owner == -1) | (self.owner == i) for i, _ in realtime}
        # every ledger's swap budget is a row of one array, in job order (rt_place's
        # slots): a copy copies one array and the compiled placement charges it in place
        self.changes = np.zeros((len(realtime), T + 1), dtype=np.int64)
        for r, (i, job) in enumerate(realtime):
            current = set(job.current_gpus) - released.get(i, frozenset()) \
                if job.current_gpus is not None else None
            self.changes[r, 0] += len(released.get(i, ()))  # their release, paid up front
            allowed = self.allowed[i]
            available = (free & allowed).sum(axis=1)
            let_go = len(released.get(i, ()))
            if let_go:  # what it may hold at step 0 once the releases are paid
                available = available.copy()
                available[0] = min(available[0],
                                   len(current or ()) + max(0, job.swap_limit - let_go))
            if holdable is not None and current:
                slowest = len(current) - job.swap_limit * np.arange(1, T + 1)
                most = (free & allowed | holdable & (self.owner == i)).sum(axis=1)
                available = np.minimum(most, np.maximum(available, slowest))
            curve, runs = curve_layers(job.demand, job.swap_limit,
                                       None if current is None else len(current), available)
            self.available[i], self.curves[i] = available, curve
            if REFILL and holdable is None and not allowed.all():  # another's current GPUs
                wanted = target_curve(job.demand, job.swap_limit,
                                      None if current is None else len(current),
                                      free.sum(axis=1))
                if (wanted > curve).any():
                    self.wanted[i] = wanted
            self.jobs[i] = SwapLedger(i, job, self.changes[r], current or set(),
                                      set(current or ()))
            for a, b in runs:
                self.intervals.append((-(b - a), -job.priority, a, i, b))
        self.spans = _spans(self.intervals)
        # rt_place's arrays, laid out once for every copy (fast places eight layouts)
        self._compiled = _CompiledJobs.of(self) \
            if _packc is not None and self.holding is None else None

    @property
    def rank_moved(self) -> bool:
        """Running work moved the preference off the static top-first order."""
        # (ranks are whole numbers as floats, never -0.0 or NaN: equal values, equal bytes)
        return self.rank.shape != self.static_rank.shape or \
            self.rank.tobytes() != self.static_rank.tobytes()

    def copy(self, tail_first: bool | None = None, stack: bool | None = None,
             mirror: bool = False, static_rank: bool = False) -> RealtimePlacer:
        """An independent placer (its own swap ledgers), in another mode if asked: the
        layers and curves are computed once for every layout fast tries.

        `mirror`: the GPU preference turned upside down (`preference`'s order reversed),
        so stacked realtime packs at the bottom of the cluster and batch blocks above it.
        `static_rank`: the top-first preference, blind to the blocks running work breaks.
        """
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        if tail_first is not None:
            clone.tail_first = tail_first
        if stack is not None:
            clone.stack = stack
        if static_rank:
            clone.rank = self.static_rank
        if mirror:
            clone.rank = clone.rank.max() - clone.rank
        clone.changes = self.changes.copy()
        clone.jobs = {i: SwapLedger(j.index, j.job, clone.changes[r], j.current,
                                    set(j.unused_current))
                      for r, (i, j) in enumerate(self.jobs.items())}
        return clone

    def walking(self) -> RealtimePlacer:
        """`copy` with every job's runs cut first in, first out (`fifo_intervals`)."""
        clone = self.copy()
        clone.intervals = [(-(b - a), -self.jobs[i].job.priority, a, i, b)
                           for i, curve in self.curves.items()
                           for a, b in fifo_intervals(curve)]
        clone.spans = _spans(clone.intervals)
        if self._compiled is not None:  # the jobs' arrays stay; only the queue is new
            clone._compiled = replace(self._compiled,
                                      intervals=_phase_rows(clone.intervals,
                                                            self._compiled.slots))
        return clone

    def rebased(self, grid: np.ndarray) -> RealtimePlacer | None:
        """A new placer over `grid`, the same jobs' base with fewer free cells (a pin
        trial's: one more block reserved), built from this one where every curve is the
        one a new placer would compute: each job's available GPUs nowhere above this
        placer's and its curve still under them (an envelope capped at A that fits under
        a lower cap B <= A is the envelope capped at B). Then the layers, ledgers and
        compiled arrays carry over and only the GPU preference is taken anew; None where
        a curve could change (the caller builds a new placer)."""
        if self.holding is not None:
            return None
        free = grid == gridlib.FREE
        for i, curve in self.curves.items():
            available = (free & self.allowed[i]).sum(axis=1)
            if (available > self.available[i]).any() or (curve > available).any():
                return None
        clone = self.copy()
        clone.rank = preference(grid.shape[1], self.largest, grid >= 0) if BROKEN_FIRST \
            else self.static_rank
        if self.crowd_of is not None:
            clone.rank = crowded(self.crowd_of, clone.rank, self.largest, grid[0] >= 0)
        return clone

    def ranked(self, rank: np.ndarray, tail_first: bool | None = None,
               stack: bool | None = None) -> RealtimePlacer:
        """`copy` in the mode asked, with `rank` as its GPU preference."""
        clone = self.copy(tail_first, stack)
        clone.rank = rank
        return clone

    def later_demand(self, later_only: bool = True) -> np.ndarray:
        """GPUs per step the not-yet-placed (later) layers will ask for: every interval's
        start counted up and its end down, summed over the steps (a slice added per
        interval cost 50 us a call at 64 GPUs)."""
        if len(self.intervals) <= SMALL_SPANS:  # a few: plain lists, the same counts
            steps = [0] * (self.T + 1)
            for _, _, a, _, b in self.intervals:
                if a > 0 or not later_only:
                    steps[a] += 1
                    steps[b] -= 1
            return np.array(list(accumulate(steps[: self.T])), dtype=np.int64)
        spans = self.spans[self.spans[:, 0] > 0] if later_only else self.spans
        ups = np.bincount(spans[:, 0], minlength=self.T + 1)
        return np.cumsum(ups - np.bincount(spans[:, 1], minlength=self.T + 1))[: self.T]

    def place(self, grid: np.ndarray, phase: str = "all") -> None:
        """Place the layers of `phase` ("all", "first": held at step 0, "later": the rest)."""
        if (self._compiled is not None and _packc is not None and grid.dtype == np.int32
                and grid.flags.c_contiguous):
            self._place_compiled(grid, phase)
            return
        T = self.T
        # (-length, -priority, a, job, b, the release at b already paid)
        queue = [(*iv, False) for iv in self.intervals if _in_phase(iv[2], phase)]
        heapq.heapify(queue)
        free = grid == gridlib.FREE
        # own_free is None: a job's current GPUs are free where any GPU is
        own_free = None if self.holding is None else free | ((grid == OFF) & self.holding)
        while queue:
            _, _, a, i, b, paid = heapq.heappop(queue)
            state = self.jobs[i]
            mine = self.allowed[i]
            if self.stack:
                spot3 = _choose_stacked(free, own_free, mine, self.rank, state, a, b,
                                        self.largest)
                if spot3 is None:
                    continue
                gpu, start, head_end = spot3
            else:
                spot = _choose(free, own_free, mine, self.rank, state, a, b, self.largest,
                               self.tail_first)
                if spot is None:
                    continue  # left out: a shortfall the objective prices
                gpu, start = spot
                head_end = start
            if not _charge(state, gpu, start, b, T, paid):
                continue
            free[start:b, gpu] = False
            if own_free is not None:
                own_free[start:b, gpu] = False
            grid[start:b, gpu] = i
            if start == 0:
                state.unused_current.discard(gpu)
            if start > a and _reserve_release(state, head_end, T):
                # the head waits for another GPU, its release paid now: a later handover
                # must not spend the budget it needs
                heapq.heappush(queue, (-(head_end - a), -state.job.priority, a, i, head_end,
                                       True))

    def _place_compiled(self, grid: np.ndarray, phase: str) -> None:
        """`place`'s loop in C (`_packc.rt_place`: the same queue order, choices and swap
        charges; a test holds the two to one grid): fast places realtime eight times a
        plan, and the Python loop was a tenth of its time at 8 GPUs. What does not change
        between layouts is laid out once per placer (`_CompiledJobs`)."""
        fixed = self._compiled
        assert fixed is not None  # made by __init__ wherever the compiled path runs
        ledgers = [self.jobs[i] for i in fixed.slots]
        unused = np.zeros((len(ledgers), grid.shape[1]), dtype=bool)
        holders = [r for r, state in enumerate(ledgers) if state.unused_current]
        for r in holders:
            unused[r, list(ledgers[r].unused_current)] = True
        _packc.rt_place(grid, fixed.intervals[phase], fixed.job, fixed.prio, fixed.allowed,
                        fixed.current, unused, fixed.has_current, fixed.limit, self.changes,
                        np.ascontiguousarray(self.rank, dtype=np.float64), self.largest,
                        self.tail_first, self.stack, STACK_LAG, HANDOVER_WAIT,
                        AFFORDABLE_STACK)
        for r in holders:  # a current GPU taken at step 0 is used now
            ledgers[r].unused_current.intersection_update(np.flatnonzero(unused[r]).tolist())

    def finish(self, grid: np.ndarray) -> None:
        _keep_current_at_step_zero(grid, self.jobs)

    def refill(self, grid: np.ndarray) -> None:
        """Once every layer is placed: a job's layers kept off other jobs' current GPUs
        for the whole horizon (`allowed`), though an owner lets most of them go within a
        step or two, so what it is short of its curve over every free GPU (`wanted`) takes
        GPUs free for a whole run, any owner's included, within its swap limit.

        On a real replan (Philly, 16 GPUs) the dearest service was left short of a
        two-step peak while a GPU another service had released stood free.
        """
        T = grid.shape[0]
        every = np.ones(grid.shape[1], dtype=bool)
        for i in sorted(self.wanted, key=lambda i: -self.jobs[i].job.priority):
            state = self.jobs[i]
            short = np.maximum(self.wanted[i] - (grid == i).sum(axis=1), 0)
            if not short.any():
                continue
            free = grid == gridlib.FREE
            for a, b in sorted(layer_intervals(short), key=lambda r: r[0] - r[1]):
                spot = _choose(free, None, every, self.rank, state, a, b, self.largest,
                               self.tail_first)
                if spot is None:
                    continue
                gpu, start = spot
                if not _charge(state, gpu, start, b, T):
                    continue
                free[start:b, gpu] = False
                grid[start:b, gpu] = i


# `refill`: a job short of its curve because other jobs' current GPUs were kept off-limits
# takes them where they stand free (off: the layers alone).
REFILL = True

# Up to this many layer intervals, `later_demand` counts them in plain Python (numpy's
# calls cost more there).
SMALL_SPANS = 32


def _in_phase(start: int, phase: str) -> bool:
    """Whether a layer interval starting at `start` is placed in `phase` ("all"; "first":
    held at step 0; "later": the rest)."""
    return phase == "all" or (start == 0) == (phase == "first")


@dataclass(frozen=True)
class _CompiledJobs:
    """What `_packc.rt_place` reads that no placement or copy changes: per realtime job (a
    slot, by job index) its index, priority, allowed and current GPUs, swap limit; the
    queue of each phase as (a, slot, b) rows. (The GPU rank is the placer's own: copies
    and `ranked` change it.)"""

    slots: list[int]
    job: np.ndarray
    prio: np.ndarray
    allowed: np.ndarray
    current: np.ndarray
    has_current: np.ndarray
    limit: np.ndarray
    intervals: dict[str, np.ndarray]

    @staticmethod
    def of(placer: RealtimePlacer) -> _CompiledJobs:
        slots = sorted(placer.jobs)
        ledgers = [placer.jobs[i] for i in slots]
        G = len(placer.rank)
        current = np.zeros((len(slots), G), dtype=bool)
        for r, state in enumerate(ledgers):
            if state.current:  # (most services have none: no empty fancy store)
                current[r, list(state.current)] = True
        return _CompiledJobs(
            slots, np.array(slots, dtype=np.int64),
            np.array([s.job.priority for s in ledgers], dtype=np.float64),
            np.array([placer.allowed[i] for i in slots], dtype=bool).reshape(len(slots), G),
            current, np.array([s.job.current_gpus is not None for s in ledgers], dtype=bool),
            np.array([s.job.swap_limit for s in ledgers], dtype=np.int64),
            _phase_rows(placer.intervals, slots))


def _phase_rows(intervals: list[tuple[int, float, int, int, int]], slots: list[int]
                ) -> dict[str, np.ndarray]:
    """Each phase's (a, slot, b) rows of `intervals` in queue order, `_in_phase` inlined:
    one pass, no call per row (flat: a row's three numbers in turn, reshaped once)."""
    at = {i: r for r, i in enumerate(slots)}
    every: list[int] = []
    first: list[int] = []
    later: list[int] = []
    for _, _, a, i, b in intervals:
        row = (a, at[i], b)
        every += row
        if a == 0:
            first += row
        else:
            later += row
    return {phase: np.array(r, dtype=np.int64).reshape(len(r) // 3, 3)
            for phase, r in (("all", every), ("first", first), ("later", later))}


def _spans(intervals: list[tuple[int, float, int, int, int]]) -> np.ndarray:
    """Every interval's (a, b) as rows, for `later_demand`'s counts."""
    return np.array([(a, b) for _, _, a, _, b in intervals],
                    dtype=np.int64).reshape(len(intervals), 2)


def block_cost(window: np.ndarray, largest: int) -> np.ndarray:
    """What batch work loses if a GPU is taken for this window: per block size up to the
    largest queued job, the free share of the rest of the GPU's aligned block (0 where the
    GPU is in no such block, or the block is busy anyway).

    Each share is rounded to tenths (a block busy for a moment is not broken); summed as
    integer tenths, one division at the end.
    """
    steps, G = window.shape
    free_steps = window.sum(axis=0)
    tenths = np.zeros(G)
    k = 2
    while k <= min(largest, G):
        whole = (G // k) * k
        part = free_steps[:whole].reshape(-1, k)
        others = part.sum(axis=1, keepdims=True) - part
        tenths[:whole] += np.rint(others / ((k - 1) * steps) * 10).ravel()
        k *= 2
    return tenths / 10


def _choose(free: np.ndarray, own_free: np.ndarray | None, mine: np.ndarray, rank: np.ndarray,
            state: SwapLedger, a: int, b: int, largest: int, tail_first: bool = False
            ) -> tuple[int, int] | None:
    """The GPU for [a, b): free throughout, the job's own current GPUs first at step 0
    (free in `own_free`, if given), else the one whose taking costs batch blocks least (ties: the
    preferred); failing that, the GPU free from the earliest step on to b."""
    own = _own_best(free, own_free, mine, rank, state, a, b)
    if own is not None:
        return own, 0
    if _packc is not None:
        return _packc.choose(free, mine, rank, a, b, largest, tail_first)
    return _choose_py(free, mine, rank, a, b, largest, tail_first)


# How far past an interval's start the stacked layout may wait for a preferred GPU to free
# up (the head of the interval holds another GPU meanwhile): enough for running jobs that
# end within a few hours, not so far that heads pile up. 3 with HANDOVER_WAIT 1 lifted
# tuning3 s1139 from 72.5 to 99.1% (a service leaving an 8-GPU block for two GPUs busy
# 3 steps); 2, or 3 without the wait, reached nothing there, and 4 lost elsewhere.
STACK_LAG = 3
# The stacked layout takes a preferred GPU over the service's own current one only where
# the swap budget pays for it (`_fits`); False: the layer was dropped where it did
# not (a service moving three current GPUs to the top at swap limit 2 lost its third
# layer, and held the GPUs it left a step longer besides).
AFFORDABLE_STACK = True
# How many steps past the step its GPU frees a moving layer may wait for swap budget
# (another layer's move may have spent that step).
HANDOVER_WAIT = 1


def _choose_stacked(free: np.ndarray, own_free: np.ndarray | None, mine: np.ndarray,
                    rank: np.ndarray, state: SwapLedger, a: int, b: int, largest: int
                    ) -> tuple[int, int, int] | None:
    """The stacked layout's GPU for [a, b): (gpu, start, end of the head left to place).

    The highest-ranked GPU free for all of [a, b), or free from at most STACK_LAG steps
    on: then the head [a, m) is placed apart (at step 0 on the job's own current GPU), so
    a service moves off an aligned block as soon as the top of the cluster frees, handing
    over within its swap limit (the head held one step longer where the limit is 1). At
    step 0 the job's own current GPU wins where the move's acquire would not fit the budget
    (`AFFORDABLE_STACK`).
    """
    own = _own_best(free, own_free, mine, rank, state, a, b)
    own_best = -1 if own is None else own
    lag = STACK_LAG if b - a > STACK_LAG else 0
    pick = _stack_pick(free, mine, rank, a, b, lag)
    if pick is not None and pick[1] > 0:
        move = _handover(state, a + pick[1], b)
        if move is None:
            pick = _stack_pick(free, mine, rank, a, b, 0)
        elif own_best < 0 or rank[pick[0]] > rank[own_best]:
            return pick[0], move[0], move[1]
    if pick is not None and (own_best < 0 or rank[pick[0]] > rank[own_best]) and \
            (own_best < 0 or not AFFORDABLE_STACK
             or _fits(state, pick[0], a, b, len(state.changes) - 1) is not None):
        return pick[0], a, a
    if own_best >= 0:
        return own_best, a, a
    spot = _choose(free, own_free, mine, rank, state, a, b, largest)
    return None if spot is None else (spot[0], spot[1], spot[1])


def _own_best(free: np.ndarray, own_free: np.ndarray | None, mine: np.ndarray,
              rank: np.ndarray, state: SwapLedger, a: int, b: int) -> int | None:
    """At step 0, the preferred of the job's own current GPUs still unused and free for all
    of [a, b) (keeping one costs no swap); else None. Failing that, where the job may hold
    on through a reservation's keep-off (`own_free`), the preferred one free there: a GPU
    left unused is a release at step 0, and an acquire elsewhere instead spends the budget
    that release needs.
    """
    if a != 0 or not state.unused_current:
        return None
    own = [g for g in state.unused_current if mine[g] and free[a:b, g].all()]
    if not own and own_free is not None:
        own = [g for g in state.unused_current if mine[g] and own_free[a:b, g].all()]
    return max(own, key=lambda g: rank[g]) if own else None


def _handover(state: SwapLedger, m: int, b: int) -> tuple[int, int] | None:
    """(the tail's start, the head's end) of a split interval whose GPU frees at m, if the
    swap budget allows the move: at m (a release and an acquire there), else with the head
    held to m + 1 (one change each step); failing both, the same up to HANDOVER_WAIT
    steps later (another layer's move may have spent step m: a service on two GPUs of a
    block leaves it one GPU a step)."""
    limit = state.job.swap_limit
    changes = state.changes
    if b < len(changes) - 1 and changes[b] + 1 > limit:
        return None  # the tail's own release does not fit
    for start in range(m, min(m + HANDOVER_WAIT, b - 1) + 1):
        if changes[start] + 2 <= limit:
            return start, start
        if changes[start] + 1 <= limit and changes[start + 1] + 1 <= limit:
            return start, start + 1
    return None


def _reserve_release(state: SwapLedger, b: int, T: int) -> bool:
    """Charge a waiting head's release at b now, if it fits (else the head is dropped: its
    release would not fit later either, the budget only fills)."""
    if b >= T:
        return True
    if state.changes[b] + 1 > state.job.swap_limit:
        return False
    state.changes[b] += 1
    return True


def _stack_pick(free: np.ndarray, mine: np.ndarray, rank: np.ndarray, a: int, b: int,
                lag: int) -> tuple[int, int] | None:
    """The highest-ranked allowed GPU free from a + m to b for some m <= lag: (gpu, m)."""
    if _packc is not None:
        return _packc.stack_pick(free, mine, rank, a, b, lag)
    return _stack_pick_py(free, mine, rank, a, b, lag)


def _stack_pick_py(free: np.ndarray, mine: np.ndarray, rank: np.ndarray, a: int, b: int,
                   lag: int) -> tuple[int, int] | None:
    """`_stack_pick` in numpy: the reference for the compiled one."""
    start = _free_tail_starts(free, mine, a, b)
    ok = np.flatnonzero(start <= lag)
    if not len(ok):
        return None
    gpu = int(ok[np.argmax(rank[ok])])
    return gpu, int(start[gpu])


def _free_tail_starts(free: np.ndarray, mine: np.ndarray, a: int, b: int) -> np.ndarray:
    """Per GPU, the step (relative to a) from which it is free and allowed up to b: 0 for
    the whole window, b - a where it is busy at b - 1."""
    busy = ~(free[a:b] & mine)
    return np.where(busy.any(axis=0), (b - a) - np.argmax(busy[::-1], axis=0), 0)


def _choose_py(free: np.ndarray, mine: np.ndarray, rank: np.ndarray,
               a: int, b: int, largest: int,
               tail_first: bool = False) -> tuple[int, int] | None:
    """`_choose` past the own-GPU rule, in numpy: the reference for the compiled one."""
    start = _free_tail_starts(free, mine, a, b)  # == b - a: never free at the end
    whole = start == 0
    if whole.any():
        candidates = np.flatnonzero(whole)
        cost_all = block_cost(free[a:b], largest)
        cost = cost_all[candidates]
        if tail_first and cost.min() > 1e-9:
            # Every whole GPU breaks a block: a costless one free from a later step m
            # takes [m, b), and the head [a, m) goes elsewhere (it breaks less).
            tails = np.flatnonzero((start > 0) & (start < b - a) & (cost_all <= 1e-9))
            if len(tails):
                m = int(start[tails].min())
                near = tails[start[tails] == m]
                return int(near[np.argmax(rank[near])]), a + m
        best = candidates[cost <= cost.min() + 1e-9]
        return int(best[np.argmax(rank[best])]), a
    # Free from some step m on: the GPU whose free tail starts earliest takes [m, b).
    best = int(start.min())
    if best >= b - a:
        return None
    candidates = np.flatnonzero(start == best)
    return int(candidates[np.argmax(rank[candidates])]), a + best


def _fits(state: SwapLedger, gpu: int, a: int, b: int, T: int, paid: bool = False
          ) -> tuple[bool, bool] | None:
    """(acquire, release) that taking [a, b) on `gpu` costs, where both fit the swap
    budget; None where they do not (`paid`: the release is charged already)."""
    limit = state.job.swap_limit
    changes = state.changes
    acquire = a > 0 or (state.job.current_gpus is not None and gpu not in state.current)
    release = b < T and not paid
    if acquire and release and a == b:
        if changes[a] + 2 > limit:
            return None
    elif (acquire and changes[a] + 1 > limit) or (release and changes[b] + 1 > limit):
        return None
    return acquire, release


def _charge(state: SwapLedger, gpu: int, a: int, b: int, T: int, paid: bool = False) -> bool:
    """Charge the acquire at a and the release at b to the swap budget, if both fit
    (`paid`: the release was charged when the interval was split off)."""
    cost = _fits(state, gpu, a, b, T, paid)
    if cost is None:
        return False
    acquire, release = cost
    changes = state.changes
    if acquire:
        changes[a] += 1
    if release:
        changes[b] += 1
    return True


def _keep_current_at_step_zero(grid: np.ndarray, jobs: dict[int, SwapLedger]) -> None:
    """Releasing a current GPU at step 0 is a change too: charge it, or keep holding it.

    A current GPU the job did not use at step 0 is released there; where that would
    exceed the swap limit, the job keeps holding it until the budget allows a release.
    """
    T = grid.shape[0]
    for state in jobs.values():
        limit = state.job.swap_limit
        for gpu in sorted(state.unused_current):
            t = 0
            while t < T and state.changes[t] + 1 > limit:
                if grid[t, gpu] not in (gridlib.FREE, OFF):  # OFF: a reserved block's
                    break  # soft keep-off; holding on is legal, an unpaid release is not
                grid[t, gpu] = state.index  # hold it one more step
                t += 1
            if t < T and grid[t, gpu] in (gridlib.FREE, OFF):
                state.changes[t] += 1
