"""`gpuplan explain SCENARIO.json PLAN.json JOB_ID`: why a job waits, and what would help.

The plan file does not carry its scenario, so both are given (as for `gpuplan check`).
The counterfactuals re-run the plan's own policy (fast for a `full` plan: the MILP per
change would take seconds each) with one change each.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import typer

from allocator.core.errors import InputError
from allocator.explain import explain as explain_job
from allocator.model import BatchJob
from allocator.scenario_io import load_scenario
from allocator.validator import violations
from pipelines.cliutil import input_errors

ALL = "ALL"


def register(app: typer.Typer) -> None:
    app.command("explain")(explain)


def explain(
    scenario: Path = typer.Argument(..., help="Scenario JSON the plan was made from."),
    plan_file: Path = typer.Argument(..., help="Plan JSON."),
    job_id: str = typer.Argument(..., help="The queued job to explain (ALL: every one)."),
    as_json: bool = typer.Option(False, "--json", help="Print the explanation as JSON."),
) -> None:
    """Planned start, the binding reason, and the smallest change that starts it earlier."""
    with input_errors(str(scenario)):
        loaded = load_scenario(scenario)
    with input_errors(str(plan_file)):
        try:
            body = json.loads(plan_file.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as err:
            raise InputError(f"cannot read plan: {err}") from None
        if not isinstance(body, dict) or not isinstance(body.get("grid"), list):
            raise InputError("a plan is a JSON object with a grid", field="grid")
        problems = violations(loaded, body["grid"])
        if problems:
            raise InputError(f"the plan is not legal for this scenario: {problems[0]}",
                             field="grid")
        job = next((j for j in loaded.jobs if j.id == job_id), None)
        if job_id != ALL and (not isinstance(job, BatchJob) or job.running):
            raise InputError("names no queued batch-like job of the scenario", job=job_id,
                             field="id")
        policy = body.get("policy", "fast")
        if policy not in ("fast", "fifo", "priority", "backfill"):
            policy = "fast"
    index = {j.id: i for i, j in enumerate(loaded.jobs)}
    grid = np.array([[index[c] if c is not None else -1 for c in row] for row in body["grid"]],
                    dtype=np.int32)
    if job_id == ALL:  # every queued job, with the time each explanation took
        took = []
        for j in loaded.batch_jobs:
            if not j.running:
                began = time.perf_counter()
                result = explain_job(loaded, grid, policy, j.id)
                took.append(time.perf_counter() - began)
                _print(result, policy, as_json)
        if took:
            typer.echo(f"{len(took)} jobs explained: median {np.median(took):.3f} s, "
                       f"max {max(took):.3f} s per job")
        return
    _print(explain_job(loaded, grid, policy, job_id), policy, as_json)


def _print(result, policy: str, as_json: bool) -> None:
    job_id = result.job
    if as_json:
        typer.echo(json.dumps(asdict(result), indent=1))
        return
    when = "not in the horizon" if result.start is None else f"step {result.start}"
    typer.echo(f"{job_id}: planned start {when} ({policy})")
    typer.echo(f"  why: {result.reason}")
    for change in result.changes:
        got = "not in the horizon" if change.start is None else f"step {change.start}"
        typer.echo(f"  if {change.what}: starts {got}")
    if result.best is not None:
        typer.echo(f"  earliest with one change: {result.best.what} (step {result.best.start})")
    else:
        typer.echo("  no single change tried starts it earlier")
