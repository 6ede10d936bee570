"""The GPUs a service drops at step 0 opened to every service from then on (`fast.DROPPED`).

A service holding more current GPUs than its curve keeps at step 0 lets the surplus go
there. Every layout keeps other services off an owner's current GPUs all day, so a
service sitting in a block the queue needs could not move onto a GPU its neighbour has
just dropped. The dropped layouts are the first, the climbed and the realtime-last ones
made once more with those GPUs anyone's from step 0 (the release is paid as it would be).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings

from allocator import grid as gridlib
from allocator import reservations
from allocator.model import BatchJob, Cluster, RealtimeJob, Scenario, Weights
from allocator.policies import fast as fast_module
from allocator.policies.decoder import Jobs
from allocator.policies.fast import (
    DROPPED_BUILDS,
    LAYOUTS,
    _candidates,
    default_search,
    dropped_current,
    fast,
    value_orders,
)
from allocator.policies.realtime import RealtimePlacer
from allocator.scenario_io import load_scenario
from allocator.validator import violations
from tests.flag_cases import off_and_on
from tests.strategies import contended_scenarios, examples

CASES = Path(__file__).parent / "data" / "quality_cases"
# full's proven optimum of dropped_current_wins.json (the replan family of
# benchmarks/bench_quality.py, tuning seed 1322: `full(scenario, time_limit=30)` reports
# status "optimal" with this objective).
DROPPED_OPTIMUM = 121.11790243865238


def test_a_service_drops_what_its_curve_does_not_keep_at_step_0() -> None:
    """Only the surplus over the curve's first step, at most `swap_limit` of it, the GPUs
    realtime's rank likes least; a service whose curve keeps all it holds drops none."""
    jobs = (RealtimeJob(id="a", priority=5.0, demand=(1,) * 4, swap_limit=2,
                        current_gpus=(0, 3, 5, 7)),
            RealtimeJob(id="b", priority=5.0, demand=(2,) * 4, swap_limit=1,
                        current_gpus=(1, 2)),
            RealtimeJob(id="c", priority=5.0, demand=(1,) * 4, swap_limit=0,
                        current_gpus=(4, 6)),
            BatchJob(id="j", kind="training", priority=1.0, gpus=4, duration_steps=2))
    scenario = Scenario(cluster=Cluster(gpus=8, horizon_steps=4), weights=Weights(),
                        jobs=jobs)
    placer = RealtimePlacer(scenario, gridlib.empty(scenario))
    assert placer.curves[0][0] == 2  # 4 held, 2 a step at most: 2 at step 0
    least = sorted((0, 3, 5, 7), key=lambda g: (placer.rank[g], g))[:2]
    assert dropped_current(scenario, placer) == {0: frozenset(least)}


def test_a_service_leaves_the_queue_s_block_for_a_gpu_its_neighbour_drops(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """10 GPUs: serve-1 holds GPU 7, inside the 8-GPU block two 8-GPU jobs need; serve-0
    holds 8 and 9 and its curve keeps one at step 0. Kept off GPU 8 all day, serve-1 stayed
    on 7 and the 8-GPU jobs waited; with GPU 8 anyone's from step 0 the climbed layout
    moves serve-1 there: 104.58 -> 121.12, the proven optimum."""
    scenario = load_scenario(CASES / "dropped_current_wins.json")
    without, grid = off_and_on(monkeypatch, scenario, fast_module, "DROPPED")
    found = gridlib.objective(scenario, grid)
    assert without == pytest.approx(104.5786, abs=1e-3)
    assert found == pytest.approx(DROPPED_OPTIMUM, abs=1e-3)


@settings(max_examples=examples(0.5), deadline=None)
@given(scenario=contended_scenarios(max_gpus=8, max_steps=8, max_realtime=4, max_swap=3))
def test_a_dropped_layout_and_fast_s_plan_are_legal(scenario: Scenario) -> None:
    """Each dropped layout keeps every swap limit and takes free cells only; the GPUs
    dropped are the service's own, within its swap limit; fast's plan is legal."""
    base = gridlib.empty(scenario)
    gridlib.pin_running(scenario, base)
    let_go = dropped_current(scenario, RealtimePlacer(scenario, base.copy()))
    for i, gone in let_go.items():
        job = scenario.jobs[i]
        assert isinstance(job, RealtimeJob) and job.current_gpus
        assert gone <= set(job.current_gpus) and len(gone) <= job.swap_limit
    held = reservations.holds(scenario)
    for build in DROPPED_BUILDS:
        placer = RealtimePlacer(scenario, base.copy(), released=let_go)
        grids, _ = _candidates(scenario, base, held, gridlib.Scorer(scenario),
                               Jobs.of(scenario), value_orders(scenario, held),
                               default_search(scenario), LAYOUTS, placer, only=build)
        for grid in grids:
            assert violations(scenario, gridlib.to_ids(scenario, grid)) == []
    plan = fast(scenario)
    assert violations(scenario, gridlib.to_ids(scenario, plan)) == []
