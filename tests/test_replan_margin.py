"""The replan layouts on the hot path, kept only where they win by a margin
(`fast.REPLAN_LAYOUTS`, `fast.REPLAN_MARGIN`).

A replan finds services on the GPUs they held yesterday; the opened and fresh layouts move
them off. On the hot path such a layout's plan wins only where it beats every other
construction's by `REPLAN_MARGIN` of that plan's value; otherwise the plan is the one fast
makes without them, so a plan replanned every hour does not move services for a
forecast's worth of gain. The drift layout's plan has its own margin (`DRIFT_MARGIN`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings

from allocator import grid as gridlib
from allocator import reservations
from allocator.model import BatchJob, Cluster, Scenario, Weights
from allocator.policies import fast as fast_module
from allocator.policies.fast import _by_margin, fast
from allocator.scenario_io import load_scenario
from allocator.validator import violations
from tests.strategies import contended_scenarios, examples

CASES = Path(__file__).parent / "data" / "quality_cases"
# full's best bound on replan_margin_wins.json (benchmarks/bench_quality.py's replan3
# tuning range, seed 1443: `full(scenario, time_limit=60)`, best plan 397.94, gap 0.02%).
MARGIN_BOUND = 398.0099994677321


@pytest.mark.usefixtures("no_rebuilds", "no_walk")
def test_a_service_off_the_only_8_gpu_block_wins_by_the_margin(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """12 GPUs: the service holds four GPUs of block 0-7, the only 8-GPU block, and five
    8-GPU jobs wait. Without the replan layouts none of them runs (132.70); the fresh
    layout walks the service onto GPUs 8-11 and runs them: 374.40, 2.8 times the plan."""
    scenario = load_scenario(CASES / "replan_margin_wins.json")
    monkeypatch.setattr(fast_module, "REROUTE_LAST", False)
    monkeypatch.setattr(fast_module, "FLIP", False)  # (another road: 370.67)
    monkeypatch.setattr(fast_module, "REPLAN_LAYOUTS", False)
    without = gridlib.objective(scenario, fast(scenario))
    monkeypatch.setattr(fast_module, "REPLAN_LAYOUTS", True)
    grid = fast(scenario)
    assert violations(scenario, gridlib.to_ids(scenario, grid)) == []
    found = gridlib.objective(scenario, grid)
    assert without == pytest.approx(132.7024, abs=1e-3)
    assert found == pytest.approx(374.4034, abs=1e-3)
    assert found <= MARGIN_BOUND + 1e-6


def _two_plans() -> tuple[Scenario, list[np.ndarray], list[float]]:
    """Two grids of one scenario: a job started at step 1, and at step 0 (worth more)."""
    jobs = (BatchJob(id="a", kind="training", priority=1.0, gpus=1, duration_steps=6),
            BatchJob(id="b", kind="training", priority=1.0, gpus=1, duration_steps=2))
    scenario = Scenario(cluster=Cluster(gpus=2, horizon_steps=6), weights=Weights(),
                        jobs=jobs)
    late, early = gridlib.empty(scenario), gridlib.empty(scenario)
    for grid in (late, early):
        grid[:, 0] = 0
    late[1:3, 1] = 1
    early[0:2, 1] = 1
    values = [gridlib.objective(scenario, g) for g in (late, early)]
    assert values[1] > values[0]
    return scenario, [late, early], values


@pytest.mark.parametrize("tag", ["opened", "fresh"])
def test_a_replan_layout_wins_only_past_the_margin(tag: str) -> None:
    scenario, grids, values = _two_plans()
    gain = (values[1] - values[0]) / values[0]
    score = gridlib.Scorer(scenario)
    held = reservations.holds(scenario)
    candidates, tags, won, fallback = _by_margin(scenario, score, held, list(grids),
                                                 ["first", tag], gain * 0.99)
    assert tags == ["first", tag] and won == 1 and fallback == 0
    candidates, tags, won, fallback = _by_margin(scenario, score, held, list(grids),
                                                 ["first", tag], gain * 1.01)
    assert tags == ["first"] and won == 0 and candidates[0] is grids[0] and fallback is None
    # the others' best wins outright: no margin asked of it
    candidates, tags, won, fallback = _by_margin(scenario, score, held, list(grids[::-1]),
                                                 ["first", tag], gain * 1.01)
    assert tags == ["first"] and won == 0 and candidates[0] is grids[1] and fallback is None


def test_the_drift_layout_wins_past_its_own_margin(monkeypatch: pytest.MonkeyPatch) -> None:
    """`DRIFT_MARGIN` (0 by default) rules the drift layout's plan, the replan margin the
    opened and fresh ones': a drift plan above the others wins where an opened one with
    the same gain would not; past its own margin too, it loses as they do."""
    scenario, grids, values = _two_plans()
    gain = (values[1] - values[0]) / values[0]
    score = gridlib.Scorer(scenario)
    held = reservations.holds(scenario)
    _, tags, won, fallback = _by_margin(scenario, score, held, list(grids),
                                        ["first", "drift"], gain * 1.01)
    assert tags == ["first", "drift"] and won == 1 and fallback == 0
    _, tags, won, _ = _by_margin(scenario, score, held, list(grids), ["first", "opened"],
                                 gain * 1.01)
    assert tags == ["first"] and won == 0
    monkeypatch.setattr(fast_module, "DRIFT_MARGIN", gain * 1.01)
    _, tags, won, fallback = _by_margin(scenario, score, held, list(grids),
                                        ["first", "drift"], 0.0)
    assert tags == ["first"] and won == 0 and fallback is None


@settings(max_examples=examples(0.5), deadline=None)
@given(scenario=contended_scenarios(max_gpus=10, max_steps=8, max_realtime=3, max_swap=3))
def test_past_any_margin_the_plan_is_the_one_without_the_layouts(scenario: Scenario) -> None:
    """With a margin nothing can reach, the hot path's plan is byte for byte the plan it
    makes without the replan layouts; with the default margin it is legal."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fast_module, "REPLAN_LAYOUTS", False)
        without = fast(scenario)
        patch.setattr(fast_module, "REPLAN_LAYOUTS", True)
        patch.setattr(fast_module, "REPLAN_MARGIN", float("inf"))
        patch.setattr(fast_module, "DRIFT_MARGIN", float("inf"))  # (the drift layout's own)
        unreachable = fast(scenario)
    assert np.array_equal(without, unreachable)
    grid = fast(scenario)
    assert violations(scenario, gridlib.to_ids(scenario, grid)) == []
