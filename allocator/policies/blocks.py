"""Free aligned blocks over time, as bitsets: the index every policy searches for a spot.

For each block size k (1, 2, 4, ... up to G) and each aligned block i, one integer whose
bit t says "some GPU of block i is busy at step t". A run of L steps fits block i from
step s when bits s .. min(s+L, T)-1 are clear; all blocks of a size are tested at once
with a handful of vectorised shifts, so a query costs O(G/k) word operations instead of
a scan of the (T, G) grid. Horizons up to 63 steps use uint64 words; longer ones fall
back to numpy object arrays of Python integers (same code, slower). Small clusters
(up to SMALL_G GPUs) use plain Python integers in lists: with a few blocks per size,
numpy's per-call overhead would cost more than the loop.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

_FAST_BITS = 63
SMALL_G = 32


def _bit_length(words: NDArray[Any]) -> NDArray[np.int64]:
    lengths: NDArray[np.int64]
    if words.dtype == object:
        lengths = np.frompyfunc(int.bit_length, 1, 1)(words).astype(np.int64)
    elif not (words >> np.uint64(53)).any():  # exact in float64: the exponent is the length
        lengths = np.frexp(words.astype(np.float64))[1].astype(np.int64)
    else:
        smeared = words.copy()
        for shift in (1, 2, 4, 8, 16, 32):
            smeared |= smeared >> np.uint64(shift)
        lengths = np.bitwise_count(smeared).astype(np.int64)
    return lengths


def _popcount(words: NDArray[Any]) -> NDArray[np.int64]:
    counts: NDArray[np.int64]
    if words.dtype == object:
        counts = np.frompyfunc(int.bit_count, 1, 1)(words).astype(np.int64)
    else:
        counts = np.bitwise_count(words).astype(np.int64)
    return counts


class BlockIndex:
    """Busy bitsets per aligned block, for every power-of-two block size that fits in G."""

    def __init__(self, busy: np.ndarray, small_lists: bool = True) -> None:
        """`small_lists=False` keeps a small cluster's words in arrays too (the compiled
        decoder reads arrays; the Python one is faster on lists)."""
        T, G = busy.shape
        self.T, self.G = T, G
        self.small = small_lists and G <= SMALL_G
        self._wide = T > _FAST_BITS
        self._one = 1 if self._wide else np.uint64(1)
        if self._wide:
            cols = np.array([sum(1 << t for t in np.flatnonzero(busy[:, g]).tolist())
                             for g in range(G)] + [0], dtype=object)[:G]
        else:
            weights = np.left_shift(np.uint64(1), np.arange(T, dtype=np.uint64))
            cols = (busy.astype(np.uint64) * weights[:, None]).sum(axis=0, dtype=np.uint64)
        # Per block size, one busy word per block: uint64 arrays (T <= 63), arrays of Python
        # ints (wider horizons), or, for a small cluster, plain lists of Python ints.
        self.levels: dict[int, Any] = {1: cols}
        k = 1
        while 2 * k <= G:
            prev = self.levels[k]
            pairs = len(prev) // 2
            self.levels[2 * k] = prev[0 : 2 * pairs : 2] | prev[1 : 2 * pairs : 2]
            k *= 2
        if self.small:
            self.levels = {k: [int(w) for w in v] for k, v in self.levels.items()}

    def copy(self) -> BlockIndex:
        clone = object.__new__(BlockIndex)
        clone.__dict__.update(self.__dict__)
        clone.levels = {k: v.copy() for k, v in self.levels.items()}  # list or array copy
        return clone

    def _bits(self, start: int, end: int) -> int | np.uint64:
        """Bits start .. end-1 set, in this index's word type."""
        value = ((1 << (end - start)) - 1) << start
        return value if self._wide else np.uint64(value)

    def _below(self, n: NDArray[np.int64]) -> NDArray[Any]:
        """Per block, the bits 0 .. n-1 set (n <= T)."""
        if self._wide:
            return np.array([(1 << int(v)) - 1 for v in n], dtype=object)
        below: NDArray[np.uint64] = np.left_shift(np.uint64(1), n.astype(np.uint64))
        below -= np.uint64(1)
        return below

    def find(self, gpus: int, length: int, earliest: int, best_fit: bool,
             also_busy: int = 0, gap: bool = False) -> tuple[int, int] | None:
        """Earliest start >= `earliest` with a free aligned block of `gpus`; then the block.

        Among the blocks free at that start: the lowest (the baselines' rule), or with
        `best_fit` the one whose buddy block is busiest over the run, so the free pool
        keeps whole blocks for the jobs still waiting (ties: lowest). `also_busy`, a bitmask
        of steps, counts as busy in every block (e.g. steps with no GPUs to spare). With
        `gap` (and `best_fit`), the block whose free stretch the run fills most tightly
        first, then the buddy rule (`gap_fit`; _packc.c's gap_score).
        """
        T = self.T
        words = self.levels.get(gpus)
        if words is None or len(words) == 0 or earliest >= T:
            return None
        if also_busy and not self.small:
            words = words | (also_busy if self._wide else np.uint64(also_busy))
        if self.small:
            return _find_small(words, T, gpus, length, earliest, best_fit, also_busy, gap)
        window = min(length, T)
        horizon = self._bits(0, T)
        # Bit s of `runs`: steps s .. s+window-1 are all free, inside the horizon.
        runs, have = ~words & horizon, 1
        while have < window:
            step = min(have, window - have)
            runs = runs & (runs >> (step if self._wide else np.uint64(step)))
            have += step
        # A run may also pass the horizon's end: any start from T - window on whose
        # steps up to T-1 are free, i.e. above the block's last busy step.
        tail_from = np.minimum(np.maximum(_bit_length(words), T - window), T)
        runs = (runs | (horizon & ~self._below(tail_from))) & self._bits(max(earliest, 0), T)
        if not runs.any():
            return None
        lowest = runs & (~runs + self._one)
        starts = np.where(runs != 0, _bit_length(lowest) - 1, T)
        start = int(starts.min())
        candidates = np.flatnonzero(starts == start)
        if not best_fit or len(candidates) == 1:
            return start, int(candidates[0]) * gpus
        end = min(start + length, T)
        buddies = candidates ^ 1
        inside = buddies < len(words)
        busy_steps = _popcount(words[np.where(inside, buddies, 0)] & self._bits(start, end))
        fit = np.where(inside, busy_steps, end - start)
        if gap:
            after = [int(w) for w in words[candidates] & self._bits(end, T)]
            fit = np.asarray(gap_fit(after, end, T, [int(f) for f in fit]))
        return start, int(candidates[int(np.argmax(fit))]) * gpus

    def occupy(self, first_gpu: int, gpus: int, start: int, end: int) -> None:
        bits: int | np.uint64
        if self.small:
            bits = ((1 << (end - start)) - 1) << start
            for k, words in self.levels.items():
                if k <= gpus:
                    for i in range(first_gpu // k, (first_gpu + gpus) // k):
                        words[i] |= bits
                elif first_gpu // k < len(words):
                    words[first_gpu // k] |= bits
            return
        bits = self._bits(start, end)
        for k, words in self.levels.items():
            if k <= gpus:
                words[first_gpu // k : (first_gpu + gpus) // k] |= bits
            elif first_gpu // k < len(words):
                words[first_gpu // k] |= bits


def gap_fit(after: list[int], end: int, T: int, busy: list[int]) -> list[int]:
    """Per candidate block, the gap rule's score: how tightly a run ending at `end` fills
    the block's free stretch (`after`: its busy steps from `end` on; none: the stretch
    runs past the horizon), then its buddy's `busy` steps over the run. A run that ends
    where a later job's block begins leaves no hole in it (BENCHMARKS.md, "The gap
    rule")."""
    slack = [((a & -a).bit_length() - 1 if a else T + 1) - end for a in after]
    return [(64 - s) * 64 + b for s, b in zip(slack, busy, strict=True)]


def _find_small(words: list[int], T: int, gpus: int, length: int, earliest: int,
                best_fit: bool, also_busy: int = 0, gap: bool = False
                ) -> tuple[int, int] | None:
    """`BlockIndex.find` for a handful of blocks: the same bit logic, one block at a time."""
    window = min(length, T)
    horizon = (1 << T) - 1
    first = max(earliest, 0)
    valid = horizon & ~((1 << first) - 1)
    if also_busy:
        words = [w | also_busy for w in words]
    shifts = []
    have = 1
    while have < window:
        shifts.append(min(have, window - have))
        have += shifts[-1]
    best_start, best = T, []
    for i, word in enumerate(words):
        if not word & valid:  # free from `first` on: nothing can start earlier
            start = first
        else:
            runs = ~word & horizon
            for step in shifts:
                runs &= runs >> step
            tail_from = max(word.bit_length(), T - window)
            runs = (runs | (horizon & ~((1 << tail_from) - 1))) & valid
            if not runs:
                continue
            start = (runs & -runs).bit_length() - 1
        if start < best_start:
            best_start, best = start, [i]
            if start == first and not best_fit:
                break  # the lowest block at the earliest possible start
        elif start == best_start:
            best.append(i)
    if not best:
        return None
    if not best_fit or len(best) == 1:
        return best_start, best[0] * gpus
    end = min(best_start + length, T)
    span = ((1 << (end - best_start)) - 1) << best_start
    n = len(words)
    fit = [(words[i ^ 1] & span).bit_count() if (i ^ 1) < n else end - best_start
           for i in best]
    if gap:
        fit = gap_fit([words[i] & horizon & ~((1 << end) - 1) for i in best], end, T, fit)
    return best_start, best[fit.index(max(fit))] * gpus
