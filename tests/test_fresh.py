"""The fresh layout on a replan (allocator/policies/fresh.py, `fast.FRESH`): the day's
first layout as if no service held GPUs yet, each service walking onto it from the GPUs
it holds within its swap limit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings

from allocator import grid as gridlib
from allocator.model import Cluster, RealtimeJob, Scenario, Weights
from allocator.policies import fast as fast_module
from allocator.policies import fresh
from allocator.policies.fast import fast
from allocator.policies.realtime import RealtimePlacer
from allocator.scenario_io import load_scenario
from allocator.validator import violations
from tests.flag_cases import off_and_on
from tests.strategies import contended_scenarios, examples

REPLAN = {"replan_layouts": True}  # off on the hot path; `gpuplan plan` refines with them

CASES = Path(__file__).parent / "data" / "quality_cases"
# full's proven optimum of fresh_walk_wins.json (the replan family of
# benchmarks/bench_quality.py, tuning seed 1241: `full(scenario, time_limit=30)` reports
# status "optimal" with this objective).
FRESH_OPTIMUM = 697.5675059474148


def _service(**fields: object) -> Scenario:
    job = RealtimeJob(**{"id": "s", "priority": 5.0, **fields})  # type: ignore[arg-type]
    return Scenario(cluster=Cluster(gpus=6, horizon_steps=5), weights=Weights(), jobs=(job,))


def test_a_walk_keeps_what_both_share_and_hands_over_within_the_limit() -> None:
    """Holding 0, 1, 2 and asked onto 4, 5 (demand 2, limit 1): one change a step, an
    acquire before each release (never short of its demand), and it ends on the layout."""
    scenario = _service(demand=(2,) * 5, swap_limit=1, current_gpus=(0, 1, 2))
    layout = gridlib.empty(scenario)
    layout[:, [4, 5]] = 0
    assert fresh.walk_on(scenario, layout)
    assert violations(scenario, gridlib.to_ids(scenario, layout)) == []
    held = [set(np.flatnonzero(layout[t] == 0).tolist()) for t in range(5)]
    assert held == [{1, 2}, {1, 2, 4}, {2, 4}, {2, 4, 5}, {4, 5}]


def test_a_walk_that_must_drop_more_than_its_limit_fails() -> None:
    """A running job takes two of its current GPUs at step 0: two forced releases, limit
    one: no walk (the candidate is left out)."""
    scenario = _service(demand=(1,) * 5, swap_limit=1, current_gpus=(0, 1, 2))
    layout = gridlib.empty(scenario)
    layout[:, 3] = 0
    layout[0, [0, 1]] = 7  # another job's cells
    assert not fresh.walk_on(scenario, layout)


@pytest.mark.usefixtures("no_rebuilds")
def test_the_walk_lifts_a_replan_the_current_gpus_held_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """14 GPUs: serve-0 (swap limit 1) holds GPUs 7, 9, 10, 11 and needs two; every other
    layout keeps it on them, shrinking a GPU a step, and moves its base layer to the top
    block. The fresh layout walks it onto the GPUs the same day without current GPUs
    would give it: 645.28 -> 690.08 (98.9% of the optimum)."""
    scenario = load_scenario(CASES / "fresh_walk_wins.json")
    without, grid = off_and_on(monkeypatch, scenario, fast_module, "FRESH", **REPLAN)
    found = gridlib.objective(scenario, grid)
    assert without == pytest.approx(645.2802, abs=1e-3)
    assert found == pytest.approx(690.0802, abs=1e-3)
    assert found <= FRESH_OPTIMUM + 1e-6


@settings(max_examples=examples(0.5), deadline=None)
@given(scenario=contended_scenarios(max_gpus=8, max_steps=8, max_realtime=4, max_swap=3))
def test_a_walk_is_legal_or_refused_and_touches_realtime_cells_only(scenario: Scenario
                                                                   ) -> None:
    base = gridlib.empty(scenario)
    gridlib.pin_running(scenario, base)
    layout = base.copy()
    placer = RealtimePlacer(fresh.without_current(scenario), layout)
    placer.place(layout)
    placer.finish(layout)
    placer.refill(layout)
    walked = layout.copy()
    if fresh.walk_on(scenario, walked):
        assert violations(scenario, gridlib.to_ids(scenario, walked)) == []
    realtime = [i for i, j in enumerate(scenario.jobs) if isinstance(j, RealtimeJob)]
    changed = walked != layout
    assert np.isin(walked[changed], [*realtime, gridlib.FREE]).all()
    assert np.isin(layout[changed], [*realtime, gridlib.FREE]).all()
    assert (walked[base >= 0] == base[base >= 0]).all()  # running work untouched
    plan = fast(scenario, **REPLAN)
    assert violations(scenario, gridlib.to_ids(scenario, plan)) == []
