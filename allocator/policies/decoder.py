"""fast's greedy decoder: jobs in a given order, each at its earliest feasible start.

A `Decoder` is the state of one greedy pass: which aligned blocks are busy when, the GPUs
per step the batch work must leave spare (realtime's later layers), the spot of every job
placed so far and the value they earn. `copy` forks it, so a search can replay only the
suffix of an order it changes from a saved prefix state.

Two implementations hold the same state and give the same spots and value: the compiled
one (`_packc.c`, one uint64 word per block, horizons up to 63 steps), and the Python one
over `BlockIndex` (any horizon; the fallback when the extension was not built). A test
holds them equal on random scenarios.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import cached_property
from itertools import accumulate
from typing import TypeVar

import numpy as np

from allocator import grid as gridlib
from allocator.model import BatchJob, Scenario
from allocator.policies.blocks import BlockIndex
from allocator.policies.placement import find, run_length

PACKC_ABI = 30  # must match _packc.c: an extension built from older source is not used

try:  # built by `pip install` (pyproject's ext-modules); optional
    from allocator.policies import _packc as _packc  # re-exported: realtime uses it too
except ImportError:  # pragma: no cover - exercised where no C compiler was available
    _packc = None  # type: ignore[assignment]  # no extension: callers test for None
if _packc is not None and getattr(_packc, "ABI", None) != PACKC_ABI:  # pragma: no cover
    warnings.warn("allocator/policies/_packc is stale (rebuild: pip install -e .); "
                  "fast runs its Python decoder", RuntimeWarning, stacklevel=1)
    _packc = None  # type: ignore[assignment]  # stale extension: callers test for None
if _packc is not None:  # the scorer's cell counts too (allocator.grid sits below here)
    gridlib.use_compiled_counts(_packc.counts)

COMPILED_MAX_T = 63

D = TypeVar("D", bound="Decoder")  # a decoder's copy is of its own class


@dataclass(frozen=True)
class Jobs:
    """Per job (by index in scenario.jobs): what the decoder reads, as arrays."""

    gpus: np.ndarray
    length: np.ndarray  # run length in steps, at most T
    arrival: np.ndarray  # at most T
    weight: np.ndarray  # priority x gpus
    decay: np.ndarray  # decay[t] = sum of decay**u for u < t: a run's reward is a subtraction
    # The compiled decoder's block words: count[l] aligned blocks of 2**l GPUs, from
    # words[offset[l]] on (one layout per cluster; fast builds a dozen decoders a plan).
    count: np.ndarray
    offset: np.ndarray
    words: int = 0  # how many words a decoder's state holds, offset[-1] + count[-1]
    # Every best-fit block search by the gap rule (blocks.gap_fit): a run that ends where a
    # block's next busy stretch begins first. fast's `gap` (BENCHMARKS.md, "The gap rule").
    gap: bool = False

    @staticmethod
    def of(scenario: Scenario) -> Jobs:
        n, T, G = len(scenario.jobs), scenario.T, scenario.G
        # Plain lists first, one array each at the end: fast lays these out on every plan,
        # and numpy's per-element stores cost more than the rest of it.
        gpus, length, arrival = [0] * n, [0] * n, [0] * n
        weight = [0.0] * n
        for i, job in enumerate(scenario.jobs):
            if isinstance(job, BatchJob):  # past the horizon, T behaves like any larger value
                gpus[i], weight[i] = job.gpus, job.priority * job.gpus
                length[i], arrival[i] = min(run_length(job), T), min(job.arrival_step, T)
        decay = np.concatenate(([0.0], np.cumsum(scenario.weights.decay ** np.arange(T))))
        count = [G >> level for level in range(G.bit_length())]
        offset = [0, *accumulate(count[:-1])] if count else []
        return Jobs(np.array(gpus, dtype=np.int64), np.array(length, dtype=np.int64),
                    np.array(arrival, dtype=np.int64), np.array(weight, dtype=np.float64),
                    decay, np.array(count, dtype=np.int64), np.array(offset, dtype=np.int64),
                    offset[-1] + count[-1] if count else 0)


def compiled_for(scenario: Scenario, compiled: bool | None) -> bool:
    """Whether `Decoder.new` builds the compiled decoder (`compiled=None`: where it can run)."""
    return _packc is not None and scenario.T <= COMPILED_MAX_T if compiled is None \
        else compiled


def write_spots(grid: np.ndarray, start: np.ndarray, first: np.ndarray, jobs: Jobs) -> None:
    """Constraint 5 from the job arrays (run lengths already cut at T): each placed job
    (start >= 0) on its block for its run. fast writes a dozen grids per plan, in one C
    call where the grid is fast's own."""
    if (_packc is not None and grid.dtype == np.int32 and grid.flags.c_contiguous
            and grid.flags.writeable):
        _packc.write(grid, start, first, jobs.length, jobs.gpus)
        return
    placed = np.flatnonzero(start >= 0)
    rows = zip(placed.tolist(), start[placed].tolist(), first[placed].tolist(),
               jobs.length[placed].tolist(), jobs.gpus[placed].tolist(), strict=True)
    for i, at, block, length, gpus in rows:
        grid[at : at + length, block : block + gpus] = i


Pass = tuple[np.ndarray, np.ndarray, float]  # a pass's spots (start, first) and value


def best_searched(busy: np.ndarray, spare: np.ndarray | None, jobs: Jobs, rows: np.ndarray,
                  spill: float, packs: int, budgets: tuple[int, int] | None, polish: int,
                  swaps: bool) -> tuple[Pass, Pass | None]:
    """fast.place_batch's passes in one C call (`_packc.batch`): from the empty state over
    `busy` (and `spare`, `spill` as in `Decoder.new`), the best greedy pass of the orders
    in `rows` (`order_rows`), then with packs >= 0 the order search from it (`improve`)
    and with `budgets` (pairs_back's, pairs_front's) the pair step from that. The
    searched pass, and the pair step's (back on a tie; None without one): the passes of
    those decoder calls exactly, which cost a batch placement two decoders and three
    calls."""
    start = np.empty(len(jobs.gpus), dtype=np.int64)
    start.fill(-1)
    first = start.copy()
    pstart, pfirst = np.empty_like(start), np.empty_like(start)
    back, ahead = budgets if budgets is not None else (0, 0)
    won, value, paired = _packc.batch(
        np.empty(jobs.words, dtype=np.uint64), jobs.offset, jobs.count,
        None if spare is None else np.ascontiguousarray(spare, dtype=np.int64), rows,
        jobs.gpus, jobs.length, jobs.arrival, jobs.weight, jobs.decay, start, first, spill,
        packs, swaps, budgets is not None, back, ahead, polish,
        np.ascontiguousarray(busy, dtype=np.bool_), pstart, pfirst, jobs.gap)
    pair_step = budgets is not None and packs >= 0 and won >= 0
    return (start, first, value), (pstart, pfirst, paired) if pair_step else None


def order_rows(orders: tuple[tuple[int, ...], ...]) -> np.ndarray:
    """`orders` (each the same length) as one (orders, jobs) int64 array: what the compiled
    `best_of` reads."""
    return np.array(orders, dtype=np.int64).reshape(len(orders), -1)


class Orders(tuple[tuple[int, ...], ...]):
    """Value orders (fast.value_orders), each distinct one once (first seen first) and
    those as `order_rows` worked out on first use and kept: fast's batch placement needs
    both on every call, half a dozen a plan, for the same orders."""

    @cached_property
    def distinct(self) -> tuple[tuple[int, ...], ...]:
        return tuple(dict.fromkeys(self))

    @cached_property
    def rows(self) -> np.ndarray:
        """`order_rows(self.distinct)` (the compiled `best_of` only reads it)."""
        return order_rows(self.distinct)


class Decoder:
    """One greedy pass's state; `pack(order)` places more jobs and returns what they earn."""

    best_fit: bool = True  # among blocks free at the start: the best fit, or the lowest
    gap: bool = False  # the best fit by the gap rule (Jobs.gap)
    bound: int = -1  # fifo's rule when >= 0: no start before the last placed job's
    spill: float = -1.0  # >= 0: a job may take reserved GPUs, each GPU-step priced so

    def __init__(self, start: np.ndarray, first: np.ndarray, spare: np.ndarray | None,
                 value: float) -> None:
        self.start = start  # per job: its start step, -1 while unplaced
        self.first = first  # per job: its first GPU
        self.spare = spare
        self.value = value

    @staticmethod
    def new(scenario: Scenario, busy: np.ndarray, spare: np.ndarray | None,
            jobs: Jobs, compiled: bool | None = None, best_fit: bool = True,
            fifo: bool = False, spill: float = -1.0) -> Decoder:
        """The empty pass over `busy` cells; `compiled=None` picks C where it can run.

        fast uses the best-fit block; the baselines the lowest, and fifo its order bound.
        With `spare` and `spill >= 0`, a job the reserve delays (or keeps out) may start
        earlier on reserved GPUs when its value beats `spill` per reserved GPU-step taken
        (realtime's cheapest shortfall): the trade the objective makes, at the start that
        earns most net of that price.
        """
        compiled = compiled_for(scenario, compiled)
        n = len(scenario.jobs)
        start = np.empty(n, dtype=np.int64)  # (fill, not np.full: eight decoders a plan)
        start.fill(-1)
        first = start.copy()
        spare = None if spare is None else spare.astype(np.int64)
        if compiled:
            out: Decoder = _CDecoder.of_busy(busy, jobs, start, first, spare)
        else:
            out = _PyDecoder(scenario, BlockIndex(busy), start, first, spare)
        out.best_fit, out.bound, out.spill = best_fit, 0 if fifo else -1, spill
        out.gap = jobs.gap
        return out

    def _fork(self, clone: D) -> D:
        clone.best_fit, clone.bound, clone.spill = self.best_fit, self.bound, self.spill
        clone.gap = self.gap
        return clone

    def copy(self) -> Decoder:
        raise NotImplementedError

    def pack(self, order: tuple[int, ...] | list[int]) -> float:
        raise NotImplementedError

    def best_of(self, orders: tuple[tuple[int, ...], ...], rows: np.ndarray | None = None
                ) -> tuple[Decoder | None, int]:
        """The greedy pass of each order from this state: the one earning most (the first
        on a tie) and its index; (None, -1) for no order. Passes are compared by what they
        gain from this state, as the compiled `best_of` does: adding the state's own value
        first can round a one-ulp lead away, and the two then chose different orders.
        `rows`: `orders` as one int64 array, where the caller has it (the compiled pass
        reads that)."""
        best: Decoder | None = None
        won, most = -1, -np.inf
        for k, order in enumerate(orders):
            trial = self.copy()
            gained = trial.pack(order)
            if best is None or gained > most:
                best, won, most = trial, k, gained
        return best, won

    def spots(self) -> dict[int, tuple[int, int]]:
        placed = np.flatnonzero(self.start >= 0).tolist()
        return {i: (int(self.start[i]), int(self.first[i])) for i in placed}

    def write(self, scenario: Scenario, grid: np.ndarray) -> None:
        """Constraint 5: each placed job on one block, every step of its run (to T)."""
        for i, (start, first) in self.spots().items():
            job = scenario.batch_job_at(i)
            grid[start : min(start + run_length(job), scenario.T), first : first + job.gpus] = i


class _CDecoder(Decoder):
    def __init__(self, words: np.ndarray, offset: np.ndarray, count: np.ndarray, jobs: Jobs,
                 start: np.ndarray, first: np.ndarray, spare: np.ndarray | None,
                 value: float = 0.0) -> None:
        super().__init__(start, first, spare, value)
        self.jobs = jobs
        self.words, self.offset, self.count = words, offset, count

    @staticmethod
    def of_busy(busy: np.ndarray, jobs: Jobs, start: np.ndarray, first: np.ndarray,
                spare: np.ndarray | None) -> _CDecoder:
        """The busy words of every aligned block size (BlockIndex's), built in C."""
        count, offset = jobs.count, jobs.offset
        words = np.empty(jobs.words, dtype=np.uint64)
        _packc.index(np.ascontiguousarray(busy, dtype=np.bool_), words, offset, count)
        return _CDecoder(words, offset, count, jobs, start, first, spare)

    def copy(self) -> _CDecoder:
        """A fork with its own busy words, spots and spare (the rest shared): a search
        forks a dozen times a plan, and going through __init__ cost more than the copies."""
        clone = object.__new__(_CDecoder)
        clone.__dict__.update(self.__dict__)
        clone.words, clone.start, clone.first = \
            self.words.copy(), self.start.copy(), self.first.copy()
        if self.spare is not None:
            clone.spare = self.spare.copy()
        return clone

    def best_of(self, orders: tuple[tuple[int, ...], ...], rows: np.ndarray | None = None
                ) -> tuple[Decoder | None, int]:
        """Decoder.best_of, every pass in one C call, which also leaves the winner's state
        in the fork (its spots, busy words and spare; its gain added as pack adds it)."""
        if not orders or not orders[0] or self.bound >= 0:
            return super().best_of(orders)
        j = self.jobs
        best = self.copy()
        if rows is None:
            rows = order_rows(orders)
        gained, won = _packc.best_of(
            self.words, self.offset, self.count, self.spare, rows, j.gpus, j.length,
            j.arrival, j.weight, j.decay, best.start, best.first, self.best_fit, -1,
            self.spill, best.words, best.spare, self.gap)
        best.value += gained
        return best, won

    def write(self, scenario: Scenario, grid: np.ndarray) -> None:
        """`Decoder.write` from the job arrays (`write_spots`)."""
        write_spots(grid, self.start, self.first, self.jobs)

    def pack(self, order: tuple[int, ...] | list[int]) -> float:
        j = self.jobs
        gained, self.bound = _packc.pack(
            self.words, self.offset, self.count, self.spare, np.asarray(order, dtype=np.int64),
            j.gpus, j.length, j.arrival, j.weight, j.decay, self.start, self.first,
            self.best_fit, self.bound, self.spill, None, None, self.gap)
        self.value += gained
        return gained


    def improve(self, order: tuple[int, ...], best: _CDecoder, packs: int,
                swaps: bool) -> tuple[_CDecoder, list[int]]:
        """fast.improve_order from this (empty) state, compiled: the best pass and order."""
        j = self.jobs
        out = best.copy()
        current = np.array(order, dtype=np.int64)  # a copy C may rewrite
        out.value = _packc.improve(
            self.words, self.offset, self.count, self.spare, current, j.gpus, j.length,
            j.arrival, j.weight, j.decay, out.start, out.first, best.value, packs, self.spill,
            swaps, self.gap)
        return out, current.tolist()

    def pairs(self, order: tuple[int, ...], best: _CDecoder, budget: int, polish: int,
              swaps: bool, front: bool = False) -> _CDecoder:
        """fast.pairs_back (pairs_front with `front`) from this (empty) state, compiled:
        the best pass."""
        j = self.jobs
        out = best.copy()
        current = np.array(order, dtype=np.int64)  # a copy C may rewrite
        out.value = (_packc.front if front else _packc.pairs)(
            self.words, self.offset, self.count, self.spare, current, j.gpus, j.length,
            j.arrival, j.weight, j.decay, out.start, out.first, best.value, budget, self.spill,
            swaps, polish, self.gap)
        return out


class _PyDecoder(Decoder):
    def __init__(self, scenario: Scenario, index: BlockIndex, start: np.ndarray,
                 first: np.ndarray, spare: np.ndarray | None, value: float = 0.0) -> None:
        super().__init__(start, first, spare, value)
        self.scenario = scenario
        self.index = index

    def copy(self) -> _PyDecoder:
        return self._fork(_PyDecoder(
            self.scenario, self.index.copy(), self.start.copy(), self.first.copy(),
            None if self.spare is None else self.spare.copy(), self.value))

    def pack(self, order: tuple[int, ...] | list[int]) -> float:
        T = self.scenario.T
        decay = self.scenario.weights.decay ** np.arange(T)
        cum = np.concatenate(([0.0], np.cumsum(decay)))
        gained = 0.0
        for i in order:
            job = self.scenario.batch_job_at(i)
            self.start[i] = self.first[i] = -1
            spot = self._earliest(job)
            if self.spare is not None and self.spill >= 0:
                spot = self._spill(job, spot, cum)
            if spot is None:
                continue
            start, first = spot
            end = min(start + run_length(job), T)
            self.index.occupy(first, job.gpus, start, end)
            if self.spare is not None:
                self.spare[start:end] -= job.gpus
            gained += job.priority * job.gpus * (cum[end] - cum[start])
            self.start[i], self.first[i] = start, first
            if self.bound >= 0:
                self.bound = start
        self.value += gained
        return gained

    def _spill(self, job: BatchJob, spot: tuple[int, int] | None,
               cum: np.ndarray) -> tuple[int, int] | None:
        """An earlier spot on reserved GPUs, if the job's value beats their shortfall price:
        of every earlier start, the one earning most net of that price (not only the
        earliest: one step later may leave a peak's GPUs to realtime)."""
        T, g = self.scenario.T, job.gpus
        earliest = max(min(job.arrival_step, T), self.bound)
        if (self.spare is None or not np.any(self.spare < g)
                or (spot is not None and spot[0] <= earliest)):
            return spot
        length = min(run_length(job), T)
        # reserved GPU-steps a run takes up to each step: a start's deficit is its window's
        lack = np.concatenate(([0.0], np.cumsum(np.where(self.spare < g,
                                                         g - np.maximum(self.spare, 0), 0))))

        def earns(at: int) -> tuple[float, float]:
            """What a run from `at` earns, and the same net of the reserved GPU-steps."""
            end = min(at + length, T)
            earned = job.priority * job.gpus * (cum[end] - cum[at])
            return earned, earned - self.spill * float(lack[end] - lack[at])

        best, chosen = (0.0 if spot is None else earns(spot[0])[0]), spot
        at = max(job.arrival_step, self.bound)
        while at < T and (spot is None or at < spot[0]):
            earned, take = earns(at)
            if earned <= best:  # a later start earns less still
                break
            if take <= best:  # cannot beat the best: no block search
                at += 1
                continue
            over = find(self.index, job, at, self.best_fit, gap=self.gap)
            if over is None or (spot is not None and over[0] >= spot[0]):
                break
            if over[0] > at:  # the next start any block allows: weigh it
                take = earns(over[0])[1]
            if take > best:
                best, chosen = take, over
            at = over[0] + 1
        return chosen

    def _earliest(self, job: BatchJob) -> tuple[int, int] | None:
        """The earliest block-feasible start that also leaves the reserved GPUs spare.

        Steps without `gpus` to spare count as busy in every block, so one search does both.
        """
        short = 0
        if self.spare is not None:
            for t in np.flatnonzero(self.spare < job.gpus).tolist():
                short |= 1 << t
        return find(self.index, job, max(job.arrival_step, self.bound), self.best_fit,
                    also_busy=short, gap=self.gap)
