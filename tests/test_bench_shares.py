"""The quality benchmarks' shares (benchmarks/bench_quality.py): a plan at or below zero
beside a positive optimum counts as 0, not dropped (tuning4 s1184: fast -23.38 against an
optimum of 8.90 was left out of the summary, which then read no failure at all)."""

from __future__ import annotations

import pytest

from benchmarks.bench_quality import _share, summary


def test_a_plan_below_zero_counts_as_zero_and_no_reference_as_none() -> None:
    assert _share(-23.38, 8.90) == 0.0
    assert _share(4.45, 8.90) == pytest.approx(0.5)
    assert _share(5.0, 0.0) is None and _share(5.0, -1.0) is None and _share(5.0, None) is None


def test_the_summary_keeps_a_negative_plan_among_the_failures() -> None:
    rows = [{"gpus": 8, "fast": f, "full": 10.0, "optimal": True, "trials": 10.0,
             "lagrangian": 12.0, "plan_bound": 11.0, "gap": 0.0, "fast_ms": 1.0,
             "trials_ms": 9.0} for f in (10.0, 9.9, -3.0)]
    got = summary(rows)["fast_over_optimum"]
    assert got["n"] == 3 and got["min"] == 0.0 and got["below_97"] == 1
    # `gpuplan plan` refines all three (below 98% of their bound of 11) to the trials' 10
    assert summary(rows)["refined_plans"] == 3
    assert summary(rows)["refined_over_optimum"]["min"] == 1.0


def test_the_plan_day_variants_refuse_the_test_seeds() -> None:
    """benchmarks/day_variants.py chooses settings: it runs on tuning sets only."""
    import typer
    from typer.testing import CliRunner

    from benchmarks.day_variants import main

    app = typer.Typer()
    app.command()(main)
    for sets in ("test", "tuning,test", "nosuchset"):
        result = CliRunner().invoke(app, ["--sets", sets])
        assert result.exit_code == 2, result.output


def test_a_plan_past_the_trials_caps_is_refined_by_the_other_runs() -> None:
    """`gpuplan plan` refines a wanting plan past the trials' caps with its other runs
    (allocator/policies/refine.py's candidates); the benchmark's "as refined" share says
    the same."""
    row = {"gpus": 32, "fast": 9.0, "full": 10.0, "optimal": True, "trials": 10.0,
           "lagrangian": 12.0, "plan_bound": 11.0, "gap": 0.0, "fast_ms": 1.0,
           "trials_ms": 9.0, "affordable": False, "refine_runs": {"evacuations": 9.5}}
    assert summary([row])["refined_plans"] == 1
    assert summary([row])["refined_over_optimum"]["min"] == pytest.approx(0.95)
    row["refine_runs"] = {}  # nothing to run: the hot plan stands
    assert summary([row])["refined_plans"] == 0
    assert summary([row])["refined_over_optimum"]["min"] == pytest.approx(0.9)


def test_a_replan_s_refinement_trials_count_as_the_refinement_runs_them() -> None:
    """On a replan `gpuplan plan`'s trials make the replan layouts too, so they are not
    plan-day's trials ("trials"): the refinement's own run ("refine_runs"' "trials") is
    the one its share counts, plan-day's not at all."""
    row = {"gpus": 12, "fast": 8.0, "full": 10.0, "optimal": True, "trials": 8.5,
           "lagrangian": 12.0, "plan_bound": 11.0, "gap": 0.0, "fast_ms": 1.0,
           "trials_ms": 9.0, "affordable": True, "refine_runs": {"replan": 8.2, "trials": 9.7}}
    assert summary([row])["refined_over_optimum"]["min"] == pytest.approx(0.97)
    assert summary([row])["day_trials_over_optimum"]["min"] == pytest.approx(0.85)
    row["refine_runs"] = {"replan": 8.2, "trials": 8.1}  # below plan-day's: still its own
    assert summary([row])["refined_over_optimum"]["min"] == pytest.approx(0.82)
