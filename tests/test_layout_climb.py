"""fast's realtime layout climb (allocator/policies/layout_climb.py): legal by construction,
never worse for the greedy pass that judges it, the same in C and in Python, and worth its
place on the generated case where it lifts fast most."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from allocator import grid as gridlib
from allocator.model import RealtimeJob, Scenario
from allocator.policies import fast as fastmod
from allocator.policies.decoder import Decoder, Jobs, _packc
from allocator.policies.fast import fast, value_orders
from allocator.policies.layout_climb import (
    _movable_runs_py,
    best_order,
    climb,
    movable_runs,
)
from allocator.policies.realtime import place_realtime
from allocator.scenario_io import load_scenario
from allocator.validator import violations
from tests.strategies import contended_scenarios, examples, scenarios

LIFTS = Path(__file__).parent / "data" / "quality_cases" / "pin_trial_wins.json"


def stacked(scenario: Scenario) -> np.ndarray:
    grid = gridlib.empty(scenario)
    gridlib.pin_running(scenario, grid)
    place_realtime(scenario, grid, stack=True)
    return grid


def greedy(scenario: Scenario, layout: np.ndarray, jobs: Jobs, order: tuple[int, ...]) -> float:
    state = Decoder.new(scenario, layout >= 0, None, jobs)
    state.pack(order)
    return state.value


@settings(max_examples=examples(0.5))
@given(scenario=contended_scenarios())
def test_a_climbed_layout_is_legal_and_earns_at_least_as_much(scenario: Scenario) -> None:
    """Each service holds as many GPUs per step as before, within its swap limit, on cells
    no running job holds; the greedy pass that judged the moves earns no less."""
    layout = stacked(scenario)
    jobs = Jobs.of(scenario)
    orders = value_orders(scenario)
    order = best_order(Decoder.new(scenario, layout >= 0, None, jobs), orders)
    climbed = climb(scenario, layout, jobs, orders, fastmod.CLIMB_PASSES)
    event("moved" if not np.array_equal(climbed, layout) else "unchanged")
    realtime = [i for i, j in enumerate(scenario.jobs) if isinstance(j, RealtimeJob)]
    for i in realtime:
        assert ((climbed == i).sum(axis=1) == (layout == i).sum(axis=1)).all()
    others = ~np.isin(layout, realtime)
    assert (climbed[others & (layout >= 0)] == layout[others & (layout >= 0)]).all()
    assert fastmod.swaps_hold(scenario, climbed)
    assert violations(scenario, gridlib.to_ids(scenario, climbed)) == []
    assert greedy(scenario, climbed, jobs, order) >= greedy(scenario, layout, jobs, order) - 1e-9


@pytest.mark.skipif(_packc is None, reason="the C extension was not built")
@settings(max_examples=examples(0.5))
@given(scenario=contended_scenarios(), gap=st.booleans())
def test_compiled_and_python_climbs_move_the_same_runs(scenario: Scenario, gap: bool) -> None:
    layout = stacked(scenario)
    jobs = replace(Jobs.of(scenario), gap=gap)  # the buddy rule or the gap rule
    orders = value_orders(scenario)
    for passes in (3, 100):
        compiled = climb(scenario, layout, jobs, orders, passes)
        python = climb(scenario, layout, jobs, orders, passes, compiled=False)
        assert np.array_equal(compiled, python)


def test_runs_held_at_step_zero_by_a_service_with_current_gpus_stay() -> None:
    """Moving such a run would release a current GPU and acquire another at step 0."""
    scenario = load_scenario(LIFTS)
    layout = stacked(scenario)
    runs = movable_runs(scenario, layout)
    for a, _, _, i in runs.tolist():
        assert a > 0 or scenario.jobs[i].current_gpus is None
    lengths = runs[:, 1] - runs[:, 0]
    assert (np.diff(lengths) <= 0).all()  # the longest first


@pytest.mark.usefixtures("no_rebuilds")
def test_the_climb_lifts_fast_where_its_layouts_leave_a_large_job_out(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Tuning seed 1048 (14 GPUs, long 1-GPU jobs, an 8-GPU job): the climb moves the
    service's runs so that the batch work earns more. (It lifted fast by 5% when no layout
    started the 8-GPU job; since a split layer pays its head's release up front, the
    stacked layout starts it itself, and the climb adds 0.6%.)"""
    scenario = load_scenario(LIFTS)
    climbed = gridlib.objective(scenario, fast(scenario, hot_hops=0))  # the climb alone
    monkeypatch.setattr(fastmod, "CLIMB_FROM", None)
    plain = gridlib.objective(scenario, fast(scenario, hot_hops=0))
    assert climbed > 1.005 * plain, (climbed, plain)


def _runs_one_service_at_a_time(scenario: Scenario, layout: np.ndarray,
                                step_zero_stays: bool = True) -> np.ndarray:
    """movable_runs as first written: each service's runs found on their own."""
    parts = []
    for i, job in enumerate(scenario.jobs):
        if not isinstance(job, RealtimeJob):
            continue
        mine = np.zeros((layout.shape[0] + 2, layout.shape[1]), dtype=np.int8)
        mine[1:-1] = layout == i
        edges = np.diff(mine, axis=0)
        starts, ends = np.argwhere(edges.T == 1), np.argwhere(edges.T == -1)
        rows = np.column_stack([starts[:, 1], ends[:, 1], starts[:, 0],
                                np.full(len(starts), i)])
        if step_zero_stays and job.current_gpus is not None:
            rows = rows[rows[:, 0] > 0]
        parts.append(rows)
    runs = np.concatenate(parts) if parts else np.zeros((0, 4), dtype=np.int64)
    return runs[np.lexsort((runs[:, 0], runs[:, 2], runs[:, 0] - runs[:, 1]))]


@given(scenario=scenarios(max_gpus=16, max_steps=24), seed=st.integers(0, 2**32 - 1))
def test_movable_runs_are_every_services_runs_in_order(scenario: Scenario, seed: int) -> None:
    """The runs of all services found at once are those found service by service, in the
    same order (the climb tries them in it)."""
    ids = np.array([-1] + [i for i, j in enumerate(scenario.jobs) if isinstance(j, RealtimeJob)])
    layout = np.random.default_rng(seed).choice(ids, size=(scenario.T, scenario.G))
    expected = _runs_one_service_at_a_time(scenario, layout)
    assert np.array_equal(movable_runs(scenario, layout), expected)
    # fast's int32 grids take the compiled scan, whose rows are the Python scan's
    assert np.array_equal(movable_runs(scenario, layout.astype(np.int32)), expected)
    assert np.array_equal(_movable_runs_py(scenario, layout.astype(np.int32)), expected)
    # every run, step 0's too (the re-cuts' scan), from both
    every = _runs_one_service_at_a_time(scenario, layout, step_zero_stays=False)
    assert np.array_equal(movable_runs(scenario, layout.astype(np.int32), False), every)
    assert np.array_equal(_movable_runs_py(scenario, layout, False), every)
