"""The walking layout (RealtimePlacer.walking): each service's runs cut first in, first
out; the same swaps as the nested layers, legal layouts, fast never lower with it, and
the case it lifts."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from allocator import grid as gridlib
from allocator import reservations
from allocator.model import RealtimeJob, Scenario
from allocator.policies import fast as fastlib
from allocator.policies.decoder import _packc
from allocator.policies.fast import _lay_out, fast
from allocator.policies.realtime import RealtimePlacer, fifo_intervals, layer_intervals
from allocator.policies.topup import swaps_hold
from allocator.scenario_io import load_scenario
from allocator.validator import violations
from tests.plan_checks import legal_and_above_without
from tests.strategies import contended_scenarios, examples, family_scenarios

CASES = Path(__file__).parent / "data" / "quality_cases"
needs_c = pytest.mark.skipif(_packc is None, reason="the C decoder was not built")
FAMILY = family_scenarios((9, 10, 12, 14, 16))


def _held(runs: list[tuple[int, int]], steps: int) -> list[int]:
    """How many runs cover each step."""
    held = [0] * steps
    for a, b in runs:
        for t in range(a, b):
            held[t] += 1
    return held


@given(curve=st.lists(st.integers(min_value=-1, max_value=6), min_size=1, max_size=30))
def test_fifo_runs_acquire_and_release_where_the_nested_layers_do(curve: list[int]) -> None:
    """The same count at every step, and the same starts and ends (so the same swaps at
    every step): only which GPU a fall lets go of differs, the one held longest."""
    nested, walking = layer_intervals(np.array(curve)), fifo_intervals(np.array(curve))
    assert _held(walking, len(curve) + 1)[:len(curve)] == [max(c, 0) for c in curve]
    assert Counter(a for a, _ in walking) == Counter(a for a, _ in nested)
    assert Counter(b for _, b in walking) == Counter(b for _, b in nested)
    assert all(a < b for a, b in walking)


def test_a_fall_lets_go_of_the_gpu_held_longest() -> None:
    """Demand 1, 2, 2, 1, 1, 2, 1: the nested layers keep one run all day; first in, first
    out, the service moves onto the GPU it took at step 1 and then onto the one of step 5."""
    curve = np.array([1, 2, 2, 1, 1, 2, 1])
    assert sorted(layer_intervals(curve)) == [(0, 7), (1, 3), (5, 6)]
    assert sorted(fifo_intervals(curve)) == [(0, 3), (1, 6), (5, 7)]


def _parts(scenario: Scenario
           ) -> tuple[RealtimePlacer, np.ndarray, reservations.Holds] | None:
    """fast's placer, base grid (running jobs pinned) and holds for `scenario`; None
    (counted) where no walking layout can be made."""
    if not fastlib.walkable(scenario):
        event("not walkable")
        return None
    base = gridlib.empty(scenario)
    gridlib.pin_running(scenario, base)
    return RealtimePlacer(scenario, base), base, reservations.holds(scenario)


@settings(max_examples=examples(0.5), deadline=None)
@given(scenario=st.one_of(FAMILY, contended_scenarios(max_gpus=16)))
def test_walking_layouts_are_legal_and_keep_every_swap_limit(scenario: Scenario) -> None:
    if (parts := _parts(scenario)) is None:
        return
    placer, base, held = parts
    layout = _lay_out(placer.walking(), base, held)
    assert swaps_hold(scenario, layout)
    assert violations(scenario, gridlib.to_ids(scenario, layout)) == []
    # realtime only where the base left cells free
    assert (layout[base != gridlib.FREE] == base[base != gridlib.FREE]).all()
    realtime = [i for i, job in enumerate(scenario.jobs) if isinstance(job, RealtimeJob)]
    plain = _lay_out(placer.copy(), base, held)
    event("differs" if not np.array_equal(plain, layout) else "same as the first layout")
    assert set(np.unique(layout[layout != base]).tolist()) <= set(realtime)


@needs_c
@settings(max_examples=examples(0.5), deadline=None)
@given(scenario=st.one_of(FAMILY, contended_scenarios(max_gpus=16)))
def test_the_compiled_walking_layout_is_the_python_one(scenario: Scenario) -> None:
    """The walking placer's rows for `_packc.rt_place` are built again from its own runs:
    the compiled placement and the Python loop lay the same cells."""
    if (parts := _parts(scenario)) is None:
        return
    placer, base, held = parts
    compiled, python = placer.walking(), placer.walking()
    assert compiled._compiled is not None
    python._compiled = None
    assert np.array_equal(_lay_out(compiled, base, held), _lay_out(python, base, held))


@settings(max_examples=examples(0.3), deadline=None)
@given(scenario=st.one_of(FAMILY, contended_scenarios(max_gpus=16)))
def test_fast_with_the_walking_layout_never_plans_below_fast_without(
        scenario: Scenario) -> None:
    """Its plan is judged beside the flipped ones, after them: it replaces the light plan
    only where it ends higher, and the plan it replaces stays a finalist."""
    legal_and_above_without(scenario, "the walking layout", ("WALK", False, True),
                            same_both_ways={})


def test_the_walking_layout_lifts_a_recorded_plan_to_its_optimum() -> None:
    """tuning5 s3156 (14 GPUs): a limit-1 service whose demand dips and rises again sits
    on the low GPUs all day in every other layout, where an 8-GPU job needs the block for
    seven steps; walking, it leaves them for the high ones as it rises, as full's proven
    optimum (809.42) does."""
    scenario = load_scenario(CASES / "walking_wins.json")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fastlib, "WALK", False)
        without = gridlib.objective(scenario, fast(scenario))
    assert without == pytest.approx(749.2439, abs=1e-3)
    grid = fast(scenario)
    assert violations(scenario, gridlib.to_ids(scenario, grid)) == []
    assert gridlib.objective(scenario, grid) == pytest.approx(809.4170, abs=1e-3)
    assert gridlib.objective(scenario, fast(scenario, walk=False)) == pytest.approx(without)


def test_the_option_makes_it_where_the_hot_path_does_not() -> None:
    """tuning4 s1153 (8 GPUs, below WALK_MIN_GPUS): the hot path makes no walking layout
    there; `walk=True` does, and lifts the plan."""
    scenario = load_scenario(CASES / "walking_wins_8.json")
    assert not fastlib.hot_walk(scenario)
    hot = gridlib.objective(scenario, fast(scenario))
    assert hot == pytest.approx(gridlib.objective(scenario, fast(scenario, walk=False)))
    assert hot == pytest.approx(322.3609, abs=1e-3)
    grid = fast(scenario, walk=True)
    assert violations(scenario, gridlib.to_ids(scenario, grid)) == []
    assert gridlib.objective(scenario, grid) == pytest.approx(325.9975, abs=1e-3)
