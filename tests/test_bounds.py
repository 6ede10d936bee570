"""The relaxations are ceilings: never below the brute-force optimum or any legal plan."""

from __future__ import annotations

import dataclasses
import importlib
import itertools

import numpy as np
import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from allocator import grid as gridlib
from allocator.milp import bounds, model, solvers
from allocator.model import Scenario
from allocator.policies.fast import fast
from allocator.scenario_io import scenario_from_dict
from allocator.scenarios import generate
from allocator.validator import violations
from tests.brute_force import brute_force
from tests.strategies import contended_scenario_dicts, examples, scenarios, tiny_scenarios

full = importlib.import_module("allocator.policies.full").full


def above(bound: float | None, value: float) -> bool:
    return bound is not None and bound >= value - 1e-6 * max(1.0, abs(value))


@settings(max_examples=examples(0.25))
@given(scenario=tiny_scenarios())
def test_both_bounds_are_above_the_brute_force_optimum(scenario) -> None:
    best, _ = brute_force(scenario)
    assert above(bounds.block_capacity(scenario, time_limit=5.0).value, best)
    assert above(bounds.lp_relaxation(scenario, time_limit=5.0).value, best)


@settings(max_examples=examples(0.25))
@given(scenario=scenarios(max_gpus=16, max_steps=12, max_batch=7, max_realtime=2))
def test_block_bound_is_above_fast_and_the_milp(scenario) -> None:
    block = bounds.block_capacity(scenario, time_limit=5.0)
    grid = full(scenario, time_limit=2.0, block_bound=False).grid
    assert above(block.value, gridlib.objective(scenario, grid))


def test_block_bound_is_tighter_than_the_lp_on_a_benchmark_scenario() -> None:
    scenario = generate("mixed-control")
    block = bounds.block_capacity(scenario, time_limit=10.0)
    lp = bounds.lp_relaxation(scenario, time_limit=10.0)
    grid = full(scenario, time_limit=20.0).grid
    got = gridlib.objective(scenario, grid)
    assert above(block.value, got) and above(lp.value, got)
    assert block.value <= lp.value + 1e-9
    assert block.status == "optimal" and lp.status == "optimal"


def test_nothing_to_place_bounds_the_running_jobs_alone() -> None:
    scenario = scenario_from_dict({
        "cluster": {"gpus": 4, "horizon_steps": 3},
        "weights": {"decay": 0.5, "realtime_penalty": 8.0},
        "jobs": [{"id": "r", "kind": "training", "priority": 2, "gpus": 2,
                  "duration_steps": 5, "running": {"first_gpu": 0, "remaining_steps": 2}}],
    })
    assert bounds.block_capacity(scenario).value == pytest.approx(2 * 2 * (1 + 0.5))


def _freed_at_step_one() -> Scenario:
    """4 GPUs: GPU 0 pinned all day, GPU 1 until step 1. A (1 GPU) can only start at step 0
    on GPU 2 or 3, and then holds it; B (2 GPUs, from step 1) needs an aligned pair, and
    [0, 2) keeps its pin, so B needs [2, 4) too. Counted one step at a time both fit."""
    return scenario_from_dict({
        "cluster": {"gpus": 4, "horizon_steps": 3},
        "weights": {"decay": 1.0, "realtime_penalty": 8.0},
        "jobs": [
            {"id": "pin0", "kind": "training", "priority": 1, "gpus": 1, "duration_steps": 3,
             "running": {"first_gpu": 0, "remaining_steps": 3}},
            {"id": "pin1", "kind": "training", "priority": 1, "gpus": 1, "duration_steps": 1,
             "running": {"first_gpu": 1, "remaining_steps": 1}},
            {"id": "a", "kind": "batch_inference", "priority": 2, "gpus": 1, "duration_steps": 3,
             "arrival_step": 0},
            {"id": "b", "kind": "batch_inference", "priority": 3, "gpus": 2, "duration_steps": 2,
             "arrival_step": 1},
        ],
    })


def test_the_freed_rows_see_a_run_that_keeps_its_gpus_past_a_pins_end() -> None:
    scenario = _freed_at_step_one()
    best, _ = brute_force(scenario)
    # B on [2, 4) from step 1 and A on GPU 1 from step 1 (4 + 12 + the pins' 4): 20
    assert best == pytest.approx(20.0)
    assert bounds.block_capacity(scenario).value == pytest.approx(best)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bounds, "FREED_ROWS", False)  # A from step 0 and B: 6 + 12 + 4
        assert bounds.block_capacity(scenario).value == pytest.approx(22.0)


def _frozen_service_between_two_pins() -> Scenario:
    """8 GPUs: GPUs 3 and 7 pinned at step 0 only. The service (4 GPUs, swap limit 0)
    takes four of the other six at step 0 and keeps them, so it touches both 4-blocks all
    day, and B (4 GPUs, from step 1) never runs. Counted one step at a time, B fits from
    step 1; the blocks' cost in GPUs unpinned at step 0 (three each, two left free) says
    not at step 1."""
    return scenario_from_dict({
        "cluster": {"gpus": 8, "horizon_steps": 3},
        "weights": {"decay": 1.0, "realtime_penalty": 8.0},
        "jobs": [
            {"id": "pin3", "kind": "training", "priority": 1, "gpus": 1, "duration_steps": 1,
             "running": {"first_gpu": 3, "remaining_steps": 1}},
            {"id": "pin7", "kind": "training", "priority": 1, "gpus": 1, "duration_steps": 1,
             "running": {"first_gpu": 7, "remaining_steps": 1}},
            {"id": "s", "kind": "realtime", "priority": 1, "demand": [4, 4, 4],
             "swap_limit": 0},
            {"id": "b", "kind": "batch_inference", "priority": 1, "gpus": 4,
             "duration_steps": 2, "arrival_step": 1},
        ],
    })


def test_the_freed_rows_charge_a_block_for_the_gpus_it_held_before_the_pins_end() -> None:
    scenario = _frozen_service_between_two_pins()
    best, _ = brute_force(scenario)
    assert best == pytest.approx(2.0)  # the pins' step; B never runs
    # B from step 2 (its one step in the day: 4) and the pins: the relaxation's 6
    assert bounds.block_capacity(scenario).value == pytest.approx(6.0)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bounds, "FREED_ROWS", False)  # B from step 1: 8 + 2
        assert bounds.block_capacity(scenario).value == pytest.approx(10.0)


def test_the_current_rows_keep_a_frozen_service_on_the_gpus_it_holds_now() -> None:
    """The service holds GPUs 0 and 4 now, one in each 4-block, and may not move (swap
    limit 0): B (4 GPUs) never runs. Counted one step at a time, B fits from step 0."""
    scenario = scenario_from_dict({
        "cluster": {"gpus": 8, "horizon_steps": 2},
        "weights": {"decay": 1.0, "realtime_penalty": 8.0},
        "jobs": [
            {"id": "s", "kind": "realtime", "priority": 1, "demand": [2, 2], "swap_limit": 0,
             "current_gpus": [0, 4]},
            {"id": "b", "kind": "batch_inference", "priority": 1, "gpus": 4,
             "duration_steps": 2, "arrival_step": 0},
        ],
    })
    best, _ = brute_force(scenario)
    assert best == pytest.approx(0.0)
    assert bounds.block_capacity(scenario).value == pytest.approx(4.0)  # B from step 1
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bounds, "CURRENT_ROWS", False)  # B from step 0
        assert bounds.block_capacity(scenario).value == pytest.approx(8.0)


def _holds_gpus_now(d: dict) -> bool:
    return any(j.get("current_gpus") for j in d["jobs"])


@settings(max_examples=examples(0.25))
@given(scenario=contended_scenario_dicts(max_gpus=4, max_steps=3, min_batch=2, max_batch=3,
                                         max_realtime=2, max_swap=2)
       .filter(_holds_gpus_now).map(scenario_from_dict))
def test_the_current_rows_keep_the_relaxation_above_the_brute_force_optimum(scenario) -> None:
    """Services hold GPUs now in every example, so the rows at step 0 are there to break."""
    best, _ = brute_force(scenario)
    assert above(bounds.solve_block(bounds.build_block_model(scenario), time_limit=5.0).value,
                 best)


def _mask(bits: str) -> np.ndarray:
    return np.array([b == "1" for b in bits])


@pytest.mark.parametrize(("before", "after", "k", "lines"), [
    ("0001" "0001", "0000" "0000", 4, [(3, 0)]),  # each block holds 3 GPUs unpinned before
    ("1001" "0000", "0000" "0000", 4, [(2, 0), (4, -2)]),  # a cheap block, then a dear one
    ("1111" "0000", "1000" "0000", 4, [(4, 0)]),  # [0, 4) keeps a pin: only [4, 8) is free
    ("1100" "0000", "0000" "0000", 2, [(2, -2)]),  # [0, 2) costs nothing, then 2 a block
    ("1111" "1111", "0000" "0000", 4, []),  # every block was pinned whole: no charge
])
def test_block_costs_are_the_lines_under_the_cheapest_blocks_cost(before, after, k,
                                                                    lines) -> None:
    assert bounds.block_costs(_mask(before), _mask(after), k) == lines


@settings(max_examples=examples(0.25))
@given(scenario=contended_scenario_dicts(max_gpus=4, max_steps=4, min_batch=2, max_batch=3,
                                         min_running=1, max_running=2, max_realtime=1,
                                         max_swap=2).map(scenario_from_dict))
def test_the_freed_rows_keep_the_relaxation_above_the_brute_force_optimum(scenario) -> None:
    """Running jobs end at random steps here, so the freed rows are there to break."""
    best, _ = brute_force(scenario)
    pinned = model.pinned_cells(scenario)
    event("a pin ends" if (pinned[:-1] & ~pinned[1:]).any() else "no pin ends")
    assert above(bounds.solve_block(bounds.build_block_model(scenario), time_limit=5.0).value,
                 best)


def test_a_no_good_cut_removes_that_set_of_starts_and_its_subsets() -> None:
    scenario = scenario_from_dict({
        "cluster": {"gpus": 2, "horizon_steps": 3},
        "weights": {"decay": 0.9, "realtime_penalty": 8.0},
        "jobs": [{"id": "a", "kind": "training", "priority": 2, "gpus": 2, "duration_steps": 2},
                 {"id": "b", "kind": "training", "priority": 1, "gpus": 1, "duration_steps": 1}],
    })
    model = bounds.build_block_model(scenario)
    first = bounds.solve_block(model)
    model.exclude(first.starts)
    second = bounds.solve_block(model)
    assert second.starts != first.starts
    assert second.value <= first.value + 1e-9
    # Only the cut set's starts allowed: every answer would be a subset of it, so none is.
    model.restrict(first.starts)
    assert bounds.solve_block(model).status == "infeasible"
    model.restrict(None)


def _assert_a_feasible_warm_start(scenario, model, grid) -> None:
    """`grid` as the model's warm start satisfies every row and is worth its objective."""
    values = model.start_values(scenario, grid)
    assert values is not None
    for var in model.prob.variables():
        var.varValue = values[var.name]
    broken = [row.name for row in model.prob.constraints() if not row.valid(1e-9)]
    assert broken == []
    worth = (model.prob.objective.value() or 0.0) + model.fixed
    assert worth == pytest.approx(gridlib.objective(scenario, grid), rel=1e-9, abs=1e-9)


@settings(max_examples=examples(0.25))
@given(scenario=scenarios(max_gpus=16, max_steps=12, max_batch=7, max_realtime=2))
def test_a_legal_grid_is_a_feasible_warm_start_for_the_relaxation(scenario) -> None:
    """The relaxation's warm start (fast's grid) satisfies every row, at the grid's worth."""
    grid = fast(scenario)
    _assert_a_feasible_warm_start(scenario, bounds.build_block_model(scenario), grid)


@pytest.mark.parametrize("gpus,size", [(14, 8), (12, 8), (16, 4), (10, 8), (7, 2), (16, 16)])
def test_zones_cut_the_cluster_into_aligned_blocks(gpus: int, size: int) -> None:
    parts = bounds.zones(gpus, size)
    assert parts[0][0] == 0 and parts[-1][1] == gpus
    for (_, hi), (nxt, _) in itertools.pairwise(parts):
        assert hi == nxt
    for lo, hi in parts:
        k = hi - lo
        assert k <= size and k & (k - 1) == 0 and lo % k == 0


@settings(max_examples=examples(0.25))
@given(scenario=tiny_scenarios())
def test_one_gpu_zones_are_the_exact_model(scenario) -> None:
    """With 1-GPU zones every job takes its exact block and realtime its exact GPUs, with
    the swap limit per GPU: the zone relaxation's optimum is the brute-force optimum."""
    best, _ = brute_force(scenario)
    got = bounds.solve_block(bounds.build_zone_model(scenario, 1), time_limit=10.0)
    assert got.status == "optimal"
    assert got.value == pytest.approx(best, rel=1e-6, abs=1e-6)


@settings(max_examples=examples(0.25))
@given(scenario=tiny_scenarios())
def test_zone_bounds_are_above_the_brute_force_optimum(scenario) -> None:
    best, _ = brute_force(scenario)
    for size in (2, 4):
        assert above(bounds.solve_block(bounds.build_zone_model(scenario, size),
                                        time_limit=5.0).value, best)


_FREED_ROWS_CASE = scenario_from_dict({
    "name": "freed", "cluster": {"gpus": 8, "node_size": 1, "horizon_steps": 2},
    "weights": {"realtime_penalty": 0.0, "decay": 1.0},
    "jobs": [{"id": f"r{g}", "kind": "training", "priority": 1.0, "gpus": n,
              "duration_steps": 1, "running": {"first_gpu": g, "remaining_steps": 1}}
             for g, n in ((0, 1), (2, 1), (4, 4))]
    + [{"id": f"q{i}", "kind": "training", "priority": 1.0, "gpus": n, "duration_steps": d}
       for i, (n, d) in enumerate(((1, 2), (1, 2), (2, 1), (4, 1)))]})


@settings(max_examples=examples(0.25))
@given(scenario=scenarios(max_gpus=16, max_steps=12, max_batch=7, max_realtime=2))
@example(scenario=_FREED_ROWS_CASE)
def test_zone_bound_is_between_full_and_the_block_bound(scenario) -> None:
    """The zone relaxation restricts the block one (never above it) and stays a ceiling.
    The block one without its freed and current rows, which the zone one leaves out
    (`bounds.FREED_ROWS`): with them the block bound can be the lower, e.g. at 8 GPUs with
    1-GPU jobs running on GPUs 0 and 2 for a step, block 15 (the optimum) and zone-4 16."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bounds, "FREED_ROWS", False)
        patch.setattr(bounds, "CURRENT_ROWS", False)
        block = bounds.block_capacity(scenario, time_limit=5.0)
    grid = full(scenario, time_limit=2.0, block_bound=False).grid
    for size in (2, 4, 8):
        zone = bounds.solve_block(bounds.build_zone_model(scenario, size), time_limit=5.0)
        assert above(zone.value, gridlib.objective(scenario, grid))
        if zone.status == "optimal" and block.status == "optimal":
            assert zone.value <= block.value + 1e-6 * max(1.0, abs(block.value))


@settings(max_examples=examples(0.25))
@given(scenario=scenarios(max_gpus=16, max_steps=12, max_batch=7, max_realtime=2))
def test_a_legal_grid_is_a_feasible_warm_start_for_the_zone_relaxation(scenario) -> None:
    grid = fast(scenario)
    for size in (1, 2, 8):
        _assert_a_feasible_warm_start(scenario, bounds.build_zone_model(scenario, size), grid)


@pytest.mark.slow
def test_zones_close_the_block_relaxations_gap_on_a_tuning_scenario() -> None:
    """Tuning seed 1004 (14 GPUs, long 1-GPU jobs, a swap-limit-1 service): the block
    relaxation lets jobs change blocks between steps and stays 1.5% above the optimum
    (481.746, fast's plan when this was written); with 8-GPU zones the bound is the optimum."""
    from benchmarks.bench_quality import cases_for, scenario_for

    case = next(c for c in cases_for("tuning", 16) if c.seed == 1004)
    scenario = scenario_for(case)
    worth = gridlib.objective(scenario, fast(scenario))
    block = bounds.block_capacity(scenario, time_limit=60.0)
    zone = bounds.solve_block(bounds.build_zone_model(scenario, 8), time_limit=60.0)
    assert block.status == "optimal" and zone.status == "optimal"
    assert above(zone.value, worth)
    assert zone.value < block.value * (1 - 1e-2)


def _with_a_twin(scenario):
    """`scenario` with a copy of its first queued batch job (a `twins` group), or None."""
    job = next((j for j in scenario.batch_jobs if not j.running), None)
    if job is None:
        return None
    twin = dataclasses.replace(job, id=f"{job.id}-twin")
    return dataclasses.replace(scenario, jobs=(*scenario.jobs, twin))


@settings(max_examples=examples(0.25))
@given(scenario=tiny_scenarios())
def test_ordering_twins_keeps_the_optimum(scenario) -> None:
    """Identical jobs' starts put in order (model.order_twins) lose no plan's worth: full
    (the MILP orders them) and the exact 1-GPU-zone model with them ordered still meet
    brute force, the block bound with them ordered stays above it."""
    scenario = _with_a_twin(scenario)
    if scenario is None:
        return
    assert model.twins(scenario)
    best, _ = brute_force(scenario)
    assert full(scenario, time_limit=10.0).solve.objective == pytest.approx(best, rel=1e-6,
                                                                           abs=1e-6)
    saved = bounds.BLOCK_TWINS, bounds.ZONE_TWINS
    bounds.BLOCK_TWINS = bounds.ZONE_TWINS = True  # off in `full`, still valid
    try:
        exact = bounds.solve_block(bounds.build_zone_model(scenario, 1), time_limit=10.0)
        assert exact.status == "optimal"
        assert exact.value == pytest.approx(best, rel=1e-6, abs=1e-6)
        assert above(bounds.block_capacity(scenario, time_limit=5.0).value, best)
    finally:
        bounds.BLOCK_TWINS, bounds.ZONE_TWINS = saved


@settings(max_examples=examples(0.25))
@given(scenario=scenarios(max_gpus=16, max_steps=12, max_batch=7, max_realtime=2))
def test_a_canonical_grid_is_legal_and_a_warm_start_with_twins_ordered(scenario) -> None:
    """fast's grid relabelled (model.canonical) is as legal and worth as much, and every
    model with twins ordered takes it as a feasible warm start."""
    scenario = _with_a_twin(scenario)
    if scenario is None:
        return
    grid = fast(scenario)
    same = model.canonical(scenario, grid)
    assert violations(scenario, gridlib.to_ids(scenario, same)) == []
    assert gridlib.objective(scenario, same) == pytest.approx(gridlib.objective(scenario, grid))
    saved = bounds.BLOCK_TWINS, bounds.ZONE_TWINS
    bounds.BLOCK_TWINS = bounds.ZONE_TWINS = True
    try:
        _assert_a_feasible_warm_start(scenario, bounds.build_block_model(scenario), grid)
        _assert_a_feasible_warm_start(scenario, bounds.build_zone_model(scenario, 2), grid)
    finally:
        bounds.BLOCK_TWINS, bounds.ZONE_TWINS = saved
    milp = model.build_model(scenario)
    values = milp.start_values(scenario, grid)
    assert values is not None
    for var in milp.prob.variables():
        var.varValue = values[var.name]
    assert [row.name for row in milp.prob.constraints() if not row.valid(1e-9)] == []


def test_a_cutoff_above_the_relaxation_bounds_it_by_the_cutoff() -> None:
    """solve_block with a cutoff: below the relaxation's optimum the bound is the same;
    above it the bound is the cutoff (HiGHS, having pruned everything, may answer
    "optimal" at a worthless solution far below: that bounds nothing)."""
    scenario = generate("mixed-control")
    block = bounds.block_capacity(scenario, time_limit=10.0)
    assert block.value is not None
    low = bounds.solve_block(bounds.build_block_model(scenario), cutoff=block.value - 5.0)
    assert low.value == pytest.approx(block.value, rel=1e-6)
    high = bounds.solve_block(bounds.build_block_model(scenario), cutoff=block.value + 5.0)
    assert high.value == pytest.approx(block.value + 5.0)


def test_the_swap_closure_trades_starts_between_alike_jobs_from_their_arrival() -> None:
    """Jobs alike in priority, size and duration (kind aside) may take each other's starts,
    never before their own arrival; other jobs keep theirs; running jobs have none."""
    scenario = scenario_from_dict({
        "cluster": {"gpus": 4, "horizon_steps": 6},
        "weights": {"decay": 0.9, "realtime_penalty": 8.0},
        "jobs": [
            {"id": "a", "kind": "training", "priority": 2, "gpus": 1, "duration_steps": 2},
            {"id": "b", "kind": "quantization", "priority": 2, "gpus": 1,
             "duration_steps": 2, "arrival_step": 3},
            {"id": "c", "kind": "training", "priority": 2, "gpus": 2, "duration_steps": 2},
            {"id": "d", "kind": "training", "priority": 2, "gpus": 1, "duration_steps": 2,
             "running": {"first_gpu": 3, "remaining_steps": 1}},
        ],
    })
    assert bounds.swap_closure(scenario, {0: 1, 2: 4}) == {(0, 1), (2, 4)}
    assert bounds.swap_closure(scenario, {0: 4, 1: 3, 2: 0}) == {
        (0, 4), (0, 3), (1, 4), (1, 3), (2, 0)}
    assert bounds.swap_closure(scenario, {0: 5}) == {(0, 5), (1, 5)}


@settings(max_examples=examples(0.25))
@given(scenario=tiny_scenarios(), later=st.integers(min_value=0, max_value=2))
def test_a_cut_on_the_swap_closure_keeps_the_bound_above_the_optimum(scenario, later) -> None:
    """One round of full's cut loop on a scenario with an alike job (a twin when `later`
    is 0, which the MILP orders): the closure's placement is a legal plan, and it or the
    relaxation with the closure cut off is still above the brute-force optimum."""
    job = next((j for j in scenario.batch_jobs if not j.running), None)
    if job is None:
        return
    alike = dataclasses.replace(job, id=f"{job.id}-alike",
                                arrival_step=job.arrival_step + later)
    scenario = dataclasses.replace(scenario, jobs=(*scenario.jobs, alike))
    best, _ = brute_force(scenario)
    relax = bounds.build_block_model(scenario)
    first = bounds.solve_block(relax, time_limit=10.0)
    assert first.status == "optimal"
    pairs = bounds.swap_closure(scenario, first.starts)
    assert set(first.starts.items()) <= pairs
    milp = model.build_model(scenario)
    milp.restrict_starts(pairs)
    placed = solvers.solve_highs(milp.prob, time_limit=10.0, mip_gap=1e-9)
    assert placed.status == "optimal" and placed.bound is not None
    grid = milp.grid(scenario)
    assert violations(scenario, gridlib.to_ids(scenario, grid)) == []
    worth = placed.bound + milp.fixed_value
    assert worth <= best + 1e-6 * max(1.0, abs(best))
    relax.exclude(pairs)
    after = bounds.solve_block(relax, time_limit=10.0)
    ceiling = worth if after.value is None else max(worth, after.value)
    assert above(ceiling, best)


def test_an_interrupted_relaxation_keeps_a_bound_above_its_optimum() -> None:
    """solve_block's `interrupt` (seconds, bound with the running jobs' value included)
    is asked during the solve; when it says stop, the solve stops with a dual bound that
    is still a ceiling, and one that never says stop changes nothing."""
    scenario = generate("training-heavy")
    whole = bounds.solve_block(bounds.build_zone_model(scenario, 4), time_limit=30.0)
    assert whole.status == "optimal" and whole.value is not None
    asked: list[tuple[float, float]] = []

    def stop(seconds: float, bound: float) -> bool:
        asked.append((seconds, bound))
        return True

    cut = bounds.solve_block(bounds.build_zone_model(scenario, 4), time_limit=30.0,
                             interrupt=stop)
    assert asked and all(above(b, whole.value) for _, b in asked)
    assert cut.status == "interrupted" and above(cut.value, whole.value)
    never = bounds.solve_block(bounds.build_zone_model(scenario, 4), time_limit=30.0,
                               interrupt=lambda seconds, bound: False)
    assert never.status == "optimal"
    assert never.value == pytest.approx(whole.value, rel=1e-6)
