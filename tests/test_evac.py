"""Block evacuation (allocator/policies/evac.py) and the hot path's light hop round:
legal, never below the plan without them, and the hand-over one GPU at a time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from allocator import grid as gridlib
from allocator.model import Scenario
from allocator.policies import evac
from allocator.policies import fast as fastlib
from allocator.policies.decoder import Jobs, _packc
from allocator.policies.fast import fast
from allocator.policies.hops import layout as hopping_layout
from allocator.scenario_io import load_scenario, scenario_from_dict
from allocator.validator import violations
from tests.plan_checks import (
    default_and_with,
    legal_and_above_without,
    legal_and_never_worse,
)
from tests.strategies import contended_scenarios, examples, family_scenario, family_scenarios

FAMILY = family_scenarios()  # the generated family (tests/strategies.py)
needs_c = pytest.mark.skipif(_packc is None, reason="the C decoder was not built")
DAY: dict[str, Any] = {"pin_trials": 3, "defer_trials": 3, "hops": 1}
FROM_BEST = Path(__file__).parent / "data" / "quality_cases" / "evac_from_best.json"


@needs_c
@settings(max_examples=examples(0.2), deadline=None)
@given(scenario=FAMILY | contended_scenarios(max_gpus=16, max_steps=16))
def test_evacuation_is_legal_and_never_lowers_the_plan(scenario: Scenario) -> None:
    legal_and_above_without(scenario, "evacuation", ("EVAC_ROUNDS", 0, fastlib.EVAC_ROUNDS),
                            **DAY)


@needs_c
@settings(max_examples=examples(0.3), deadline=None)
@given(scenario=FAMILY | contended_scenarios(max_gpus=16))
def test_the_light_hop_round_is_legal_and_never_lowers_the_hot_path(scenario: Scenario
                                                                     ) -> None:
    """The light rounds (off by default, `hot_hops=2` on) never lower the plan without
    them; plan-day's setting with them is never below either."""
    got = legal_and_never_worse(scenario, "light hops", hot_hops=2)
    assert gridlib.objective(scenario, fast(scenario, hot_hops=2, **DAY)) >= got - 1e-6


@needs_c
@settings(max_examples=examples(0.2), deadline=None)
@given(scenario=FAMILY | contended_scenarios(max_gpus=16))
# the last steps lifted the plan before the evacuation (1252.14 -> 1262.87) past the one
# after it (1256.05, left as it was): the plan before it is now a finalist too
@example(scenario=family_scenario(1548582, 16, 24))
def test_the_light_evacuation_is_legal_and_never_lowers_the_hot_path(scenario: Scenario
                                                                      ) -> None:
    with pytest.MonkeyPatch.context() as mp:  # off, and on at every size up to 16 GPUs
        mp.setattr(fastlib, "HOT_EVAC_MIN_GPUS", 1 << 30)
        plain = gridlib.objective(scenario, fast(scenario))
        mp.setattr(fastlib, "HOT_EVAC_MIN_GPUS", 0)
        grid = fast(scenario)
    assert violations(scenario, gridlib.to_ids(scenario, grid)) == []
    got = gridlib.objective(scenario, grid)
    event("the light evacuation lifted the plan" if got > plain + 1e-6 else "plan unchanged")
    assert got >= plain - 1e-6


@needs_c
@settings(max_examples=examples(0.2), deadline=None)
@given(scenario=FAMILY | contended_scenarios(max_gpus=16))
@example(scenario=family_scenario(202816, 12, 24))
@example(scenario=family_scenario(21050841, 12, 12))
def test_the_runner_ups_rounds_are_legal_and_never_lower_the_plan(scenario: Scenario
                                                                   ) -> None:
    """The hot path's light rounds on a runner-up that leaves realtime less short, and
    plan-day's hops on every construction's plan: legal, never below the plan without.
    The runner-up is forced (any other candidate, shortfall or not), so that drawn
    scenarios, where the check rarely picks one, exercise its rounds. The examples, found
    by randomized runs: another construction's hopped plan won, and the re-cuts then lifted
    the plan without it higher (the last steps now finish both); the runner-up's plan
    displaced the light plan that, rerouted at the end, was the best (it stays a finalist)."""
    def any_other(score: gridlib.Scorer, candidates: list[np.ndarray], won: int
                  ) -> int | None:
        return next((k for k in range(len(candidates)) if k != won), None)

    for constant, options in (("HOT_RUNNER_UP", {}), ("HOP_OTHERS", {"hops": 1})):
        # the runner-up forced in both runs, so only `constant` differs (plan-day's plan has
        # a runner-up's light rounds too); the final reroute stays on, as it runs
        legal_and_above_without(scenario, constant, (constant, False, True),
                                same_both_ways={"_less_short": any_other}, **options)


RUNNER_UP = Path(__file__).parent / "data" / "quality_cases" / "runner_up_wins_8.json"


def test_a_runner_ups_layout_serves_the_dearer_services_first() -> None:
    """Tuning seed 1184 (8 GPUs, one free GPU at the first step, three services): the
    winning layout gives it to the cheapest service and the plan sits below zero; the
    first layout serves a dearer one but loses batch value later, which hops win back.
    The hot path's light rounds on it, windows every other step, lift the plan to 6.67,
    8.62 with the plan they displaced kept for the final reroute; windows at every step
    (up to 8 GPUs, `RUNNER_UP_EVERY_STEP`) and plan-day's hops on every construction's
    plan reach the proven optimum (8.90)."""
    scenario = load_scenario(RUNNER_UP)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fastlib, "HOT_RUNNER_UP", False)
        mp.setattr(fastlib, "HOP_OTHERS", False)
        mp.setattr(fastlib, "REROUTE_LAST", False)  # (its final reroute mends part of it)
        assert gridlib.objective(scenario, fast(scenario)) == pytest.approx(-23.38, abs=0.01)
        assert gridlib.objective(scenario, fast(scenario, hops=2)) == pytest.approx(
            -23.38, abs=0.01)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fastlib, "RUNNER_UP_EVERY_STEP", 0)
        assert gridlib.objective(scenario, fast(scenario)) == pytest.approx(8.62, abs=0.01)
    for options in ({}, {"hops": 2}):
        grid = fast(scenario, **options)
        assert violations(scenario, gridlib.to_ids(scenario, grid)) == []
        assert gridlib.objective(scenario, grid) == pytest.approx(8.90, abs=0.01)


CASES = Path(__file__).parent / "data" / "quality_cases"


@pytest.mark.parametrize(("case", "now", "before"), [
    # Tuning seed 1095 (8 GPUs, one service peaking at 4 GPUs): the stacked layout keeps
    # the service on the 4-GPU block 4-7 all morning; its evacuation to GPU 0 lets the
    # 4-GPU jobs run there: the proven optimum.
    ("light_evac_wins_8.json", 360.53, 354.44),
    # A real replan (Philly week from 2017-11-06, 12 GPUs, hour 36: three services on GPUs
    # 9-11, the 8-block full of long small jobs, 21 queued 4- and 8-GPU jobs): the
    # services sat on the one 4-GPU block outside the 8-block all day; evacuated from step
    # 11, the 4-GPU jobs run there (full's 30-second plan: 494.41).
    ("philly_light_evac_12.json", 483.23, 324.47),
])
@pytest.mark.usefixtures("no_rebuilds", "no_walk")
def test_the_light_evacuation_runs_below_15_gpus(case: str, now: float, before: float
                                                 ) -> None:
    """`before`: the light evacuation kept to 15 GPUs and more, as it was."""
    scenario = load_scenario(CASES / case)
    grid = fast(scenario)
    assert violations(scenario, gridlib.to_ids(scenario, grid)) == []
    assert gridlib.objective(scenario, grid) == pytest.approx(now, abs=0.01)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fastlib, "HOT_EVAC_MIN_GPUS", 15)
        assert gridlib.objective(scenario, fast(scenario)) == pytest.approx(before, abs=0.01)


LIGHT_WINS = Path(__file__).parent / "data" / "quality_cases" / "light_rounds_wins_16.json"


@pytest.mark.usefixtures("no_rebuilds")
def test_the_light_rounds_move_the_services_off_a_block_at_16_gpus() -> None:
    """Tuning seed 1132 (16 GPUs): an 8-GPU job waits for the block three services sit
    on; the light hops and the evacuation after them move the services off it (proven
    optimum 1094.56). Fails with the light rounds kept to 14 GPUs, or without the
    evacuation. (The hand-over shifts take it on: tests/test_handover.py.)"""
    scenario = load_scenario(LIGHT_WINS)
    assert gridlib.objective(scenario, fast(scenario, hot_hops=0)) == pytest.approx(
        987.64, abs=0.01)
    grid = fast(scenario)
    assert violations(scenario, gridlib.to_ids(scenario, grid)) == []
    assert gridlib.objective(scenario, grid) == pytest.approx(1059.57, abs=0.01)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fastlib, "HOT_EVAC_MIN_GPUS", 1 << 30)
        assert gridlib.objective(scenario, fast(scenario)) == pytest.approx(1019.75, abs=0.01)


@needs_c
def test_past_16_gpus_the_evacuation_runs_without_the_hops() -> None:
    """64-GPU tuning seed 1009: with `hops`, fast's step 9 evacuates a block (the hops
    themselves stop at 16 GPUs); kept to 16 GPUs it lifts nothing. (The re-cuts after it
    kept off: they lift both plans a little.)"""
    from benchmarks.bench_quality import large_cases, scenario_for

    scenario = scenario_for(large_cases((1009,), 64, 30)[0])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fastlib, "RECUT_ROUNDS", 0)
        grid = fast(scenario, hops=1)
        assert violations(scenario, gridlib.to_ids(scenario, grid)) == []
        assert gridlib.objective(scenario, grid) == pytest.approx(4161.17, abs=0.01)
        mp.setattr(fastlib, "EVAC_MAX_GPUS", 16)
        assert gridlib.objective(scenario, fast(scenario, hops=1)) == pytest.approx(
            4051.61, abs=0.01)


@needs_c
def test_the_hot_paths_light_evacuation_runs_up_to_64_gpus() -> None:
    """64-GPU tuning seed 1004 (30 jobs): without trials or hops, the light evacuation
    clears a block a large job needs (3324.81 kept to 16 GPUs, 3378.73 with it)."""
    from benchmarks.bench_quality import large_cases, scenario_for

    scenario = scenario_for(large_cases((1004,), 64, 30)[0])
    grid = fast(scenario)
    assert violations(scenario, gridlib.to_ids(scenario, grid)) == []
    assert gridlib.objective(scenario, grid) == pytest.approx(3378.73, abs=0.01)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fastlib, "HOT_EVAC_MAX_GPUS", 16)
        assert gridlib.objective(scenario, fast(scenario)) == pytest.approx(3324.81, abs=0.01)


@needs_c
@settings(max_examples=examples(0.1), deadline=None)
@given(scenario=contended_scenarios(min_gpus=17, max_gpus=40, max_batch=10))
def test_past_16_gpus_the_light_evacuation_is_legal_and_never_lowers_the_plan(
        scenario: Scenario) -> None:
    # (without the cheap pin trials, which start from whichever plan it leaves)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fastlib, "HOT_EVAC_MAX_GPUS", 16)
        plain = gridlib.objective(scenario, fast(scenario, cheap_trials=0))
        mp.setattr(fastlib, "HOT_EVAC_MAX_GPUS", 64)
        grid = fast(scenario, cheap_trials=0)
        assert violations(scenario, gridlib.to_ids(scenario, fast(scenario))) == []
    assert violations(scenario, gridlib.to_ids(scenario, grid)) == []
    got = gridlib.objective(scenario, grid)
    event("the light evacuation lifted the plan" if got > plain + 1e-6 else "plan unchanged")
    assert got >= plain - 1e-6


@needs_c
def test_the_evacuation_starts_from_the_best_plans_layout() -> None:
    """Tuning seed 1197 (8 GPUs): the hop round moves a service where the greedy pass
    gains but the full placement does not; the evacuation, run from the best plan's
    layout rather than the hopped one, clears the block a 4-GPU job needs and reaches the
    proven optimum (105.51; from the hopped layout the plan stayed at 102.38)."""
    scenario = load_scenario(FROM_BEST)
    grid = fast(scenario, hops=1)
    assert violations(scenario, gridlib.to_ids(scenario, grid)) == []
    assert gridlib.objective(scenario, grid) == pytest.approx(105.51, abs=0.01)


def _one_service(limit: int) -> Scenario:
    return scenario_from_dict({"cluster": {"gpus": 8, "horizon_steps": 6},
                               "jobs": [{"id": "s", "kind": "realtime", "priority": 1,
                                         "demand": [2] * 6, "swap_limit": limit}]})


@pytest.mark.parametrize("limit", [1, 2])
def test_a_suffix_evacuation_hands_over_one_gpu_at_a_time(limit: int) -> None:
    # a service on GPUs 2-3 all day; block [0, 4) cleared from step 4 on: each GPU hands
    # over with a step on both, the second earlier (two steps earlier at limit 1)
    scenario = _one_service(limit)
    cells = gridlib.empty(scenario).astype(np.int64)
    cells[:, 2:4] = 0
    out = evac.Evacuation(scenario, Jobs.of(scenario)).apply(cells, (4, 0, 4, True), "low")
    assert out is not None
    assert not (out[4:, :4] == 0).any()  # the block is clear from step 4
    assert violations(scenario, gridlib.to_ids(scenario, out)) == []
    assert ((out == 0).sum(axis=1) >= 2).all()  # the service keeps its two GPUs


def test_a_prefix_evacuation_returns_the_service_after_the_window() -> None:
    scenario = _one_service(1)
    cells = gridlib.empty(scenario).astype(np.int64)
    cells[:, 6:8] = 0
    out = evac.Evacuation(scenario, Jobs.of(scenario)).apply(cells, (4, 4, 2, False), "low")
    assert out is not None
    assert not (out[:2, 4:] == 0).any()  # the top block is clear before step 2
    assert (out[-1, 6:8] == 0).all()  # and the service is back on it at the end
    assert violations(scenario, gridlib.to_ids(scenario, out)) == []


def test_an_evacuation_needs_realtime_in_the_block() -> None:
    scenario = _one_service(1)
    cells = gridlib.empty(scenario).astype(np.int64)
    cells[:, 6:8] = 0
    assert evac.Evacuation(scenario, Jobs.of(scenario)).apply(cells, (4, 0, 3, True),
                                                              "low") is None


@needs_c
def test_a_mutant_that_skips_the_swap_check_breaks_a_limit(monkeypatch) -> None:
    # the search keeps a move only within every swap limit: without that check, the
    # service (swap limit 0) is moved off block 0-3 for the 4-GPU job: an illegal layout
    scenario = scenario_from_dict({
        "cluster": {"gpus": 8, "horizon_steps": 8},
        "jobs": [{"id": "s", "kind": "realtime", "priority": 1, "demand": [1] * 8,
                  "swap_limit": 0, "current_gpus": [1]},
                 {"id": "w", "kind": "training", "priority": 9, "gpus": 4,
                  "duration_steps": 8, "arrival_step": 0},
                 {"id": "r", "kind": "training", "priority": 1, "gpus": 1,
                  "duration_steps": 8, "running": {"first_gpu": 4, "remaining_steps": 8}}]})
    cells = gridlib.empty(scenario).astype(np.int64)
    cells[:, 1] = 0
    cells[:, 4] = 2
    jobs, orders = Jobs.of(scenario), fastlib.value_orders(scenario)
    assert evac.search(scenario, cells, jobs, orders) is None  # the compiled search
    assert evac.search(scenario, cells, jobs, orders, compiled=False) is None
    monkeypatch.setattr(evac, "swaps_hold", lambda scenario, grid: True)
    moved = evac.search(scenario, cells, jobs, orders, compiled=False)  # the reference's
    assert moved is not None
    assert violations(scenario, gridlib.to_ids(scenario, moved)) != []


@needs_c
@settings(max_examples=examples(0.3), deadline=None)
@given(scenario=FAMILY | contended_scenarios(max_gpus=16), one_order=st.booleans())
def test_the_compiled_search_keeps_the_references_layout(scenario: Scenario, one_order: bool
                                                         ) -> None:
    # the same move kept (or none) as the Python search over the Python decoder
    cells = hopping_layout(scenario, fast(scenario)).astype(np.int64)
    jobs, orders = Jobs.of(scenario), fastlib.value_orders(scenario)
    if one_order:
        orders = orders[:1]
    got = evac.search(scenario, cells, jobs, orders)
    want = evac.search(scenario, cells, jobs, orders, compiled=False)
    event("a move kept" if want is not None else "no move kept")
    assert (got is None) == (want is None)
    if got is not None:
        assert np.array_equal(got, want)


@needs_c
@settings(max_examples=examples(0.3), deadline=None)
@given(scenario=FAMILY | contended_scenarios(max_gpus=16))
def test_low_in_c_beside_cost_in_python_keeps_the_references_layout(scenario: Scenario
                                                                     ) -> None:
    # rules ("low", "cost"): the compiled "low" search, then the Python one of "cost" above
    # what it found; the same best move (by value) as the Python search over both rules
    cells = hopping_layout(scenario, fast(scenario)).astype(np.int64)
    jobs, orders = Jobs.of(scenario), fastlib.value_orders(scenario)
    both = ("low", "cost")
    got = evac.search(scenario, cells, jobs, orders, rules=both)
    want = evac.search(scenario, cells, jobs, orders, compiled=False, rules=both)
    event("a move kept" if want is not None else "no move kept")
    assert (got is None) == (want is None)
    if got is not None:
        judge = evac.Evacuation(scenario, jobs)
        distinct = tuple(dict.fromkeys(orders))
        assert judge.value(got, distinct, None) == pytest.approx(
            judge.value(want, distinct, None), rel=1e-12)
        assert violations(scenario, gridlib.to_ids(scenario, got)) == []


# A real replan (the Philly week of 2017-11-06 on 32 GPUs, hour 156,
# benchmarks/real_snapshots.py): services sit on the top block all day, which a running job
# leaves broken until step 19; full's layout moves them into blocks running jobs break
# anyway and reaches 1621.77 (`full(scenario, time_limit=30)`, status "optimal"), fast's
# greedy batch work on that layout 1620.79 (benchmarks/loss_anatomy.py --philly 32).
EVAC_COST_CASE = CASES / "philly_evac_cost_32.json"


@needs_c
def test_the_cost_rule_lifts_the_real_32_gpu_replan_the_low_rule_leaves() -> None:
    scenario = load_scenario(EVAC_COST_CASE)
    plain, grid = default_and_with(scenario, evac_rules=("low", "cost"))
    assert plain < 0.97 * 1621.77  # the case still tells
    assert gridlib.objective(scenario, grid) > 1.025 * plain
