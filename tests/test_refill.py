"""Realtime refilled where other services' current GPUs were kept off-limits
(`RealtimePlacer.refill`).

Every layout keeps a service off the GPUs another service holds now, for the whole horizon:
at step 0 the owner decides what it keeps. A replan of the real Philly week found what that
costs: the dearest service could not take the GPU a cheaper one released two steps in, so
its curve was capped below its peak and batch work took the GPU. The top-up after the plan
could not help: batch work had filled it. The refill, once every layer is placed and before
the batch work, places what each service is short of its curve over every free GPU.

The refill cannot always pay the swaps: a service whose rise was split onto a GPU that
frees mid-rise cannot add the rise's head on another GPU without a second change at the
split. So where the first layout leaves realtime short and a service lets current GPUs go
at step 0, fast makes that layout again with those GPUs anyone's from step 0
(`fast.RELEASED`, `RealtimePlacer(released=...)`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from allocator import grid as gridlib
from allocator.model import RealtimeJob, Scenario
from allocator.policies import fast as fast_module
from allocator.policies import realtime as realtime_module
from allocator.policies.fast import fast
from allocator.policies.realtime import RealtimePlacer, released_at_zero
from allocator.scenario_io import load_scenario, scenario_from_dict
from allocator.validator import violations
from tests.flag_cases import off_and_on
from tests.strategies import contended_scenarios, examples

CASES = Path(__file__).parent / "data" / "quality_cases"
# full's proven optimum of philly_owner_release_peak.json (the Philly week of 2017-10-30
# on 16 GPUs, hour 84, benchmarks/real_snapshots.py): `full(scenario, time_limit=20)`
# reports status "optimal" with this objective.
OWNER_RELEASE_PEAK_OPTIMUM = 1573.436358153736


def _without_and_with(monkeypatch: pytest.MonkeyPatch, case: str, module: object,
                      flag: str) -> tuple[Scenario, float, np.ndarray]:
    """A stored case: fast's objective with `module.flag` off, and its grid (legal) on;
    without the opened, fresh and dropped layouts either way (they reach some of these
    plans by another road, and each case tells of one mechanism: tests/test_opened.py,
    tests/test_dropped.py)."""
    scenario = load_scenario(CASES / case)
    without, grid = off_and_on(monkeypatch, scenario, module, flag,
                               others_off=("OPENED", "FRESH", "DROPPED"))
    return scenario, without, grid


def test_a_service_takes_the_gpu_another_released_for_its_peak(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """m-large (priority 10) holds GPU 2 and peaks at two GPUs at steps 7-8; m-mid releases
    one of its two current GPUs at step 2. Without the refill m-large's curve is capped at
    one GPU (its own is the only one it may take before step 9), batch work fills the GPU
    m-mid let go, and fast's best candidate is a baseline's, 93 below the optimum."""
    scenario, without, grid = _without_and_with(monkeypatch, "philly_owner_release_peak.json",
                                                realtime_module, "REFILL")
    assert gridlib.objective(scenario, grid) >= OWNER_RELEASE_PEAK_OPTIMUM * (1 - 1e-9)
    assert without < 0.95 * OWNER_RELEASE_PEAK_OPTIMUM  # the case still tells
    large = next(i for i, j in enumerate(scenario.jobs) if j.id == "m-large")
    assert ((grid == large).sum(axis=1)[7:9] == 2).all()


def two_services(batch: bool) -> Scenario:
    """2 GPUs: X on GPU 0 needs it for step 0 only, Y on GPU 1 peaks at two GPUs from
    step 2; with `batch`, a long 1-GPU job that would take GPU 0 once X leaves."""
    jobs: list[dict] = [
        {"id": "x", "kind": "realtime", "priority": 5, "demand": [1, 0, 0, 0],
         "swap_limit": 2, "current_gpus": [0]},
        {"id": "y", "kind": "realtime", "priority": 8, "demand": [1, 1, 2, 2],
         "swap_limit": 2, "current_gpus": [1]},
    ]
    if batch:
        jobs.append({"id": "b", "kind": "batch_inference", "priority": 1, "gpus": 1,
                     "duration_steps": 3, "arrival_step": 0})
    return scenario_from_dict({
        "cluster": {"gpus": 2, "node_size": 2, "step_minutes": 60, "horizon_steps": 4},
        "weights": {"realtime_penalty": 8.0, "decay": 0.97}, "jobs": jobs})


@pytest.mark.parametrize("refill", [True, False])
def test_the_refill_alone_lets_y_onto_the_gpu_x_released(
        refill: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(realtime_module, "REFILL", refill)
    scenario = two_services(batch=False)
    grid = gridlib.empty(scenario)
    realtime_module.place_realtime(scenario, grid)
    assert violations(scenario, gridlib.to_ids(scenario, grid)) == []
    held = (grid == 1).sum(axis=1).tolist()
    assert held == ([1, 1, 2, 2] if refill else [1, 1, 1, 1])


def test_fast_serves_y_before_the_batch_job_takes_the_gpu() -> None:
    scenario = two_services(batch=True)
    grid = fast(scenario)
    assert violations(scenario, gridlib.to_ids(scenario, grid)) == []
    assert (grid == 1).sum(axis=1).tolist() == [1, 1, 2, 2]


@settings(max_examples=examples(0.5), deadline=None)
@given(scenario=contended_scenarios(max_gpus=8, max_steps=8, max_realtime=3, max_swap=3),
       mode=st.sampled_from(["plain", "tail_first", "stack"]))
def test_a_refill_is_legal_takes_free_cells_only_and_stays_under_each_curve(
        scenario: Scenario, mode: str) -> None:
    grid = gridlib.empty(scenario)
    gridlib.pin_running(scenario, grid)
    placer = RealtimePlacer(scenario, grid, tail_first=mode == "tail_first",
                            stack=mode == "stack")
    placer.place(grid)
    placer.finish(grid)
    before = grid.copy()
    placer.refill(grid)
    assert violations(scenario, gridlib.to_ids(scenario, grid)) == []
    changed = before != grid
    assert (before[changed] == gridlib.FREE).all()  # free cells only, nothing moved
    realtime = [i for i, j in enumerate(scenario.jobs) if isinstance(j, RealtimeJob)]
    assert np.isin(grid[changed], realtime).all()
    for i in realtime:
        now, then = (grid == i).sum(axis=1), (before == i).sum(axis=1)
        gained = now > then
        if gained.any():  # only a job short of its curve over every free GPU gains
            assert i in placer.wanted
            assert (now[gained] <= placer.wanted[i][gained]).all()


# full's proven optimum of philly_owner_release_rise.json (the Philly week of 2017-11-06 on
# 14 GPUs, hour 84, benchmarks/real_snapshots.py): `make_plan(scenario, "full",
# time_limit=30)` reports status "optimal" with this objective (in 14 s).
OWNER_RELEASE_RISE_OPTIMUM = 748.5318628481804


def test_a_service_short_of_a_rise_takes_the_gpu_another_let_go_at_step_0(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """m-small (swap limit 1) rises to two GPUs at steps 6-11; the only GPU free all that
    time is the one m-mid lets go at step 0, which its layers may not take, so the rise
    lands on a GPU a running job frees at step 7. The refill cannot add step 6 (a GPU
    taken at 6 and let go at 7 beside the one taken at 7 breaks the limit): 2 GPU-steps
    short at 48 each. The first layout made again with that GPU anyone's reaches the
    proven optimum (`fast.RELEASED`)."""
    scenario, without, grid = _without_and_with(monkeypatch, "philly_owner_release_rise.json",
                                                fast_module, "RELEASED")
    assert gridlib.objective(scenario, grid) >= OWNER_RELEASE_RISE_OPTIMUM * (1 - 1e-9)
    assert without < 0.9 * OWNER_RELEASE_RISE_OPTIMUM  # the case still tells
    small, service = next((i, j) for i, j in enumerate(scenario.jobs)
                          if isinstance(j, RealtimeJob) and j.id == "m-small")
    demand = np.array(service.demand)
    assert ((grid == small).sum(axis=1) >= demand).all()


def test_a_trial_asking_for_the_released_construction_alone_builds_it() -> None:
    """Past 16 GPUs the cheap pin trials replan with the winning construction alone
    (`only`); where the released layout won, that replan must build it, not raise."""
    scenario = load_scenario(CASES / "philly_owner_release_rise.json")
    grid = fast(scenario, only="released", hot_hops=0, cheap_trials=0)
    assert violations(scenario, gridlib.to_ids(scenario, grid)) == []
    assert gridlib.objective(scenario, grid) >= OWNER_RELEASE_RISE_OPTIMUM * (1 - 1e-9)


def rise_beside_a_release() -> Scenario:
    """4 GPUs: X holds GPUs 0 and 1 and needs one; Y (swap limit 1) holds GPU 2 and needs
    two GPUs from step 2; a running job holds GPU 3 until step 3; a long 1-GPU job would
    take whatever is free."""
    return scenario_from_dict({
        "cluster": {"gpus": 4, "node_size": 4, "step_minutes": 60, "horizon_steps": 6},
        "weights": {"realtime_penalty": 8.0, "decay": 0.97},
        "jobs": [
            {"id": "x", "kind": "realtime", "priority": 5, "demand": [1] * 6,
             "swap_limit": 2, "current_gpus": [0, 1]},
            {"id": "y", "kind": "realtime", "priority": 8, "demand": [1, 1, 2, 2, 2, 2],
             "swap_limit": 1, "current_gpus": [2]},
            {"id": "r", "kind": "training", "priority": 1, "gpus": 1, "duration_steps": 9,
             "arrival_step": 0, "running": {"first_gpu": 3, "remaining_steps": 3}},
            {"id": "b", "kind": "batch_inference", "priority": 1, "gpus": 1,
             "duration_steps": 6, "arrival_step": 0},
        ]})


@pytest.mark.parametrize("released", [True, False])
def test_y_rises_on_time_only_on_the_gpu_x_let_go(
        released: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """(Without the opened, fresh and dropped layouts and the final plan's reroute, which
    also let Y rise on time.)"""
    monkeypatch.setattr(fast_module, "RELEASED", released)
    for other in ("OPENED", "FRESH", "DROPPED", "REROUTE_LAST"):
        monkeypatch.setattr(fast_module, other, False)
    scenario = rise_beside_a_release()
    grid = fast(scenario)
    assert violations(scenario, gridlib.to_ids(scenario, grid)) == []
    held = (grid == 1).sum(axis=1).tolist()
    assert held == ([1, 1, 2, 2, 2, 2] if released else [1, 1, 1, 2, 2, 2])


@settings(max_examples=examples(0.5), deadline=None)
@given(scenario=contended_scenarios(max_gpus=8, max_steps=8, max_realtime=4, max_swap=3),
       mode=st.sampled_from(["plain", "tail_first", "stack"]))
def test_a_layout_with_released_gpus_is_legal(scenario: Scenario, mode: str) -> None:
    """Whatever a first layout lets go at step 0, the layout made again with those GPUs
    anyone's (each job's release paid up front) keeps every swap limit, and takes free
    cells only, for realtime jobs."""
    base = gridlib.empty(scenario)
    gridlib.pin_running(scenario, base)
    first = base.copy()
    placer = RealtimePlacer(scenario, first)
    placer.place(first)
    placer.finish(first)
    placer.refill(first)
    let_go = released_at_zero(scenario, first)
    grid = base.copy()
    again = RealtimePlacer(scenario, grid, tail_first=mode == "tail_first",
                           stack=mode == "stack", released=let_go)
    again.place(grid)
    again.finish(grid)
    again.refill(grid)
    assert violations(scenario, gridlib.to_ids(scenario, grid)) == []
    changed = base != grid
    assert (base[changed] == gridlib.FREE).all()
    realtime = [i for i, j in enumerate(scenario.jobs) if isinstance(j, RealtimeJob)]
    assert np.isin(grid[changed], realtime).all()
    for i, gone in let_go.items():  # what was let go was the job's own, not held at 0
        job = scenario.jobs[i]
        assert isinstance(job, RealtimeJob) and job.current_gpus
        assert gone <= set(job.current_gpus) and (first[0, sorted(gone)] != i).all()
