"""The Lagrangian bound is a proven ceiling: never below the optimum, whatever the prices."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from allocator import grid as gridlib
from allocator.lagrange import _evaluate, _problem, lagrangian_bound, ratio_line
from allocator.policies.fast import fast
from allocator.scenarios import generate
from tests.brute_force import brute_force
from tests.strategies import examples, scenarios, tiny_scenarios


def above(bound: float, value: float) -> bool:
    return bound >= value - 1e-6 * max(1.0, abs(value))


@settings(max_examples=examples(0.5))
@given(scenario=tiny_scenarios())
def test_bound_is_above_the_brute_force_optimum(scenario) -> None:
    best, _ = brute_force(scenario)
    assert above(lagrangian_bound(scenario).value, best)
    assert above(lagrangian_bound(scenario, lower=best).value, best)


@settings(max_examples=examples(0.5))
@given(scenario=tiny_scenarios(), seed=st.integers(0, 2**32 - 1))
def test_any_nonnegative_prices_give_a_ceiling(scenario, seed) -> None:
    """Weak duality, not the descent, is what makes it valid: random prices too."""
    best, _ = brute_force(scenario)
    p = _problem(scenario)
    rng = np.random.default_rng(seed)
    scale = rng.choice([0.1, 1.0, 10.0, 100.0])
    lam = rng.exponential(scale, p.T) * (rng.random(p.T) < 0.7)
    mu = rng.exponential(scale, (len(p.sizes), p.T)) * (rng.random((len(p.sizes), p.T)) < 0.5)
    assert above(_evaluate(p, lam, mu)[0], best)


@pytest.mark.slow
@settings(max_examples=examples(0.15), deadline=None)
@given(scenario=scenarios(max_gpus=16, max_steps=10, max_batch=6, max_realtime=2))
def test_bound_is_above_the_milp_optimum(scenario) -> None:
    from allocator.policies.full import full

    grid = full(scenario, time_limit=5.0).grid
    assert above(lagrangian_bound(scenario).value, gridlib.objective(scenario, grid))


@settings(max_examples=examples(0.5), deadline=None)
@given(scenario=scenarios(max_gpus=64, max_steps=30, max_batch=12, max_realtime=3))
def test_bound_is_above_fast(scenario) -> None:
    got = gridlib.objective(scenario, fast(scenario))
    assert above(lagrangian_bound(scenario, lower=got).value, got)


def test_realtime_that_leaves_no_whole_block_keeps_the_bound_near_the_optimum() -> None:
    """training-heavy: a service always holds GPUs of the only 8-GPU block, so 8-GPU jobs
    cannot run; without the blocks-spoilt ceiling the bound was 1.8x the optimum (369.18)."""
    s = generate("training-heavy")
    bound = lagrangian_bound(s, lower=gridlib.objective(s, fast(s))).value
    assert 369.18 - 1e-6 <= bound <= 1.05 * 369.18


def test_ratio_line() -> None:
    assert ratio_line(99.4, 100.0) == "within 0.6% of the best possible plan"
    assert ratio_line(-3.0, 5.0) == "upper bound 5.00"


def test_plans_carry_the_bound_where_asked(tmp_path) -> None:
    from typer.testing import CliRunner

    from allocator.plan import make_plan
    from pipelines.cli import build_app

    s = generate("mixed-control")
    assert "bound" not in make_plan(s, "fast").extras  # the library default: off
    body = make_plan(s, "fifo", bound="auto").to_dict()["bound"]
    assert above(body["value"], body["value"] * (1 - body["gap"]))
    assert body["summary"].startswith("within ")
    assert body["method"] in ("lagrangian", "decomposition")
    out = tmp_path / "plan.json"
    runner = CliRunner()
    result = runner.invoke(build_app("plan"), ["plan", "data/scenarios/mixed-control.json",
                                               "--out", str(out)])
    assert result.exit_code == 0 and "of the best possible plan (bound " in result.output
    import json

    plan = json.loads(out.read_text())
    assert plan["bound"]["value"] >= plan["metrics"]["objective"]
    result = runner.invoke(build_app("plan"), ["plan", "data/scenarios/mixed-control.json",
                                               "--no-bound", "--out", str(out)])
    assert "bound" not in json.loads(out.read_text()) and "best possible" not in result.output


def test_auto_skips_the_bound_where_it_would_cost_more_than_the_plan() -> None:
    from allocator.plan import bound_is_cheap
    from benchmarks.bench_scale import ScaleCase, scenario_for

    assert bound_is_cheap(scenario_for(ScaleCase(256, 120, 24)))
    assert not bound_is_cheap(scenario_for(ScaleCase(1024, 1000, 48)))
