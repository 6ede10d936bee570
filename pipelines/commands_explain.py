"""`gpuplan explain SCENARIO.json PLAN.json JOB_ID`: why a job waits, and what would help.

pipelines/explain_plan.py reads the plan against its scenario and explains; this module
reads the arguments and prints.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import typer

from pipelines.cliutil import input_errors


def register(app: typer.Typer) -> None:
    app.command("explain")(explain)


def explain(
    scenario: Path = typer.Argument(..., help="Scenario JSON the plan was made from."),
    plan_file: Path = typer.Argument(..., help="Plan JSON."),
    job_id: str = typer.Argument(..., help="The queued job to explain (ALL: every one)."),
    as_json: bool = typer.Option(False, "--json", help="Print the explanation as JSON."),
) -> None:
    """Planned start, the binding reason, and the smallest change that starts it earlier."""
    import numpy as np

    from pipelines.explain_plan import ALL, explain_plan

    with input_errors():
        done = explain_plan(scenario, plan_file, job_id)
    for result, _ in done.results:
        _print(result, done.policy, as_json)
    took = [seconds for _, seconds in done.results]
    if job_id == ALL and took:  # the time each explanation took
        typer.echo(f"{len(took)} jobs explained: median {np.median(took):.3f} s, "
                   f"max {max(took):.3f} s per job")


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
