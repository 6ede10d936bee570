"""The bitset block index against a frozen, obviously correct scan of the (T, G) grid."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from allocator.policies import blocks
from allocator.policies.blocks import BlockIndex


def reference_find(busy: np.ndarray, gpus: int, length: int, earliest: int):
    """Earliest start, then lowest aligned block, by brute force over every start and block."""
    T, G = busy.shape
    for s in range(max(earliest, 0), T):
        for b in range(0, G - gpus + 1, gpus):
            if not busy[s : min(s + length, T), b : b + gpus].any():
                return s, b
    return None


grids = st.tuples(
    st.integers(1, 80), st.integers(1, 140), st.floats(0, 0.7), st.integers(0, 2**32 - 1),
)


@pytest.mark.parametrize("small_limit", [0, 10_000], ids=["vectorised", "small"])
@given(grid=grids, k_exp=st.integers(0, 7), length=st.integers(1, 170),
       earliest=st.integers(0, 90))
def test_find_matches_brute_force(small_limit, grid, k_exp, length, earliest):
    T, G, density, seed = grid
    busy = np.random.default_rng(seed).random((T, G)) < density
    gpus = 2**k_exp
    saved = blocks.SMALL_G
    blocks.SMALL_G = small_limit
    try:
        index = BlockIndex(busy)
        got = index.find(gpus, length, earliest, best_fit=False)
        assert got == (reference_find(busy, gpus, length, earliest) if gpus <= G else None)
        fitted = index.find(gpus, length, earliest, best_fit=True)
        assert (fitted is None) == (got is None)
        if fitted:
            s, b = fitted
            assert s == got[0] and b % gpus == 0
            assert not busy[s : min(s + length, T), b : b + gpus].any()
            index.occupy(b, gpus, s, min(s + length, T))
            busy[s : min(s + length, T), b : b + gpus] = True
            rebuilt = BlockIndex(busy)
            for k, words in index.levels.items():
                assert [int(w) for w in words] == [int(w) for w in rebuilt.levels[k]]
    finally:
        blocks.SMALL_G = saved


@given(grid=grids, k_exp=st.integers(0, 5), length=st.integers(1, 100),
       earliest=st.integers(0, 90))
def test_small_and_vectorised_paths_choose_the_same_block(grid, k_exp, length, earliest):
    T, G, density, seed = grid
    busy = np.random.default_rng(seed).random((T, G)) < density
    saved = blocks.SMALL_G
    try:
        blocks.SMALL_G = 0
        vectorised = BlockIndex(busy).find(2**k_exp, length, earliest, best_fit=True)
        blocks.SMALL_G = 10_000
        small = BlockIndex(busy).find(2**k_exp, length, earliest, best_fit=True)
    finally:
        blocks.SMALL_G = saved
    assert vectorised == small


@pytest.mark.parametrize("small_limit", [0, 10_000], ids=["vectorised", "small"])
@given(grid=grids, k_exp=st.integers(0, 4), length=st.integers(1, 100),
       earliest=st.integers(0, 90), also_busy=st.integers(0, 2**80))
def test_steps_marked_busy_everywhere_are_avoided(small_limit, grid, k_exp, length, earliest,
                                                  also_busy):
    """`also_busy` steps act as busy in every block: the same as marking the grid's rows."""
    T, G, density, seed = grid
    busy = np.random.default_rng(seed).random((T, G)) < density
    gpus = 2**k_exp
    also_busy &= (1 << T) - 1
    marked = busy.copy()
    marked[[t for t in range(T) if also_busy >> t & 1]] = True
    saved = blocks.SMALL_G
    blocks.SMALL_G = small_limit
    try:
        got = BlockIndex(busy).find(gpus, length, earliest, best_fit=False, also_busy=also_busy)
    finally:
        blocks.SMALL_G = saved
    assert got == (reference_find(marked, gpus, length, earliest) if gpus <= G else None)
