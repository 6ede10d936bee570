"""Why the jobs of a plan wait: the plan file read against its scenario, then explained.

The plan file does not carry its scenario, so both are given (as for `gpuplan check`).
The counterfactuals re-run the plan's own policy (fast for a `full` plan: the MILP per
change would take seconds each) with one change each.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from allocator import grid as gridlib
from allocator.core.errors import InputError
from allocator.explain import Explanation
from allocator.explain import explain as explain_job
from allocator.model import BatchJob, Scenario
from allocator.scenario_io import load_scenario
from allocator.validator import violations
from pipelines.plan_one import read_plan

ALL = "ALL"
REPLANNED = ("fast", "fifo", "priority", "backfill")  # any other policy is re-run as fast


@dataclass(frozen=True)
class Explained:
    """The explanations asked for, each with the seconds it took, and the policy re-run."""

    policy: str
    results: list[tuple[Explanation, float]]


def _read(scenario: Scenario, plan_file: Path, job_id: str) -> tuple[np.ndarray, str]:
    """The plan's grid (job indices, -1 free) and policy, checked legal for the scenario."""
    body = read_plan(plan_file)  # the checker's reader: NaN, ragged rows, limits
    problems = violations(scenario, body["grid"])
    if problems:
        raise InputError(f"the plan is not legal for this scenario: {problems[0]}",
                         field="grid")
    job = next((j for j in scenario.jobs if j.id == job_id), None)
    if job_id != ALL and (not isinstance(job, BatchJob) or job.running):
        raise InputError("names no queued batch-like job of the scenario", job=job_id,
                         field="id")
    policy = body.get("policy", "fast")
    return gridlib.from_ids(scenario, body["grid"]), policy if policy in REPLANNED else "fast"


def explain_plan(scenario_file: Path, plan_file: Path, job_id: str) -> Explained:
    """One queued job of the plan explained, or every one (ALL), timed each."""
    try:
        scenario = load_scenario(scenario_file)
    except InputError as err:
        raise err.located(str(scenario_file)) from None
    try:
        grid, policy = _read(scenario, plan_file, job_id)
    except InputError as err:
        raise err.located(str(plan_file)) from None
    ids = ([j.id for j in scenario.batch_jobs if not j.running] if job_id == ALL
           else [job_id])
    results = []
    for one in ids:
        began = time.perf_counter()
        result = explain_job(scenario, grid, policy, one)
        results.append((result, time.perf_counter() - began))
    return Explained(policy, results)
