"""Full mode: the MILP's optimum is the brute-force optimum, never below fast, never illegal.

One abstract case per solver (STYLE.md): CBC's copies skip only where PuLP cannot run it.
"""

from __future__ import annotations

import dataclasses
import importlib
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings

from allocator import grid as gridlib
from allocator.milp import search as search_module
from allocator.milp import solvers
from allocator.milp.model import build_model
from allocator.plan import make_plan
from allocator.policies import POLICIES
from allocator.policies.fast import fast
from allocator.policies.full import REFINED_FLOOR_MIN_SECONDS, WARM_PIN_TRIALS
from allocator.policies.refine import REFINE_BELOW, candidates
from allocator.result import SolveReport
from allocator.scenario_io import load_scenario, scenario_from_dict
from allocator.scenarios import generate
from allocator.validator import compute_metrics, violations
from tests.brute_force import brute_force
from tests.strategies import examples, scenarios, tiny_scenarios

# `allocator.policies.full` is also the name of the policy function: take the module.
full_module = importlib.import_module("allocator.policies.full")
full = full_module.full


def close(a: float, b: float, rel: float = 1e-6) -> bool:
    return abs(a - b) <= rel * max(1.0, abs(a), abs(b))


def objective(scenario, grid: np.ndarray) -> float:
    return compute_metrics(scenario, gridlib.to_ids(scenario, grid)).objective


def legal(scenario, grid: np.ndarray) -> bool:
    return violations(scenario, gridlib.to_ids(scenario, grid)) == []


# Hand-made tiny cases where fast's greedy choices are not optimal or the rules bite:
# an aligned pair blocked by a single, a realtime job whose swap limit forces holding
# extra GPUs, a running job, a late arrival and a job that runs past the horizon.
TINY = {
    "pair-vs-singles": {
        "cluster": {"gpus": 2, "horizon_steps": 3},
        "weights": {"decay": 0.9, "realtime_penalty": 8.0},
        "jobs": [
            {"id": "s1", "kind": "training", "priority": 1, "gpus": 1, "duration_steps": 2},
            {"id": "pair", "kind": "training", "priority": 3, "gpus": 2, "duration_steps": 3},
            {"id": "s2", "kind": "quantization", "priority": 2, "gpus": 1,
             "duration_steps": 1, "arrival_step": 1},
        ],
    },
    "swap-limited-realtime": {
        "cluster": {"gpus": 4, "horizon_steps": 4},
        "weights": {"decay": 0.97, "realtime_penalty": 8.0},
        "jobs": [
            {"id": "chat", "kind": "realtime", "priority": 2, "demand": [1, 3, 1, 3],
             "swap_limit": 1, "current_gpus": [3]},
            {"id": "sft", "kind": "training", "priority": 5, "gpus": 2, "duration_steps": 4},
        ],
    },
    "running-and-late": {
        "cluster": {"gpus": 4, "horizon_steps": 4},
        "weights": {"decay": 1.0, "realtime_penalty": 5.0},
        "jobs": [
            {"id": "old", "kind": "training", "priority": 1, "gpus": 2, "duration_steps": 4,
             "running": {"first_gpu": 2, "remaining_steps": 2}},
            {"id": "big", "kind": "training", "priority": 4, "gpus": 4, "duration_steps": 3,
             "arrival_step": 1},
            {"id": "q", "kind": "quantization", "priority": 2, "gpus": 1, "duration_steps": 6},
        ],
    },
}


class SolverCase:
    """Every check, once per solver; subclasses name the solver and say if it is here."""

    solver = ""

    @pytest.fixture(autouse=True)
    def _needs_solver(self) -> None:
        if not solvers.solver_available(self.solver):
            pytest.skip(f"{self.solver} is not available to PuLP here")

    @pytest.mark.parametrize("name", sorted(TINY))
    def test_tiny_optimum_is_the_brute_force_optimum(self, name: str) -> None:
        scenario = scenario_from_dict(TINY[name])
        best, _ = brute_force(scenario)
        result = full(scenario, solver=self.solver, time_limit=10.0, mip_gap=1e-9)
        grid, report = result.grid, result.solve
        assert legal(scenario, grid)
        assert report.status == "optimal", report
        assert close(objective(scenario, grid), best)
        assert report.best_bound >= best - 1e-6 * max(1.0, abs(best))

    def test_benchmark_scenario_is_solved_and_never_below_fast(self) -> None:
        scenario = generate("mixed-control")
        result = full(scenario, solver=self.solver, time_limit=20.0)
        grid, report = result.grid, result.solve
        assert legal(scenario, grid)
        assert objective(scenario, grid) >= objective(scenario, fast(scenario)) - 1e-9
        assert close(report.objective, objective(scenario, grid))
        assert report.best_bound >= report.objective - 1e-6 * abs(report.objective)
        if self.solver == "highs":  # CBC's speed on a loaded 2-core machine is no promise
            assert report.status == "optimal" and report.gap <= 1e-4, report


class TestHiGHS(SolverCase):
    solver = "highs"

    @pytest.mark.parametrize("name", sorted(TINY))
    def test_the_milp_alone_proves_the_optimum(self, name: str) -> None:
        """Without the block-capacity shortcut the MILP must reach and prove it itself."""
        scenario = scenario_from_dict(TINY[name])
        best, _ = brute_force(scenario)
        result = full(scenario, time_limit=10.0, mip_gap=1e-9, block_bound=False)
        grid, report = result.grid, result.solve
        assert report.status == "optimal"
        assert close(objective(scenario, grid), best)


class TestCBC(SolverCase):
    solver = "cbc"


@pytest.mark.slow
@settings(max_examples=examples(0.25))
@given(scenario=tiny_scenarios())
def test_random_tiny_optimum_is_the_brute_force_optimum(scenario) -> None:
    best, _ = brute_force(scenario)
    for block_bound in (True, False):
        result = full(scenario, time_limit=10.0, mip_gap=1e-9, block_bound=block_bound)
        grid, report = result.grid, result.solve
        assert legal(scenario, grid)
        assert report.status == "optimal", report
        assert close(objective(scenario, grid), best), (block_bound, report)


@settings(max_examples=examples(0.25))
@given(scenario=scenarios(max_gpus=8, max_steps=8, max_batch=5, max_realtime=2))
def test_random_small_full_is_legal_and_never_below_fast(scenario) -> None:
    result = full(scenario, time_limit=REFINED_FLOOR_MIN_SECONDS)
    grid, report = result.grid, result.solve
    assert legal(scenario, grid)
    got = objective(scenario, grid)
    assert got >= objective(scenario, fast(scenario)) - 1e-9 * max(1.0, abs(got))
    # nor below the plan `gpuplan plan --policy fast` gives, refined where its bound says so
    refined = make_plan(scenario, "fast", bound="auto", refine_below=REFINE_BELOW)
    assert got >= refined.metrics.objective - 1e-9 * max(1.0, abs(got))
    assert close(report.objective, got)
    if report.best_bound is not None:
        assert report.best_bound >= got - 1e-6 * max(1.0, abs(got))


@settings(max_examples=examples(1.0))
@given(scenario=scenarios(max_gpus=16, max_steps=12, max_batch=8, max_realtime=3))
def test_the_refined_plan_is_the_best_of_fast_and_the_refinements(scenario) -> None:
    """No MILP: the floor is legal and at least each run it chooses among."""
    grid = full_module.refined_plan(scenario)
    assert legal(scenario, grid)
    got = objective(scenario, grid)
    tol = 1e-9 * max(1.0, abs(got))
    for options in [{}, *candidates(scenario, {}).values()]:
        assert got >= objective(scenario, fast(scenario, **options)) - tol, options


@pytest.mark.slow
@settings(max_examples=examples(0.25))
@given(scenario=tiny_scenarios())
def test_a_floor_at_the_optimum_is_proven_and_bounds_stay_true(scenario) -> None:
    """The floor counts as the incumbent mid-search (the search stops where it meets a
    target, and cutoffs prune below it): with the optimum itself as the floor, full ends
    there, and every bound it reports is still above the optimum."""
    best, ids = brute_force(scenario)
    optimum = gridlib.from_ids(scenario, ids)
    assert close(objective(scenario, optimum), best)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(full_module, "refined_plan", lambda _: optimum.copy())
        result = full(scenario, time_limit=REFINED_FLOOR_MIN_SECONDS, mip_gap=1e-9)
    grid, report = result.grid, result.solve
    assert legal(scenario, grid)
    assert close(objective(scenario, grid), best), report
    if report.best_bound is not None:
        assert report.best_bound >= best - 1e-6 * max(1.0, abs(best)), report
    assert report.status == "optimal", report


def test_registered_and_reported_in_the_plan() -> None:
    assert POLICIES["full"] is full
    scenario = scenario_from_dict(TINY["pair-vs-singles"])
    body = make_plan(scenario, "full", time_limit=5.0, lp_bound=True).to_dict()
    report = body["solve"]
    for key in ("status", "objective", "best_bound", "gap", "solve_seconds", "improved_fast",
                "lp_bound", "solver", "warnings"):
        assert key in report
    assert close(report["objective"], body["metrics"]["objective"])
    assert report["lp_bound"] >= report["objective"] - 1e-6


def test_the_solve_report_is_typed() -> None:
    """full returns a PolicyResult; the plan carries its SolveReport; the JSON is its dict."""
    scenario = scenario_from_dict(TINY["pair-vs-singles"])
    result = full(scenario, time_limit=5.0)
    assert isinstance(result.solve, SolveReport)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.solve.status = "edited"  # type: ignore[misc]
    assert result.extras() == {"solve": result.solve.as_dict()}
    plan = make_plan(scenario, "full", time_limit=5.0)
    assert plan.solve is not None and plan.solve.status == "optimal"
    assert plan.to_dict()["solve"] == plan.solve.as_dict()
    assert list(plan.to_dict()["solve"])[:3] == ["solver", "status", "objective"]
    assert make_plan(scenario, "fast").solve is None


# -- a solver that is missing, fails or runs out of time: the fast plan, with a warning --

@pytest.fixture
def scenario():
    return generate("training-heavy")


def warm_start(scenario, time_limit: float = 30.0):
    """fast's best plan at this time limit (what every fallback returns): its pin trials'
    plan, or from REFINED_FLOOR_MIN_SECONDS the refined plan where that is better."""
    pinned = fast(scenario, pin_trials=WARM_PIN_TRIALS)
    if time_limit < REFINED_FLOOR_MIN_SECONDS:
        return pinned
    refined = full_module.refined_plan(scenario)
    return refined if objective(scenario, refined) > objective(scenario, pinned) else pinned


def test_missing_solver_gives_fast_with_a_warning(monkeypatch, scenario) -> None:
    monkeypatch.setattr(solvers.pulp.HiGHS, "available", lambda self: False)
    result = full(scenario)
    grid, report = result.grid, result.solve
    assert np.array_equal(grid, warm_start(scenario))
    assert report.status == "no_solver"
    assert "not available" in report.warnings[0]


def test_unknown_solver_gives_fast_with_a_warning(scenario) -> None:
    result = full(scenario, solver="gurobi-please")
    grid, report = result.grid, result.solve
    assert np.array_equal(grid, warm_start(scenario))
    assert "unknown solver" in report.warnings[0]


def test_timeout_without_incumbent_gives_fast_with_a_warning(monkeypatch, scenario) -> None:
    def nothing(*args, **kwargs):
        return solvers.Solve("time_limit", False, None, None, 0.0)

    monkeypatch.setattr(search_module, "run_solver", nothing)
    result = full(scenario, time_limit=30.0)  # the solver is mocked: no real wait
    grid, report = result.grid, result.solve
    assert np.array_equal(grid, warm_start(scenario))
    assert any("no solution" in w for w in report.warnings)


def test_solver_crash_gives_fast_with_a_warning(monkeypatch, scenario) -> None:
    def boom(self, lp):
        raise RuntimeError("solver exploded")

    monkeypatch.setattr(solvers._HiGHS, "actualSolve", boom)
    result = full(scenario, time_limit=2.0, block_bound=False)
    grid, report = result.grid, result.solve
    assert np.array_equal(grid, warm_start(scenario, 2.0))
    assert np.array_equal(grid, fast(scenario, pin_trials=WARM_PIN_TRIALS))
    assert report.warnings


def test_real_zero_time_limit_gives_fast_with_a_warning(scenario) -> None:
    result = full(scenario, time_limit=0.0, block_bound=False, warm_start=False)
    grid, report = result.grid, result.solve
    assert legal(scenario, grid)
    assert objective(scenario, grid) >= objective(scenario, fast(scenario)) - 1e-9
    assert report.warnings


def test_a_claimed_objective_is_recomputed_and_resolved_cold(monkeypatch) -> None:
    """The HiGHS pitfall (docs/sources.md): a warm start claims more than the solution returned."""
    scenario = scenario_from_dict(TINY["swap-limited-realtime"])
    real = search_module.run_solver
    calls = []

    def inflated(name, prob, **kwargs):
        result = real(name, prob, **kwargs)
        calls.append(kwargs["start"] is not None)
        if kwargs["start"] is not None and result.objective is not None:
            result.objective += 100.0  # a claim the returned solution cannot back
        return result

    monkeypatch.setattr(search_module, "run_solver", inflated)
    best, _ = brute_force(scenario)
    result = full(scenario, time_limit=10.0, mip_gap=1e-9, block_bound=False)
    grid, report = result.grid, result.solve
    assert calls[:2] == [True, False]
    assert any("re-solved without the warm start" in w for w in report.warnings)
    assert legal(scenario, grid) and close(objective(scenario, grid), best)


def test_windows_cover_the_cluster_top_first() -> None:
    spans = search_module.windows(64)
    assert spans[0] == (48, 64) and spans[-1] == (0, 16) and len(spans) == 7
    assert all(hi - lo == 16 and lo % 8 == 0 for lo, hi in spans)
    assert search_module.windows(32) == [(16, 32), (8, 24), (0, 16)]
    assert search_module.windows(8) == []


@pytest.mark.slow
def test_large_cluster_windows_keep_the_plan_legal_and_never_below_fast() -> None:
    """At 32+ GPUs the MILP works window by window; every window's plan is checked."""
    from allocator.scenarios import Spec, build

    scenario = build("wide", Spec(gpus=32, jobs=14, realtime=2, running=2),
                     np.random.default_rng(3))
    result = full(scenario, time_limit=8.0)
    grid, report = result.grid, result.solve
    assert legal(scenario, grid)
    assert objective(scenario, grid) >= objective(scenario, fast(scenario)) - 1e-9
    assert report.status == "optimal" or report.warnings


@pytest.mark.parametrize("axis, lo, hi", [("gpus", 4, 8), ("steps", 2, 6)])
def test_a_window_solve_keeps_the_rest_and_never_loses(axis: str, lo: int, hi: int) -> None:
    """One neighbourhood: outside the window the incumbent stays, the plan stays legal."""
    scenario = generate("training-heavy")
    model = build_model(scenario)
    start = fast(scenario)
    search = search_module.Search(scenario, model, "highs", 1e-4, time.perf_counter() + 20.0,
                                 start, objective(scenario, start), [])
    search_module.free_window(model, scenario, start, lo, hi, axis)
    search.attempt(10.0, start, None, restricted=True)
    assert legal(scenario, search.grid)
    assert search.objective >= objective(scenario, start) - 1e-9
    outside = np.ones_like(start, dtype=bool)
    if axis == "gpus":
        outside[:, lo:hi] = False
    else:
        outside[lo:hi, :] = False
    # Jobs move only if wholly inside the window, realtime only inside it: outside stays.
    assert np.array_equal(search.grid[outside], start[outside])


@pytest.mark.slow
@settings(max_examples=examples(0.25))
@given(scenario=tiny_scenarios())
def test_the_zone_path_proves_only_the_brute_force_optimum(scenario) -> None:
    """With 1-GPU zones (exact) the zone relaxation runs whenever the block starts fall
    short; whatever it proves must be the true optimum, and the plan stays legal."""
    best, _ = brute_force(scenario)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(search_module, "ZONE_GPUS", 1)
        result = full(scenario, time_limit=10.0, mip_gap=1e-9)
    grid, report = result.grid, result.solve
    assert legal(scenario, grid)
    assert report.status == "optimal", report
    assert close(objective(scenario, grid), best), report
    assert report.best_bound >= best - 1e-6 * max(1.0, abs(best))


def test_zones_are_half_the_cluster_up_to_eight_gpus() -> None:
    assert [search_module.zone_gpus(g) for g in (2, 4, 8, 10, 16, 31)] == [4, 4, 4, 8, 8, 8]


@pytest.mark.slow
@pytest.mark.parametrize(("setting", "cores", "parallel"),
                         [(False, 2, False), (True, 1, True), (None, 1, False), (None, 2, True)])
def test_an_eight_gpu_cluster_is_proven_through_zones_of_four(setting: bool | None, cores: int,
                                                              parallel: bool) -> None:
    """Tuning seed 1051 (8 GPUs): the block relaxation's first starts fall short, and the
    zone relaxation (zones of 4) gives the bound the plan meets; with the block relaxation
    alone it took 22 no-good cuts. The caps are lifted: the zones take about 3 s here, and
    a slow machine (or a sanitizer build, ten times slower) must not make this a test of
    its speed. On a thread of their own the zones run beside the block relaxation's cuts,
    so how many cuts are made by the time they answer depends on the machine. Left to
    itself (`PARALLEL_ZONES = None`), full puts them there only with two cores or more."""
    pytest.importorskip("highspy")
    scenario = load_scenario(Path(__file__).parent / "data" / "quality_cases" /
                             "zones_at_8_gpus.json")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(search_module, "ZONE_SECONDS", 100.0)
        patch.setattr(search_module, "SOLVE_CAP_SECONDS", 100.0)
        patch.setattr(search_module, "PARALLEL_ZONES", setting)  # None: by the cores
        patch.setattr(search_module, "usable_cores", lambda: cores)
        result = full(scenario, time_limit=300.0)
    report = result.solve
    assert legal(scenario, result.grid)
    assert report.status == "optimal", report
    assert "zone_seconds" in report.phases, report.phases
    assert ("zone_wait" in report.phases) == parallel, report.phases
    if not parallel:
        assert report.phases["cuts"] <= 2, report.phases
    assert not [t for t in threading.enumerate() if t.name == "gpuplan-zones"]  # joined


@pytest.mark.parametrize("beside", [True, False])
def test_the_whole_milp_beside_the_cuts_proves_what_they_leave_open(beside: bool) -> None:
    """Replan tuning seed 1275 (10 GPUs): the relaxation's first starts fall short, and its
    no-good cuts crawl (123 in 102 s do not close it at a 120 s limit), but the whole MILP
    proves the plan optimal in seconds. On a thread of its own once the cuts stall, it
    ends the solve with its own bound, and its thread is gone. Without it, the old order:
    cuts to CUT_SHARE, then the whole MILP on the same thread."""
    pytest.importorskip("highspy")
    scenario = load_scenario(Path(__file__).parent / "data" / "quality_cases" /
                             "milp_beside_proves.json")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(search_module, "MILP_BESIDE", beside)
        result = full(scenario, time_limit=120.0 if beside else 5.0)
    report = result.solve
    assert legal(scenario, result.grid)
    assert ("milp_beside" in report.phases) == beside, report.phases
    if beside:
        assert report.status == "optimal", report
        assert report.proof == "the MILP's own bound", report
        assert report.phases["cuts"] >= search_module.MILP_BESIDE_CUTS, report.phases
    assert_milp_threads_end()


def test_a_failed_milp_beside_is_a_warning_not_a_crash() -> None:
    """The MILP beside the cuts fails (here: building its model): full ends as if it had
    not run, with a warning, on a legal plan."""
    pytest.importorskip("highspy")
    scenario = load_scenario(Path(__file__).parent / "data" / "quality_cases" /
                             "milp_beside_proves.json")
    real = search_module.build_model

    def failing(scenario):
        if threading.current_thread().name == "gpuplan-milp":
            raise RuntimeError("out of memory")
        return real(scenario)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(search_module, "MILP_BESIDE", True)
        patch.setattr(search_module, "MILP_BESIDE_CUTS", 1)
        patch.setattr(search_module, "build_model", failing)
        result = full(scenario, time_limit=6.0)
    report = result.solve
    assert legal(scenario, result.grid)
    assert "milp_beside_from" in report.phases and "milp_beside" not in report.phases
    assert any("beside the cuts failed (out of memory)" in w for w in report.warnings)
    assert_milp_threads_end()


def assert_milp_threads_end() -> None:
    """A MILP left running beside (the cuts proved first, and HiGHS had not yet reached an
    interrupt point) ends on its own: at its first interrupt point or its time limit."""
    for thread in threading.enumerate():
        if thread.name == "gpuplan-milp":
            thread.join(60.0)
            assert not thread.is_alive()


def full_legal_above_fast(scenario, **knobs) -> tuple:
    """full for 3 s with allocator.milp.search's `knobs` set: its report and objective,
    once its plan is checked legal and never below fast's."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in knobs.items():
            patch.setattr(search_module, name, value)
        result = full(scenario, time_limit=3.0)
    assert legal(scenario, result.grid)
    got = objective(scenario, result.grid)
    assert got >= objective(scenario, fast(scenario)) - 1e-9 * max(1.0, abs(got))
    return result.solve, got


@settings(max_examples=examples(0.25))
@given(scenario=scenarios(max_gpus=16, max_steps=10, max_batch=7, max_realtime=2))
def test_random_small_full_with_zones_is_legal_and_bounded(scenario) -> None:
    """2-GPU zones and cuts that prune below the incumbent: still legal, never below fast,
    and the reported bound is above a plan found without any of it."""
    report, got = full_legal_above_fast(scenario, ZONE_GPUS=2)
    # nor below the plan `gpuplan plan --policy fast` gives, refined where its bound says so
    refined = make_plan(scenario, "fast", bound="auto", refine_below=REFINE_BELOW)
    assert got >= refined.metrics.objective - 1e-9 * max(1.0, abs(got))
    plain = objective(scenario, full(scenario, time_limit=3.0, block_bound=False).grid)
    if report.best_bound is not None:
        assert report.best_bound >= max(got, plain) - 1e-6 * max(1.0, abs(got))


@settings(max_examples=examples(0.25))
@given(scenario=scenarios(max_gpus=16, max_steps=10, max_batch=7, max_realtime=2))
def test_random_small_full_with_the_milp_beside_is_legal_and_bounded(scenario) -> None:
    """The whole MILP on a thread beside the cuts from the first cut (forced on, whatever
    the cores): still legal and never below fast; the bound it reports holds over a plan
    found without it; and its thread ends on its own."""
    report, got = full_legal_above_fast(scenario, MILP_BESIDE=True, MILP_BESIDE_CUTS=1,
                                        ZONE_GPUS=2)
    assert_milp_threads_end()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(search_module, "MILP_BESIDE", False)
        plain = objective(scenario, full(scenario, time_limit=3.0).grid)
    if report.best_bound is not None:
        assert report.best_bound >= max(got, plain) - 1e-6 * max(1.0, abs(got))


def test_a_cutoff_above_every_solution_is_infeasible_and_at_the_optimum_finds_it() -> None:
    import pulp

    prob = pulp.LpProblem("cutoff", pulp.LpMaximize)
    x, y = prob.add_variable("x", cat="Binary"), prob.add_variable("y", cat="Binary")
    prob += x + 2 * y
    prob += x + y <= 1
    assert solvers.solve_highs(prob, time_limit=5.0, cutoff=2.5).status == "infeasible"
    found = solvers.solve_highs(prob, time_limit=5.0, cutoff=2.0)
    assert found.status == "optimal" and close(found.objective, 2.0)


def test_a_solve_beside_hands_back_its_answer_or_its_error() -> None:
    beside = search_module.Beside(lambda stop: 41 + (not stop.is_set()), "gpuplan-test")
    assert beside.answer() == 42

    def fails(_stop: threading.Event) -> int:
        raise ValueError("broken model")

    with pytest.raises(ValueError, match="broken model"):
        search_module.Beside(fails, "gpuplan-test").answer()


@pytest.mark.slow
def test_a_zone_solve_beside_stops_when_told() -> None:
    """The zone relaxation of the 8-GPU case takes seconds; told to stop at once, it ends
    at HiGHS's first interrupt point with a bound that still holds (at or above the
    relaxation's optimum), and its thread is gone."""
    pytest.importorskip("highspy")
    from allocator.milp import bounds

    scenario = load_scenario(Path(__file__).parent / "data" / "quality_cases" /
                             "zones_at_8_gpus.json")
    zone = bounds.build_zone_model(scenario, 4)
    optimum = bounds.solve_block(zone, time_limit=300.0).value

    def solve(stop: threading.Event) -> bounds.Bound:
        return bounds.solve_block(bounds.build_zone_model(scenario, 4), time_limit=300.0,
                                  interrupt=lambda _seconds, _bound: stop.is_set())

    beside = search_module.Beside(solve, "gpuplan-test")
    beside.cancel()
    got = beside.answer()
    assert not beside.running()
    assert got.status == "interrupted", got
    assert got.value is None or got.value >= optimum - 1e-6 * max(1.0, abs(optimum))


def test_full_places_start_sets_with_place_options(monkeypatch: pytest.MonkeyPatch) -> None:
    """Below LNS_MIN_GPUS the relaxation's start sets are placed with PLACE_OPTIONS (no
    search restarts); other solves keep HiGHS's defaults."""
    seen: list[dict | None] = []
    real = search_module.run_solver

    def spy(*args, **kwargs):
        seen.append(kwargs.get("options"))
        return real(*args, **kwargs)

    monkeypatch.setattr(search_module, "run_solver", spy)
    scenario = generate("training-heavy")
    assert scenario.G < search_module.LNS_MIN_GPUS
    result = full(scenario, time_limit=10.0)
    assert legal(scenario, result.grid)
    assert search_module.PLACE_OPTIONS in seen
    assert set(map(repr, seen)) <= {repr(search_module.PLACE_OPTIONS), repr(None)}
