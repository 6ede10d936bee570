"""`gpuplan explain`: the reason names the jobs that hold the block, and every counterfactual
start equals what an independent re-plan of the changed scenario gives."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

from typer.testing import CliRunner

from allocator.explain import explain
from allocator.plan import make_plan
from allocator.scenario_io import load_scenario, scenario_from_dict
from pipelines.cli import build_app

SCENARIOS = Path(__file__).resolve().parents[1] / "data" / "scenarios"

WAITING = {
    "cluster": {"gpus": 4, "horizon_steps": 8},
    "jobs": [
        {"id": "run", "kind": "training", "priority": 1, "gpus": 2, "duration_steps": 9,
         "running": {"first_gpu": 0, "remaining_steps": 5}},
        {"id": "hog", "kind": "training", "priority": 9, "gpus": 2, "duration_steps": 6},
        {"id": "late", "kind": "training", "priority": 1, "gpus": 4, "duration_steps": 3},
    ],
}


def _replanned(scenario, policy: str, job_id: str) -> int | None:
    got = make_plan(scenario, policy).starts().get(job_id)
    return None if got is None else got["start"]


def _job(scenario, job_id: str, **changes):
    return replace(scenario, jobs=tuple(replace(j, **changes) if j.id == job_id else j
                                        for j in scenario.jobs))


def test_the_reason_names_the_holders_and_each_change_is_a_real_replan() -> None:
    scenario = scenario_from_dict(WAITING)
    plan = make_plan(scenario, "fast")
    result = explain(scenario, plan.grid, "fast", "late")
    assert result.start == plan.starts()["late"]["start"] == 6
    assert {h.job for h in result.holders} >= {"run", "hog"}
    assert "run (running, until step 5)" in result.reason
    by_what = {c.what: c.start for c in result.changes}
    assert by_what["2 GPUs instead of 4"] == _replanned(_job(scenario, "late", gpus=2),
                                                        "fast", "late")
    assert by_what["2 steps instead of 3"] == _replanned(
        _job(scenario, "late", duration_steps=2), "fast", "late")
    assert by_what["priority 18 instead of 1"] == _replanned(
        _job(scenario, "late", priority=18), "fast", "late")
    assert by_what["hog held back until step 6"] == _replanned(
        _job(scenario, "hog", arrival_step=6), "fast", "late")
    # Two GPUs fit beside `hog` once `run` ends; held back, `hog` would take the end of
    # the horizon instead (it is worth more there), pushing `late` out.
    assert by_what["2 GPUs instead of 4"] == 5
    assert by_what["hog held back until step 6"] is None
    assert result.best is not None and result.best.what == "2 GPUs instead of 4"


def test_counterfactuals_match_replans_on_the_benchmark_scenarios() -> None:
    for name in ("oversubscribed", "scale"):
        scenario = load_scenario(SCENARIOS / f"{name}.json")
        for policy in ("fast", "priority"):
            plan = make_plan(scenario, policy)
            starts = plan.starts()
            waiting = [j for j in scenario.batch_jobs if not j.running
                       and starts.get(j.id, {"start": scenario.T})["start"] > j.arrival_step]
            job = max(waiting, key=lambda j: starts.get(j.id, {"start": scenario.T})["start"])
            result = explain(scenario, plan.grid, policy, job.id)
            for change in result.changes:
                if change.what.startswith("priority "):
                    p = float(change.what.split()[1])
                    again = _replanned(_job(scenario, job.id, priority=p), policy, job.id)
                    assert change.start == again, (name, policy, change)
                elif "held back" in change.what:
                    other, step = re.match(r"(\S+) held back until step (\d+)",
                                           change.what).groups()
                    again = _replanned(_job(scenario, other, arrival_step=int(step)), policy,
                                       job.id)
                    assert change.start == again, (name, policy, change)


def test_a_job_that_starts_at_its_arrival_gets_no_replans() -> None:
    """`hog` starts at step 0, its arrival: no change can start it earlier, none is tried."""
    scenario = scenario_from_dict(WAITING)
    plan = make_plan(scenario, "fast")
    assert plan.starts()["hog"]["start"] == 0
    result = explain(scenario, plan.grid, "fast", "hog")
    assert result.start == 0 and "starts at its arrival" in result.reason
    assert result.changes == () and result.best is None
    # `late` waits, so it still gets every change
    assert len(explain(scenario, plan.grid, "fast", "late").changes) == 4


def test_the_command_prints_the_explanation_and_rejects_an_unknown_job(tmp_path: Path) -> None:
    scenario_file = tmp_path / "s.json"
    scenario_file.write_text(json.dumps(WAITING))
    plan_file = tmp_path / "p.json"
    plan_file.write_text(make_plan(scenario_from_dict(WAITING), "fast").to_json())
    runner = CliRunner()
    ok = runner.invoke(build_app(), ["explain", str(scenario_file), str(plan_file), "late"])
    assert ok.exit_code == 0, ok.output
    assert "planned start step 6" in ok.output and "earliest with one change" in ok.output
    every = runner.invoke(build_app(), ["explain", str(scenario_file), str(plan_file), "ALL"])
    assert every.exit_code == 0 and "2 jobs explained" in every.output
    bad = runner.invoke(build_app(), ["explain", str(scenario_file), str(plan_file), "nope"])
    assert bad.exit_code == 2
    assert "nope" in bad.output


def test_a_broken_plan_file_is_one_line_naming_the_file_and_field(tmp_path: Path) -> None:
    """explain reads plans as `gpuplan check` does: NaN and a non-string cell are refused."""
    scenario_file = tmp_path / "s.json"
    scenario_file.write_text(json.dumps(WAITING))
    body = json.loads(make_plan(scenario_from_dict(WAITING), "fast").to_json())
    runner = CliRunner()
    for broken, needle in (({**body, "metrics": {"value": float("nan")}}, "not valid JSON"),
                           ({**body, "grid": [[1, None]]}, "grid[0][0]")):
        plan_file = tmp_path / "p.json"
        plan_file.write_text(json.dumps(broken))
        out = runner.invoke(build_app(), ["explain", str(scenario_file), str(plan_file), "late"])
        assert out.exit_code == 2, out.output
        assert needle in out.output and str(plan_file) in out.output
