"""A job already running on an unaligned block (GPUs 2-5) is planned around, not refused.

MODEL.md, "Unaligned running blocks": it is pinned where it runs; new placements stay
aligned, so it keeps both aligned 4-blocks it touches busy while it runs.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given

from allocator.plan import make_plan
from allocator.policies import POLICIES
from allocator.scenario_io import scenario_from_dict
from allocator.validator import violations
from tests.strategies import scenario_dicts


def _scenario():
    return scenario_from_dict({
        "name": "unaligned",
        "cluster": {"gpus": 8, "node_size": 8, "step_minutes": 60, "horizon_steps": 6},
        "weights": {"realtime_penalty": 8.0, "decay": 0.97},
        "jobs": [
            {"id": "old", "kind": "training", "priority": 2, "gpus": 4, "duration_steps": 5,
             "running": {"first_gpu": 2, "remaining_steps": 3}},
            {"id": "big", "kind": "training", "priority": 9, "gpus": 4, "duration_steps": 2},
            {"id": "pair", "kind": "quantization", "priority": 3, "gpus": 2,
             "duration_steps": 2},
            {"id": "chat", "kind": "realtime", "priority": 5, "demand": [1, 1, 2, 2, 1, 1],
             "swap_limit": 1, "current_gpus": [7]},
        ],
    })


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_every_policy_pins_it_and_keeps_new_blocks_aligned(policy):
    scenario = _scenario()
    plan = make_plan(scenario, policy)  # validated inside: an illegal grid raises
    grid = plan.id_grid()
    for t in range(3):
        assert grid[t][2:6] == ["old"] * 4, (policy, t)
    assert all("old" not in row for row in grid[3:])
    starts = plan.starts()
    for job_id, where in starts.items():
        job = next(j for j in scenario.batch_jobs if j.id == job_id)
        if not job.running:
            assert where["first_gpu"] % job.gpus == 0, (policy, job_id, where)
    # the 4-GPU job can only start once both aligned 4-blocks are free of "old"
    if "big" in starts:
        assert starts["big"]["start"] >= 3


def test_the_validator_still_holds_it_to_its_block():
    scenario = _scenario()
    grid = make_plan(scenario, "fifo").id_grid()
    moved = [list(row) for row in grid]
    moved[0][2:6] = [None] * 4
    moved[0][0:4] = ["old"] * 4
    assert any("old" in v for v in violations(scenario, moved))


def test_plan_day_accepts_a_running_file_with_an_unaligned_job(tmp_path):
    from pipelines.plan_day import load_running

    path = tmp_path / "running.json"
    path.write_text(json.dumps({"jobs": [
        {"id": "r", "kind": "training", "priority": 4, "gpus": 4, "duration_steps": 6,
         "first_gpu": 2, "remaining_steps": 3}], "realtime": {"chat": [7]}}))
    jobs, current = load_running(path, 8)
    assert jobs[0]["running"]["first_gpu"] == 2 and current == {"chat": [7]}


@given(scenario_dicts())
def test_random_scenarios_with_unaligned_running_blocks_plan_legally(raw):
    scenario = scenario_from_dict(raw)
    for policy in ("fast", "fifo", "priority"):
        plan = make_plan(scenario, policy)
        assert violations(scenario, plan.id_grid()) == []
