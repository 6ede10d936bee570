"""Services laid again as paths around a plan's batch work (allocator/policies/rtpath.py):
legal, never worse, and the hand-over at swap limit 1 that run-by-run layers miss."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from allocator import grid as gridlib
from allocator.model import BatchJob, Cluster, RealtimeJob, Scenario, Weights
from allocator.plan import make_plan
from allocator.policies import fast as fast_module
from allocator.policies import refine, rtpath
from allocator.policies.decoder import _packc
from allocator.policies.fast import fast
from allocator.policies.rtpath import rerouted
from allocator.scenario_io import load_scenario
from allocator.validator import violations
from tests.plan_checks import default_and_with
from tests.strategies import contended_scenarios, examples

CASES = Path(__file__).parent / "data" / "quality_cases"
# full's proven optimum of reroute_wins.json (benchmarks/bench_quality.py's replan3 tuning
# range, seed 1433: `full(scenario, time_limit=30)` reports status "optimal").
REROUTE_OPTIMUM = 460.2329986440394


def _handed_over() -> tuple[Scenario, np.ndarray]:
    """3 GPUs, 6 steps: a service at swap limit 1 holds GPU 0, which a queued job takes
    from step 3; the service's run-by-run layer stops there (short at steps 3-5)."""
    service = RealtimeJob(id="s", priority=5.0, demand=(1,) * 6, swap_limit=1,
                          current_gpus=(0,))
    job = BatchJob(id="j", kind="training", priority=1.0, gpus=1, duration_steps=3)
    scenario = Scenario(cluster=Cluster(gpus=3, horizon_steps=6), weights=Weights(),
                        jobs=(service, job))
    grid = gridlib.empty(scenario)
    grid[:3, 0] = 0  # the service until step 3
    grid[3:, 0] = 1  # the job from step 3
    return scenario, grid


def test_a_layer_moves_a_step_ahead_of_the_job_that_takes_its_gpu() -> None:
    scenario, grid = _handed_over()
    score = gridlib.Scorer(scenario)
    assert score.shortfall_cost(grid) > 0
    laid = rerouted(scenario, grid, score)
    assert violations(scenario, gridlib.to_ids(scenario, laid)) == []
    assert score.shortfall_cost(laid) == 0
    assert (laid[3:, 0] == 1).all()  # the job kept where it was
    held = laid == 0
    assert held.sum(axis=1).min() == 1 and held.sum(axis=1).max() == 2  # one step on both
    assert ((held[1:] ^ held[:-1]).sum(axis=1) <= 1).all()


def test_a_plan_without_shortfall_is_returned_as_it_is() -> None:
    scenario, grid = _handed_over()
    grid[2:, 1] = 0  # by hand: GPU 1 acquired at step 2, GPU 0 let go at step 3
    score = gridlib.Scorer(scenario)
    assert score.shortfall_cost(grid) == 0
    assert rerouted(scenario, grid, score) is grid


@settings(max_examples=examples(0.5))
@given(scenario=contended_scenarios())
def test_rerouted_plans_are_legal_and_never_worse(scenario: Scenario) -> None:
    """On fast's plan and on fast's plan with every construction rerouted."""
    score = gridlib.Scorer(scenario)
    grid = fast(scenario, cheap_trials=0)
    laid = rerouted(scenario, grid, score)
    assert violations(scenario, gridlib.to_ids(scenario, laid)) == []
    assert score(laid) >= score(grid) - 1e-9
    batch = np.isin(grid, [i for i, j in enumerate(scenario.jobs) if isinstance(j, BatchJob)])
    assert (laid[batch] == grid[batch]).all()  # the batch work stays as planned
    both = fast(scenario, cheap_trials=0, reroute=True)
    assert violations(scenario, gridlib.to_ids(scenario, both)) == []


@pytest.mark.usefixtures("no_rebuilds")
def test_a_replan_s_services_hand_over_around_the_big_jobs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """12 GPUs, three services (swap limits 1, 1, 2) on scattered current GPUs, two 8-GPU
    jobs: the realtime-last construction's batch work is the optimum's, but its layers
    leave the dearest-but-one service short at steps 0 and 11; rerouted, 302.28 -> 459.88
    (full's proven optimum 460.23). The drift layout, another road, reaches 460.18, and
    without it the flipped drift layouts reach 459.19."""
    scenario = load_scenario(CASES / "reroute_wins.json")
    drifting = gridlib.objective(scenario, fast(scenario))
    assert drifting == pytest.approx(460.18, abs=0.01)
    monkeypatch.setattr(fast_module, "DRIFT", False)
    assert gridlib.objective(scenario, fast(scenario)) == pytest.approx(459.19, abs=0.01)
    monkeypatch.setattr(fast_module, "FLIP", False)
    plain, grid = default_and_with(scenario, reroute=True)
    found = gridlib.objective(scenario, grid)
    assert plain == pytest.approx(302.28, abs=0.01)
    assert found == pytest.approx(459.88, abs=0.01)
    assert found <= REROUTE_OPTIMUM + 1e-6


def test_gpuplan_plan_refines_with_the_rerouted_run(monkeypatch: pytest.MonkeyPatch) -> None:
    scenario = load_scenario(CASES / "reroute_wins.json")
    plan = make_plan(scenario, "fast", bound="auto", refine_below=refine.REFINE_BELOW)
    assert 459.87 <= plan.metrics.objective <= REROUTE_OPTIMUM + 1e-6
    monkeypatch.setattr(refine, "REFINE_REROUTE", False)
    monkeypatch.setattr(fast_module, "REROUTE_LAST", False)
    monkeypatch.setattr(fast_module, "DRIFT", False)  # (another road: 460.18)
    monkeypatch.setattr(fast_module, "FLIP", False)  # (and another: 459.19, on the hot
    monkeypatch.setattr(refine, "REFINE_FLIP", False)  # path or in the refinement)
    plan = make_plan(scenario, "fast", bound="auto", refine_below=refine.REFINE_BELOW)
    assert plan.metrics.objective < 303


@pytest.mark.skipif(_packc is None, reason="the C extension is not built")
@settings(max_examples=examples(1.0))
@given(data=st.data(), steps=st.integers(1, 12), gpus=st.integers(1, 9))
def test_the_compiled_path_is_the_reference_path(data: st.DataObject, steps: int,
                                                 gpus: int) -> None:
    """`_packc.path` against `rtpath.layer_path`: the same cells, changes and start, or no
    path either way (sparse and crowded cells, tight and loose budgets, current GPUs)."""
    density = data.draw(st.sampled_from([0.0, 0.2, 0.5, 0.8]))
    bits = data.draw(st.lists(st.floats(0, 1), min_size=steps * gpus, max_size=steps * gpus))
    taken = (np.array(bits).reshape(steps, gpus) < density)
    needed = np.array(data.draw(st.lists(st.booleans(), min_size=steps, max_size=steps)))
    budget = np.array(data.draw(st.lists(st.integers(0, 3), min_size=steps,
                                         max_size=steps)), dtype=np.int64)
    starts = sorted(data.draw(st.sets(st.integers(0, gpus - 1), max_size=min(gpus, 3))))
    want = rtpath.layer_path(taken, needed, budget.copy(), list(starts))
    got = rtpath._layer_path(taken, needed, budget.copy(), list(starts))
    if want is None:
        assert got is None
        return
    assert got is not None
    assert sorted(got[0]) == sorted(want[0])
    assert got[1].tolist() == want[1].tolist() and got[2] == want[2]
    held = np.zeros_like(taken)
    for t, g in got[0]:
        assert not taken[t, g]
        held[t, g] = True
    assert (got[1] <= budget).all()  # each step's changes within the budget
    before = np.zeros(gpus, dtype=bool)  # and they are the path's own changes
    if got[2] is not None:
        before[got[2]] = True
    for t in range(steps):
        assert (held[t] ^ before).sum() <= got[1][t]
        before = held[t]
