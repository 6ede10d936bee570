"""Services' current GPUs opened to every service from step 0 (`fast.OPENED`).

A replan finds services on the GPUs they held yesterday. Every layout keeps a service off
another's current GPUs all day and lets each owner keep its own first, so a service that
holds a GPU the queue needs stays there. The opened layout is the first layout made once
more with each service's current GPUs (as many as its swap limit lets go at step 0, the
ones realtime's rank likes least) anyone's from step 0, the release paid up front.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings

from allocator import grid as gridlib
from allocator.model import BatchJob, Cluster, RealtimeJob, Scenario, Weights
from allocator.policies import fast as fast_module
from allocator.policies.fast import fast, opened_current
from allocator.policies.realtime import RealtimePlacer
from allocator.scenario_io import load_scenario
from allocator.validator import violations
from tests.flag_cases import off_and_on
from tests.strategies import contended_scenarios, examples

REPLAN = {"replan_layouts": True}  # off on the hot path; `gpuplan plan` refines with them

CASES = Path(__file__).parent / "data" / "quality_cases"
# full's proven optimum of opened_current_wins.json (the replan family of
# benchmarks/bench_quality.py, tuning seed 1233: `full(scenario, time_limit=30)` reports
# status "optimal" with this objective).
OPENED_OPTIMUM = 422.1069609717681


def test_a_service_that_lets_all_its_current_gpus_go_is_placed_from_step_1() -> None:
    """Released at step 0, its swap budget there is spent: its curve starts at step 1 (it
    once asked for step 0 too, found no budget, and dropped the whole day's layer)."""
    service = RealtimeJob(id="s", priority=5.0, demand=(1,) * 6, swap_limit=1,
                          current_gpus=(0,))
    scenario = Scenario(cluster=Cluster(gpus=2, horizon_steps=6), weights=Weights(),
                        jobs=(service,))
    grid = gridlib.empty(scenario)
    placer = RealtimePlacer(scenario, grid, released={0: frozenset({0})})
    placer.place(grid)
    placer.finish(grid)
    placer.refill(grid)
    assert violations(scenario, gridlib.to_ids(scenario, grid)) == []
    held = (grid == 0).sum(axis=1)
    assert held[0] == 0 and (held[1:] == 1).all()


@pytest.mark.usefixtures("no_rebuilds")
def test_the_service_on_the_queue_s_gpu_leaves_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """10 GPUs: serve-0 (swap limit 1) holds GPU 8; serve-1 rises to 4 GPUs at steps 1-2
    and, kept off GPU 8 all day, spreads over the 4-GPU block 4-7 the queue needs. Opened,
    serve-0 leaves GPU 8 at step 0 (short one step) and serve-1 stacks on 8-9: 370.37 ->
    405.27 (96.0% of the optimum; the same day with no current GPUs gives fast 405.27)."""
    scenario = load_scenario(CASES / "opened_current_wins.json")
    without, grid = off_and_on(monkeypatch, scenario, fast_module, "OPENED", **REPLAN)
    found = gridlib.objective(scenario, grid)
    assert without == pytest.approx(370.3738, abs=1e-3)
    assert found == pytest.approx(405.2729, abs=1e-3)
    assert found <= OPENED_OPTIMUM + 1e-6


def test_opened_gpus_are_a_service_s_own_and_within_its_swap_limit() -> None:
    """At most `swap_limit` of each service's current GPUs, those realtime likes least."""
    jobs = (RealtimeJob(id="a", priority=5.0, demand=(2,) * 4, swap_limit=2,
                        current_gpus=(0, 3, 5, 7)),
            RealtimeJob(id="b", priority=5.0, demand=(1,) * 4, swap_limit=0,
                        current_gpus=(1,)),
            RealtimeJob(id="c", priority=5.0, demand=(1,) * 4, swap_limit=1),
            BatchJob(id="j", kind="training", priority=1.0, gpus=4, duration_steps=2))
    scenario = Scenario(cluster=Cluster(gpus=8, horizon_steps=4), weights=Weights(),
                        jobs=jobs)
    rank = np.arange(8, dtype=np.float64)  # higher: better for realtime
    assert opened_current(scenario, rank) == {0: frozenset({0, 3})}


@settings(max_examples=examples(0.5), deadline=None)
@given(scenario=contended_scenarios(max_gpus=8, max_steps=8, max_realtime=4, max_swap=3))
def test_an_opened_layout_and_fast_s_plan_are_legal(scenario: Scenario) -> None:
    """The opened layout keeps every swap limit (the releases paid at step 0 included) and
    takes free cells only, for realtime jobs; fast's plan with it is legal."""
    base = gridlib.empty(scenario)
    gridlib.pin_running(scenario, base)
    probe = RealtimePlacer(scenario, base.copy())
    let_go = opened_current(scenario, probe.rank)
    grid = base.copy()
    placer = RealtimePlacer(scenario, grid, released=let_go)
    placer.place(grid)
    placer.finish(grid)
    placer.refill(grid)
    assert violations(scenario, gridlib.to_ids(scenario, grid)) == []
    changed = base != grid
    assert (base[changed] == gridlib.FREE).all()
    realtime = [i for i, j in enumerate(scenario.jobs) if isinstance(j, RealtimeJob)]
    assert np.isin(grid[changed], realtime).all()
    for i, gone in let_go.items():
        job = scenario.jobs[i]
        assert isinstance(job, RealtimeJob) and job.current_gpus
        assert gone <= set(job.current_gpus) and len(gone) <= job.swap_limit
    plan = fast(scenario, **REPLAN)
    assert violations(scenario, gridlib.to_ids(scenario, plan)) == []
