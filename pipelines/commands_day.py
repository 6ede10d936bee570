"""Pipeline commands: `plan-day` (the daily plan and its report), `demo` (everything once)
and `where` (gpuplan's state directory, store and bundled files)."""

from __future__ import annotations

from pathlib import Path

import typer

from allocator.policies.refine import DAY_TRIALS
from pipelines.cliutil import (
    defer_trials_option,
    finite,
    hops_option,
    input_errors,
    pin_trials_option,
    trial_passes_option,
)


def register(app: typer.Typer) -> None:
    app.command("plan-day")(plan_day)
    app.command("demo")(demo)
    app.command("where")(where)


def where(
    uri: bool = typer.Option(False, "--uri", help="Print only the MLflow tracking URI."),
) -> None:
    """Where gpuplan keeps its state (GPUPLAN_HOME) and finds its bundled files."""
    from pipelines import tracking
    from pipelines.home import bundled, default_models, home

    if uri:
        typer.echo(tracking.tracking_uri())
        return
    h = home()
    env_uri = "MLFLOW_TRACKING_URI" if tracking.tracking_uri() != tracking.default_uri() else ""
    rows = [("home", f"{h.path}  ({h.reason})"),
            ("MLflow store", tracking.tracking_uri() + (f"  (${env_uri})" if env_uri else "")),
            ("outputs", f"{h.out}  (default --out-dir of plan-day, demo, bench, profile)"),
            ("train saves to", f"{h.trained_models}  (default --models of train)"),
            ("fallback models", f"{default_models()}  (when the registry has no @champion "
                                "and no --models is given)"),
            ("bundled data", str(bundled("data")))]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        typer.echo(f"{key:<{width}}  {value}")
    typer.echo("Set GPUPLAN_HOME to move the state, MLFLOW_TRACKING_URI to use another store.")


def plan_day(
    queue: Path = typer.Option(..., "--queue", help="Queue CSV/Parquet, scored or not "
                               "(unscored rows are scored with the registered champions)."),
    cluster: Path | None = typer.Option(None, "--cluster", help="Cluster config: MODEL.md's "
                                        "cluster and weights; default: the bundled "
                                        "data/cluster.json."),
    traffic: Path | None = typer.Option(None, "--traffic", help="Realtime traffic history "
                                        "(timestamp,service,requests); needs --services."),
    services: Path | None = typer.Option(None, "--services", help="SERVICES.json: "
                                         "per-service throughput and limits; default: the "
                                         "bundled data/traffic/services.json."),
    profile: Path | None = typer.Option(None, "--profile",
                                        help="Or: PROFILE.json from `gpuplan profile`."),
    running: Path | None = typer.Option(None, "--running",
                                        help="Jobs running now and GPUs realtime holds now."),
    models: Path | None = typer.Option(
        None, "--models", help="Score an unscored queue with the estimators in this "
        "directory (always wins over the registry); default: the registry's @champion, "
        "else the models `train` saved, else the committed models/."),
    start: str | None = typer.Option(None, "--start", help="Plan start, ISO 8601 or 'now'; "
                                     "default: the hour after the traffic history ends."),
    step_minutes: int | None = typer.Option(None, "--step-minutes", min=1,
                                            help="Step length (default: the cluster's)."),
    steps: int | None = typer.Option(None, "--steps", min=1,
                                     help="Steps in the plan (default: one day)."),
    full: bool = typer.Option(False, "--full", help="The periodic review: the MILP."),
    time_limit: float = typer.Option(60.0, "--time-limit", callback=finite,
                                     help="--full: solver seconds."),
    pin_trials: int = pin_trials_option(DAY_TRIALS["pin_trials"]),
    defer_trials: int = defer_trials_option(DAY_TRIALS["defer_trials"]),
    trial_passes: int = trial_passes_option(DAY_TRIALS["trial_passes"]),
    hops: int = hops_option(DAY_TRIALS["hops"]),
    out_dir: Path | None = typer.Option(None, "--out-dir", help="Where the files go; "
                                        "default: out/day under gpuplan's home."),
    duration_from: str = typer.Option("p90", "--duration-from",
                                      help="On-the-fly scoring: p50 or p90 GPU-hours."),
    guard: bool = typer.Option(False, "--guard", help="The starvation guard: promise the "
                               "top waiting whole-node job a block (docs/starvation.md)."),
    previous_plan: Path | None = typer.Option(
        None, "--previous-plan", help="--guard: yesterday's plan.json; its promises are kept "
        "or moved earlier, never later."),
    age: float = typer.Option(0.25, "--age", callback=finite,
                              help="--guard: claim per step waited (needs "
                              "the queue's optional submitted_at column)."),
) -> None:
    """Plan the day: plan JSON, grid CSV/PNG and a report; tracked in MLflow when it answers."""
    from pipelines.home import bundled
    from pipelines.home import out_dir as home_out
    from pipelines.plan_day import DayArgs, run_day

    args = DayArgs(queue=queue, cluster=cluster or bundled("data/cluster.json"),
                   traffic=traffic, services=services or bundled("data/traffic/services.json"),
                   profile=profile, running=running, models=models, start=start,
                   step_minutes=step_minutes, steps=steps, full=full, time_limit=time_limit,
                   pin_trials=pin_trials, defer_trials=defer_trials, hops=hops,
                   trial_passes=trial_passes,
                   out_dir=out_dir or home_out("day"), duration_from=duration_from,
                   guard=guard, previous_plan=previous_plan, age=age)
    with input_errors():
        result = run_day(args)
    for warning in result.plans.day.warnings:
        typer.echo(f"gpuplan: warning: {warning}", err=True)
    m = result.plans.plan.metrics
    f = result.plans.fifo.metrics
    typer.echo(f"{result.plans.plan.policy}: utilization {100 * m.utilization:.1f}% "
               f"(fifo {100 * f.utilization:.1f}%), completed {m.completed} (fifo "
               f"{f.completed}), realtime shortfall {m.rt_shortfall} (fifo {f.rt_shortfall})")
    for key, value in result.plans.day.sources.items():
        if "estimat" in key:
            typer.echo(f"{key}: {value}")
    for p in result.plans.day.promises:
        typer.echo(f"promise: {p.id} on GPUs {p.first_gpu}-{p.first_gpu + p.gpus - 1} from "
                   f"step {p.start}" + ("" if p.was is None else f" (was step {p.was})"))
    typer.echo(f"wrote {result.outputs.report_md} (and .html), {result.outputs.plan}, "
               f"{result.outputs.grid_csv}, {result.outputs.grid_png}")


def demo(
    out_dir: Path | None = typer.Option(None, "--out-dir", help="Where the outputs go; "
                                        "default: out/ under gpuplan's home."),
    full: bool = typer.Option(False, "--full", help="Also plan the day with the MILP."),
) -> None:
    """Everything once: history, train, score, profile, plan the day, benchmark; all tracked."""
    from pipelines.demo import run_demo
    from pipelines.home import home

    with input_errors():
        run_demo(out_dir=out_dir or home().out, full=full)
