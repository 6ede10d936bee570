# Types of the compiled decoder (_packc.c), for mypy: the C signatures, argument by argument.
# The arrays are C-contiguous int64 / uint64 / float64 buffers, as decoder.py and
# realtime.py build them; the C source documents each one.

from typing import Any

from numpy.typing import NDArray

Array = NDArray[Any]

ABI: int

def pack(words: Array, offset: Array, count: Array, spare: Array | None,
         order: Array, gpus: Array, length: Array, arrival: Array, weight: Array,
         decay: Array, start: Array, first: Array, best_fit: bool, bound: int,
         spill: float, unused_words: None = None, unused_spare: None = None,
         gap: bool = False, /) -> tuple[float, int]: ...

def improve(words: Array, offset: Array, count: Array, spare: Array | None,
            order: Array, gpus: Array, length: Array, arrival: Array,
            weight: Array, decay: Array, start: Array, first: Array, value: float,
            packs: int, spill: float, swaps: bool, gap: bool = False, /) -> float: ...

def pairs(words: Array, offset: Array, count: Array, spare: Array | None,
          order: Array, gpus: Array, length: Array, arrival: Array,
          weight: Array, decay: Array, start: Array, first: Array, value: float,
          budget: int, spill: float, swaps: bool, polish: int, gap: bool = False,
          /) -> float: ...

def front(words: Array, offset: Array, count: Array, spare: Array | None,
          order: Array, gpus: Array, length: Array, arrival: Array,
          weight: Array, decay: Array, start: Array, first: Array, value: float,
          budget: int, spill: float, swaps: bool, polish: int, gap: bool = False,
          /) -> float: ...

def batch(words: Array, offset: Array, count: Array, spare: Array | None,
          orders: Array, gpus: Array, length: Array, arrival: Array,
          weight: Array, decay: Array, start: Array, first: Array, spill: float,
          packs: int, swaps: bool, pair_step: bool, back: int, ahead: int, polish: int,
          busy: Array, pstart: Array, pfirst: Array, gap: bool = False,
          /) -> tuple[int, float, float]: ...

def choose(free: Array, mine: Array, rank: Array, a: int, b: int, largest: int,
           tail_first: bool, /) -> tuple[int, int]: ...

def stack_pick(free: Array, mine: Array, rank: Array, a: int, b: int, lag: int,
               /) -> tuple[int, int] | None: ...

def climb(words: Array, offset: Array, count: Array, order: Array, gpus: Array,
          length: Array, arrival: Array, weight: Array, decay: Array, runs: Array,
          owner: Array, budget: int, gap: bool = False, /) -> tuple[float, int]: ...

def top_up(grid: Array, job: int, demand: Array, before: Array, has_current: bool,
           limit: int, keep_off: Array, /) -> bool: ...

def index(busy: Array, words: Array, offset: Array, count: Array, /) -> None: ...

def best_of(words: Array, offset: Array, count: Array, spare: Array | None,
            orders: Array, gpus: Array, length: Array, arrival: Array, weight: Array,
            decay: Array, start: Array, first: Array, best_fit: bool, bound: int,
            spill: float, words_out: Array | None = None, spare_out: Array | None = None,
            gap: bool = False, /) -> tuple[float, int]: ...

def hops(cells: Array, is_rt: Array, has_current: Array, limit: Array, current: Array,
         offset: Array, count: Array, order: Array, gpus: Array, length: Array,
         arrival: Array, weight: Array, decay: Array, largest: int, rounds: int,
         stride: int = 1, gap: bool = False, /) -> tuple[float, int]: ...

def evacuate(cells: Array, is_rt: Array, has_current: Array, limit: Array, current: Array,
             offset: Array, count: Array, order: Array, gpus: Array, length: Array,
             arrival: Array, weight: Array, decay: Array, sizes: Array,
             gap: bool = False, /) -> tuple[float, int]: ...

def rt_place(grid: Array, intervals: Array, job: Array, prio: Array, allowed: Array,
             current: Array, unused: Array, has_current: Array, limit: Array,
             changes: Array, rank: Array, largest: int, tail_first: bool, stack: bool,
             lag: int, wait: int, affordable_stack: bool, /) -> None: ...

def layers(demand: Array, capacity: Array, swap_limit: int, start: int, curve: Array,
           /) -> list[tuple[int, int]]: ...

def write(grid: Array, start: Array, first: Array, length: Array, gpus: Array, /) -> None: ...

def decomp(pi: Array, reward: Array, ends: Array, gpus: Array, cover: Array, caps: Array,
           free: Array, rt_best: Array, J: int, T: int, G: int, base: float, lower: float,
           aim: float, beta: float, iterations: int, stale: int, /) -> tuple[float, int]: ...

def counts(grids: list[Array], n1: int, out: Array, /) -> None: ...

def prefer(pinned: Array | None, largest: int, rank: Array, /) -> None: ...

def runs(layout: Array, kind: Array, out: Array, /) -> int: ...

def path(taken: Array, needed: Array, budget: Array, starts: Array, out: Array, /) -> int: ...

def drift(grid: Array, rank: Array, home: Array, curves: Array, ids: Array, limits: Array,
          current: Array, until: int = 0, /) -> None: ...
