"""The drift layout on a replan (`fast.DRIFT`, allocator/policies/drift.py).

The layer layouts keep a service's base layers on its current GPUs all day. The drift
layout lays services out step by step instead: each rise takes the GPUs realtime's rank
prefers, each fall lets go of those it likes least, and spare swap budget moves a service
off an aligned block, so a service that starts the day on the block a large job needs
walks off it as its demand rises and falls.
"""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from allocator import grid as gridlib
from allocator.model import BatchJob, Cluster, RealtimeJob, Scenario, Weights
from allocator.policies import drift as drift_module
from allocator.policies import fast as fast_module
from allocator.policies.decoder import _packc
from allocator.policies.drift import drift_layout
from allocator.policies.fast import fast
from allocator.policies.realtime import RealtimePlacer
from allocator.scenario_io import load_scenario
from allocator.validator import violations
from tests.flag_cases import off_and_on
from tests.plan_checks import assert_realtime_laid
from tests.strategies import contended_scenarios, examples

CASES = Path(__file__).parent / "data" / "quality_cases"
# full's proven optimum of drift_wins.json (benchmarks/bench_quality.py's replan3 tuning
# range, seed 1414: `full(scenario, time_limit=60)` reports status "optimal", gap 0).
DRIFT_OPTIMUM = 276.6739625188437


def _laid(scenario: Scenario) -> tuple[np.ndarray, np.ndarray]:
    base = gridlib.empty(scenario)
    gridlib.pin_running(scenario, base)
    return base, drift_layout(scenario, base, RealtimePlacer(scenario, base.copy()))


def test_a_service_walks_off_the_8_gpu_block_as_its_demand_rises_and_falls() -> None:
    """12 GPUs, an 8-GPU job queued: the service starts on GPUs 0-1 of block 0-7, rises to
    four and falls back to two at swap limit 1. Each rise takes a GPU of the tail 8-11, the
    falls let go of 0 and 1: from step 5 on it holds tail GPUs only."""
    jobs = (RealtimeJob(id="s", priority=5.0, demand=(2, 3, 4, 4, 3, 2, 2, 2), swap_limit=1,
                        current_gpus=(0, 1)),
            BatchJob(id="big", kind="training", priority=1.0, gpus=8, duration_steps=2))
    scenario = Scenario(cluster=Cluster(gpus=12, horizon_steps=8), weights=Weights(),
                        jobs=jobs)
    _, grid = _laid(scenario)
    assert violations(scenario, gridlib.to_ids(scenario, grid)) == []
    held = [set(np.flatnonzero(grid[t] == 0).tolist()) for t in range(8)]
    assert [len(h) for h in held] == [2, 3, 4, 4, 3, 2, 2, 2]  # the curve, no more
    assert held[0] == {0, 1}
    assert all(h <= set(range(8, 12)) for h in held[5:])


def test_the_service_on_the_only_8_gpu_block_leaves_it(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    """12 GPUs: serve-0 (swap limit 1) holds 0-3 and peaks at 6; the other two services
    take GPUs 6-7 at step 1, when running work frees them. Every layer layout leaves a
    service on block 0-7 all day and no 8-GPU job runs (212.45); drifting, the services
    end on 8-11 from step 12 and two of the three 8-GPU jobs run: 275.33, 99.5% of the
    proven optimum."""
    scenario = load_scenario(CASES / "drift_wins.json")
    without, grid = off_and_on(monkeypatch, scenario, fast_module, "DRIFT")
    monkeypatch.setattr(fast_module, "REPLAN_LAYOUTS", True)  # the hot path's default
    hot = gridlib.objective(scenario, fast(scenario))
    assert without == pytest.approx(212.4527, abs=1e-3)
    assert hot == pytest.approx(275.3300, abs=1e-3)
    assert gridlib.objective(scenario, grid) <= hot + 1e-6 <= DRIFT_OPTIMUM + 1e-6


@settings(max_examples=examples(0.5), deadline=None)
@given(scenario=contended_scenarios(max_gpus=12, max_steps=8, max_realtime=4, max_swap=3))
def test_the_drift_layout_and_fast_s_plan_with_it_are_legal(scenario: Scenario) -> None:
    """The drift layout keeps every swap limit and takes free cells only, for realtime
    jobs; fast's plan with it (and the replan layouts at any margin) is legal."""
    base, grid = _laid(scenario)
    assert_realtime_laid(scenario, base, grid)
    plan = fast(scenario, replan_layouts=True)
    assert violations(scenario, gridlib.to_ids(scenario, plan)) == []
    if not scenario.reservations and any(j.current_gpus for j in scenario.realtime_jobs):
        only = fast(scenario, only="drift", replan_layouts=True)
        assert violations(scenario, gridlib.to_ids(scenario, only)) == []


@pytest.mark.skipif(_packc is None, reason="the C extension is not built")
@settings(max_examples=examples(1.0), deadline=None)
@given(scenario=contended_scenarios(max_gpus=12, max_steps=8, max_realtime=4, max_swap=3),
       data=st.data())
def test_the_compiled_drift_layout_is_the_reference(scenario: Scenario,
                                                    data: st.DataObject) -> None:
    """`_packc.drift` against `_drift_layout_py`: the same grid, cell for cell, under
    realtime's own rank and under a drawn rank full of ties (where Python's stable sort,
    first minimum and first maximum decide)."""
    base = gridlib.empty(scenario)
    gridlib.pin_running(scenario, base)
    placer = RealtimePlacer(scenario, base.copy())
    if data.draw(st.booleans(), label="tied rank"):
        placer.rank = np.array(data.draw(st.lists(st.integers(0, 2), min_size=scenario.G,
                                                  max_size=scenario.G)), dtype=np.float64)
    compiled = drift_layout(scenario, base, placer)
    with mock.patch.object(drift_module, "_packc", None):
        assert np.array_equal(compiled, drift_layout(scenario, base, placer))
