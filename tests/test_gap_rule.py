"""The gap rule (`Jobs.gap`, `fast(gap=True)`; a refinement run where `refine.REFINE_GAP`
asks): among the blocks free at a run's earliest start, the one whose free stretch the run
fills most tightly, then the buddy rule.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings

from allocator import grid as gridlib
from allocator.model import BatchJob, Cluster, RealtimeJob, Scenario, Weights
from allocator.plan import make_plan
from allocator.policies import decoder, refine
from allocator.policies import fast as fastmod
from allocator.policies.decoder import Decoder, Jobs
from allocator.policies.fast import fast
from allocator.scenario_io import load_scenario
from allocator.validator import violations
from tests.plan_checks import default_and_with
from tests.strategies import contended_scenarios, examples, family_scenarios

CASES = Path(__file__).parent / "data" / "quality_cases"


def _two_gpus() -> tuple[Scenario, np.ndarray]:
    """GPU 0 busy from step 6, GPU 1 from step 4; one 1-GPU job of 4 steps queued."""
    job = BatchJob(id="four", kind="training", priority=1.0, gpus=1, duration_steps=4)
    scenario = Scenario(cluster=Cluster(gpus=2, horizon_steps=8), weights=Weights(),
                        jobs=(job,))
    busy = np.zeros((8, 2), dtype=bool)
    busy[6:, 0] = busy[4:, 1] = True
    return scenario, busy


@pytest.mark.parametrize("compiled", [
    pytest.param(True, marks=pytest.mark.skipif(decoder._packc is None,
                                                reason="the C decoder was not built")),
    False])
def test_the_run_goes_where_it_fills_the_free_stretch(compiled: bool) -> None:
    """Both GPUs are free over steps 0-3 and neither buddy is busy there, so the buddy
    rule takes the lowest, GPU 0, and leaves holes on both (steps 4-5 on GPU 0, 0-3 on
    GPU 1). The gap rule takes GPU 1, whose free stretch the run fills exactly."""
    scenario, busy = _two_gpus()
    spots = {}
    for gap in (False, True):
        jobs = replace(Jobs.of(scenario), gap=gap)
        placed = Decoder.new(scenario, busy, None, jobs, compiled=compiled)
        placed.pack([0])
        spots[gap] = placed.spots()
    assert spots == {False: {0: (0, 0)}, True: {0: (0, 1)}}


def test_replan_seed_1248_is_lifted_by_the_gap_run() -> None:
    """Replan tuning seed 1248 (14 GPUs; full's proven optimum 171.13): an 8-GPU job waits
    for block 0-7 while 1-GPU runs of 16 steps and a service hold it. By the buddy rule
    the runs of 16 steps are split over both blocks and the job starts at step 17; by the
    gap rule the hot path reaches 166.21, and `gpuplan plan`'s refinement keeps that run
    (97.13% of the optimum, 96.67% without it)."""
    scenario = load_scenario(CASES / "gap_rule_wins.json")
    plain, plan = default_and_with(scenario, gap=True)
    assert plain == pytest.approx(163.2214, abs=1e-3)
    assert gridlib.objective(scenario, plan) == pytest.approx(166.2113, abs=1e-3)
    made = make_plan(scenario, "fast", bound="auto", refine_below=refine.REFINE_BELOW)
    assert made.extras["refined"]["lifted_by"] == "gap"
    assert made.metrics.objective == pytest.approx(166.2113, abs=1e-3)
    assert made.metrics.objective <= 171.1253 + 1e-3


def test_the_refinement_runs_it_unless_asked_already() -> None:
    """With `REFINE_GAP` (the default), one more run on any plan the bound finds wanting;
    none where the plan was made by the gap rule already, none without the knob."""
    service = RealtimeJob(id="s", priority=8.0, demand=(2,) * 6, swap_limit=2)
    scenario = Scenario(cluster=Cluster(gpus=8, horizon_steps=6), weights=Weights(),
                        jobs=(service, BatchJob(id="b", kind="training", priority=1.0,
                                                gpus=4, duration_steps=3)))
    assert refine.candidates(scenario, {})["gap"] == {"gap": True}
    assert "gap" not in refine.candidates(scenario, {"gap": True})
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(refine, "REFINE_GAP", False)
        assert "gap" not in refine.candidates(scenario, {})


@settings(max_examples=examples(0.5), deadline=None)
@given(scenario=contended_scenarios(max_gpus=12, max_steps=8, max_realtime=4, max_swap=3)
       | family_scenarios((8, 12, 16), (8, 24)))
def test_plans_by_the_gap_rule_are_legal(scenario: Scenario) -> None:
    """Whatever the services and running jobs hold, fast's plan by the gap rule keeps every
    constraint."""
    plan = fast(scenario, gap=True)
    assert violations(scenario, gridlib.to_ids(scenario, plan)) == []


def test_with_the_hot_knob_the_hot_path_keeps_the_better_rule(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With `HOT_GAP` (off by default) the hot path makes seed 1248's plan both ways and
    keeps the gap rule's, and the refinement runs no gap run of its own; outside
    `HOT_GAP_MIN_GPUS` to `HOT_GAP_MAX_GPUS` the buddy rule's plan stands."""
    scenario = load_scenario(CASES / "gap_rule_wins.json")  # 14 GPUs
    by_buddy = fast(scenario, gap=False)
    assert np.array_equal(fast(scenario), by_buddy)  # the knob off: the buddy rule alone
    monkeypatch.setattr(fastmod, "HOT_GAP", True)
    assert np.array_equal(fast(scenario), fast(scenario, gap=True))
    assert "gap" not in refine.candidates(scenario, {})
    monkeypatch.setattr(fastmod, "HOT_GAP_MAX_GPUS", scenario.G - 1)
    assert np.array_equal(fast(scenario), by_buddy)


@settings(max_examples=examples(0.3), deadline=None)
@given(scenario=family_scenarios((10, 12, 16), (8, 24)))
def test_the_hot_knob_never_lowers_the_plan(scenario: Scenario) -> None:
    """With `HOT_GAP`, the hot path's plan is legal and worth at least the buddy rule's
    (the better of the two is kept, the buddy rule's on a tie)."""
    by_buddy = fast(scenario, gap=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fastmod, "HOT_GAP", True)
        plan = fast(scenario)
    assert violations(scenario, gridlib.to_ids(scenario, plan)) == []
    score = gridlib.Scorer(scenario)
    assert score(plan) >= score(by_buddy) - 1e-9
