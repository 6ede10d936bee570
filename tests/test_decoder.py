"""fast's compiled decoder against its Python reference: the same spots, value and grid."""

from __future__ import annotations

from dataclasses import replace
from unittest import mock

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from allocator import grid as gridlib
from allocator.model import BatchJob, Cluster, Scenario, Weights
from allocator.policies import decoder, realtime
from allocator.policies import fast as fastmod
from allocator.policies.blocks import BlockIndex
from allocator.policies.decoder import Decoder, Jobs
from allocator.policies.fast import place_batch
from allocator.policies.realtime import place_realtime
from tests.strategies import scenarios

needs_c = pytest.mark.skipif(decoder._packc is None, reason="the C decoder was not built")


def _start(scenario: Scenario) -> np.ndarray:
    grid = gridlib.empty(scenario)
    gridlib.pin_running(scenario, grid)
    place_realtime(scenario, grid)
    return grid


@needs_c
@given(scenario=scenarios(max_gpus=40, max_steps=63, max_batch=10), gap=st.booleans())
def test_compiled_and_python_decoders_place_every_order_alike(scenario: Scenario,
                                                              gap: bool) -> None:
    grid = _start(scenario)
    queued = [i for i, j in enumerate(scenario.jobs) if isinstance(j, BatchJob) and not j.running]
    jobs = replace(Jobs.of(scenario), gap=gap)  # the buddy rule, or the gap rule
    rng = np.random.default_rng(len(queued))
    spare = (grid == gridlib.FREE).sum(axis=1) - rng.integers(0, 3, scenario.T)
    for reserve, spill in ((None, -1.0), (spare, -1.0), (spare, 0.0), (spare, 3.5)):
        c = Decoder.new(scenario, grid >= 0, reserve, jobs, compiled=True, spill=spill)
        py = Decoder.new(scenario, grid >= 0, reserve, jobs, compiled=False, spill=spill)
        for part in (queued[::2], queued[1::2]):  # two calls: the state carries over
            assert c.pack(part) == py.pack(part)
        assert c.spots() == py.spots()
        assert c.value == py.value
        if reserve is not None:
            assert np.array_equal(c.spare, py.spare)
        # every order's pass at once (one C call), from a state with jobs already placed
        orders = tuple(tuple(rng.permutation(queued[1::2]).tolist()) for _ in range(4))
        c_best, c_won = c.best_of(orders)
        py_best, py_won = py.best_of(orders)
        assert c_won == py_won
        if c_best is not None and py_best is not None:
            assert (c_best.spots(), c_best.value) == (py_best.spots(), py_best.value)


@needs_c
@given(gpus=st.sampled_from([2, 4, 8, 16]), steps=st.integers(16, 63),
       shapes=st.lists(st.tuples(st.sampled_from([1, 2, 4]), st.integers(1, 4),
                                 st.integers(1, 8), st.integers(0, 8)), min_size=1, max_size=8),
       density=st.sampled_from([0.0, 0.1]), seed=st.integers(0, 2**16))
def test_the_decoders_agree_on_fragmented_layouts(gpus: int, steps: int,
                                                  shapes: list[tuple[int, int, int, int]],
                                                  density: float, seed: int) -> None:
    """Busy cells scattered over time, as running and realtime work leave them on a real
    replan: combs of busy steps (one every 2-3 steps, until a drawn step past the middle)
    and noise, under short jobs, so a block's earliest start lies past many busy
    stretches and the compiled search stops hopping and searches runs
    (`HOPS_BEFORE_RUNS`). The same spots and value as the Python decoder, best-fit and
    first-fit, by the buddy rule and the gap rule."""
    jobs_ = tuple(BatchJob(id=f"b{k}", kind="training", priority=float(prio), gpus=min(g, gpus),
                           duration_steps=length, arrival_step=arrival)
                  for k, (g, length, prio, arrival) in enumerate(shapes))
    scenario = Scenario(cluster=Cluster(gpus=gpus, horizon_steps=steps), weights=Weights(),
                        jobs=jobs_)
    rng = np.random.default_rng(seed)
    t = np.arange(steps)[:, None]
    period = rng.integers(2, 4, gpus)
    until = rng.integers(steps // 2, steps + 1, gpus)
    comb = (t < until) & ((t + rng.integers(0, 3, gpus)) % period == 0)
    busy = comb | (rng.random((steps, gpus)) < density)
    queued = list(range(len(jobs_)))
    for best_fit, gap in ((True, False), (False, False), (True, True)):
        jobs = replace(Jobs.of(scenario), gap=gap)
        c = Decoder.new(scenario, busy, None, jobs, compiled=True, best_fit=best_fit)
        py = Decoder.new(scenario, busy, None, jobs, compiled=False, best_fit=best_fit)
        assert c.pack(queued) == py.pack(queued)
        assert (c.spots(), c.value) == (py.spots(), py.value)


@needs_c
def test_a_run_past_the_horizon_fits_at_the_last_steps() -> None:
    """63 steps, every step but the last two busy in combs a hop at a time: a 4-step job
    fits only from step 61, its run cut at the horizon (the run search counts steps past
    the end, bits past 63 too, as free)."""
    jobs_ = (BatchJob(id="b", kind="training", priority=1.0, gpus=1, duration_steps=4),)
    scenario = Scenario(cluster=Cluster(gpus=2, horizon_steps=63), weights=Weights(),
                        jobs=jobs_)
    busy = np.zeros((63, 2), dtype=bool)
    busy[:61:2] = True  # busy at even steps up to 60: no 4-step window fits before 61
    jobs = Jobs.of(scenario)
    c = Decoder.new(scenario, busy, None, jobs, compiled=True)
    py = Decoder.new(scenario, busy, None, jobs, compiled=False)
    assert c.pack([0]) == py.pack([0])
    assert c.spots() == py.spots()
    assert c.spots()[0][0] == 61


@needs_c
@given(scenario=scenarios(max_gpus=40, max_steps=63, max_batch=4))
def test_compiled_index_holds_the_block_words_of_blockindex(scenario: Scenario) -> None:
    grid = _start(scenario)
    c = Decoder.new(scenario, grid >= 0, None, Jobs.of(scenario), compiled=True)
    index = BlockIndex(grid >= 0, small_lists=False)
    expected = np.concatenate([np.asarray(index.levels[1 << level], dtype=np.uint64)
                               for level in range(len(index.levels))])
    assert np.array_equal(c.words, expected)


@needs_c
@given(scenario=scenarios(max_gpus=40, max_steps=63, max_batch=10), gap=st.booleans())
def test_place_batch_gives_one_grid_either_way(scenario: Scenario, gap: bool) -> None:
    grid = _start(scenario)
    reserve = np.arange(scenario.T) % 3
    jobs = replace(Jobs.of(scenario), gap=gap)
    saved = fastmod.SWAPS
    try:
        for swaps, search in ((False, 100), (True, 100), (False, 600), (True, 600)):
            fastmod.SWAPS = swaps  # the order search with and without swap moves; with
            for kept, spill in ((None, -1.0), (reserve, -1.0), (reserve, 2.0)):  # 600: pairs
                a = place_batch(scenario, grid, kept, search, compiled=True, spill=spill,
                                jobs=jobs)
                b = place_batch(scenario, grid, kept, search, compiled=False, spill=spill,
                                jobs=jobs)
                assert np.array_equal(a, b)
    finally:
        fastmod.SWAPS = saved


def test_long_horizons_fall_back_to_python() -> None:
    from allocator.model import Cluster

    s = Scenario(cluster=Cluster(gpus=4, horizon_steps=80),
                 jobs=(BatchJob("a", "training", 1.0, 2, 70),))
    d = Decoder.new(s, np.zeros((80, 4), dtype=bool), None, Jobs.of(s))
    assert type(d).__name__ == "_PyDecoder"
    d.pack([0])
    assert d.spots() == {0: (0, 0)}


@needs_c
@given(shape=st.tuples(st.integers(1, 30), st.integers(1, 70)), density=st.floats(0, 1),
       seed=st.integers(0, 2**32 - 1), k_exp=st.integers(0, 7), tail_first=st.booleans(),
       data=st.data())
def test_compiled_realtime_choice_matches_numpy(shape, density, seed, k_exp, tail_first,
                                                data) -> None:
    free, mine, rank, a, b = _realtime_window(shape, density, seed, data)
    got = decoder._packc.choose(free, mine, rank, a, b, 2**k_exp, tail_first)
    assert got == realtime._choose_py(free, mine, rank, a, b, 2**k_exp, tail_first)


@needs_c
@given(shape=st.tuples(st.integers(1, 30), st.integers(1, 70)), density=st.floats(0, 1),
       seed=st.integers(0, 2**32 - 1), lag=st.integers(0, 4), data=st.data())
def test_compiled_stack_pick_matches_numpy(shape, density, seed, lag, data) -> None:
    free, mine, rank, a, b = _realtime_window(shape, density, seed, data)
    got = decoder._packc.stack_pick(free, mine, rank, a, b, lag)
    assert got == realtime._stack_pick_py(free, mine, rank, a, b, lag)


@needs_c
@given(shape=st.tuples(st.integers(256, 320), st.integers(1, 12)),
       density=st.sampled_from([0.0, 0.002, 0.01, 0.5]), seed=st.integers(0, 2**32 - 1),
       tail_first=st.booleans(), data=st.data())
def test_compiled_choice_counts_windows_past_255_steps(shape, density, seed, tail_first,
                                                       data) -> None:
    # the compiled choice counts a window's steps in narrow integers; a long horizon
    # (MODEL.md allows 672 steps) must not wrap them
    free, mine, rank, a, b = _realtime_window(shape, density, seed, data)
    got = decoder._packc.choose(free, mine, rank, a, b, 8, tail_first)
    assert got == realtime._choose_py(free, mine, rank, a, b, 8, tail_first)
    got = decoder._packc.stack_pick(free, mine, rank, a, b, 2)
    assert got == realtime._stack_pick_py(free, mine, rank, a, b, 2)


def _realtime_window(shape, density, seed, data):
    """A drawn free grid, allowed GPUs, GPU ranks and an interval [a, b) of it."""
    T, G = shape
    rng = np.random.default_rng(seed)
    free = rng.random((T, G)) >= density
    mine = rng.random(G) < 0.9
    rank = rng.permutation(G).astype(np.float64)
    a = data.draw(st.integers(0, T - 1))
    b = data.draw(st.integers(a + 1, T))
    return free, mine, rank, a, b


@given(curve=st.lists(st.integers(-2, 9), max_size=40))
def test_layer_intervals_are_the_maximal_runs_of_every_layer(curve: list[int]) -> None:
    # the one-pass version against the definition: layer l is held where curve >= l
    runs = realtime.layer_intervals(np.array(curve, dtype=np.int64))
    levels = []
    for level in range(1, max([0, *curve]) + 1):
        held = [c >= level for c in curve]
        mine = [(a, b) for a in range(len(curve)) for b in range(a + 1, len(curve) + 1)
                if all(held[a:b]) and (a == 0 or not held[a - 1])
                and (b == len(curve) or not held[b])]
        levels.extend(mine)
    assert runs == levels


@given(scenario=scenarios(max_gpus=16, max_steps=40), later_only=st.booleans())
def test_later_demand_counts_every_interval_over_its_steps(scenario: Scenario,
                                                           later_only: bool) -> None:
    """`later_demand`'s counts are each (later) layer interval's steps, one by one."""
    placer = realtime.RealtimePlacer(scenario, gridlib.empty(scenario))
    need = np.zeros(scenario.T, dtype=np.int64)
    for _, _, a, _, b in placer.intervals:
        if a > 0 or not later_only:
            need[a:b] += 1
    got = placer.later_demand(later_only)
    assert got.dtype == need.dtype and got.tolist() == need.tolist()


@needs_c
@given(demand=st.lists(st.integers(0, 12), min_size=1, max_size=70), data=st.data(),
       limit=st.integers(1, 4), start=st.one_of(st.none(), st.integers(0, 12)))
def test_compiled_curve_layers_match_python(demand: list[int], data: st.DataObject,
                                            limit: int, start: int | None) -> None:
    """`_packc.layers`: the curve `target_curve` gives and its `layer_intervals`."""
    capacity = np.array(data.draw(st.lists(st.integers(0, 12), min_size=len(demand),
                                           max_size=len(demand))), dtype=np.int64)
    curve, runs = realtime.curve_layers(tuple(demand), limit, start, capacity)
    with mock.patch.object(realtime, "_packc", None):
        py_curve, py_runs = realtime.curve_layers(tuple(demand), limit, start, capacity)
    assert curve.dtype == py_curve.dtype and curve.tolist() == py_curve.tolist()
    assert runs == py_runs


def _placed(scenario: Scenario, compiled: bool, mode: dict[str, bool], blocked: np.ndarray
            ) -> tuple[np.ndarray, list[tuple[list[int], list[int]]]]:
    """Every realtime layer placed in two phases around `blocked` cells (batch work's
    stand-in), then finished: the grid, and each swap ledger's charges and unused GPUs."""
    grid = gridlib.empty(scenario)
    gridlib.pin_running(scenario, grid)
    with mock.patch.object(realtime, "_packc", decoder._packc if compiled else None):
        placer = realtime.RealtimePlacer(scenario, grid).copy(**mode)
        placer.place(grid, "first")
        grid[(grid == gridlib.FREE) & blocked] = -2  # busy for the later layers
        placer.place(grid, "later")
        placer.finish(grid)
        whole = realtime.RealtimePlacer(scenario, gridlib.empty(scenario)).copy(**mode)
        alone = gridlib.empty(scenario)
        whole.place(alone)  # and in one go
    ledgers = [(s.changes.tolist(), sorted(s.unused_current))
               for _, s in sorted({**placer.jobs, **{-1 - i: s for i, s in whole.jobs.items()}
                                   }.items())]
    return np.concatenate([grid, alone]), ledgers


@needs_c
@given(scenario=scenarios(max_gpus=40, max_steps=63), seed=st.integers(0, 2**32 - 1),
       density=st.floats(0, 0.5),
       mode=st.sampled_from([{}, {"tail_first": True}, {"stack": True},
                             {"stack": True, "mirror": True},
                             {"stack": True, "static_rank": True}]))
def test_compiled_realtime_placement_matches_python(scenario: Scenario, seed: int,
                                                     density: float, mode: dict[str, bool]
                                                     ) -> None:
    """`RealtimePlacer.place` in C (`_packc.rt_place`) takes the same queue order, GPUs,
    heads and swap charges as the Python loop: one grid, one ledger, in every layout."""
    blocked = np.random.default_rng(seed).random((scenario.T, scenario.G)) < density
    c_grid, c_ledgers = _placed(scenario, True, mode, blocked)
    py_grid, py_ledgers = _placed(scenario, False, mode, blocked)
    assert np.array_equal(c_grid, py_grid)
    assert c_ledgers == py_ledgers


@needs_c
@given(scenario=scenarios(max_gpus=40, max_steps=63, max_batch=10))
def test_compiled_write_draws_the_python_grid(scenario: Scenario) -> None:
    """`_packc.write` puts every placed job on its block for its run, cut at the horizon,
    as `Decoder.write` does job by job."""
    grid = _start(scenario)
    queued = [i for i, j in enumerate(scenario.jobs) if isinstance(j, BatchJob) and not j.running]
    c = Decoder.new(scenario, grid >= 0, None, Jobs.of(scenario), compiled=True)
    c.pack(queued)
    compiled, reference = grid.copy(), grid.copy()
    c.write(scenario, compiled)
    Decoder.write(c, scenario, reference)
    assert np.array_equal(compiled, reference)
