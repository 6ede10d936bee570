"""Pipeline commands: `plan-day` (the daily plan and its report) and `demo` (everything once)."""

from __future__ import annotations

from pathlib import Path

import typer

from pipelines.cliutil import input_errors


def register(app: typer.Typer) -> None:
    app.command("plan-day")(plan_day)
    app.command("demo")(demo)


def plan_day(
    queue: Path = typer.Option(..., "--queue", help="Queue CSV/Parquet, scored or not "
                               "(unscored rows are scored with the registered champions)."),
    cluster: Path = typer.Option(Path("data/cluster.json"), "--cluster",
                                 help="Cluster config: MODEL.md's cluster and weights."),
    traffic: Path | None = typer.Option(None, "--traffic", help="Realtime traffic history "
                                        "(timestamp,service,requests); needs --services."),
    services: Path = typer.Option(Path("data/traffic/services.json"), "--services",
                                  help="SERVICES.json: per-service throughput and limits."),
    profile: Path | None = typer.Option(None, "--profile",
                                        help="Or: PROFILE.json from `gpuplan profile`."),
    running: Path | None = typer.Option(None, "--running",
                                        help="Jobs running now and GPUs realtime holds now."),
    models: Path = typer.Option(Path("models"), "--models",
                                help="Fallback estimators when the registry has none."),
    start: str | None = typer.Option(None, "--start", help="Plan start, ISO 8601 or 'now'; "
                                     "default: the hour after the traffic history ends."),
    step_minutes: int | None = typer.Option(None, "--step-minutes", min=1,
                                            help="Step length (default: the cluster's)."),
    steps: int | None = typer.Option(None, "--steps", min=1,
                                     help="Steps in the plan (default: one day)."),
    full: bool = typer.Option(False, "--full", help="The periodic review: the MILP."),
    time_limit: float = typer.Option(60.0, "--time-limit", help="--full: solver seconds."),
    out_dir: Path = typer.Option(Path("out/day"), "--out-dir", help="Where the files go."),
    duration_from: str = typer.Option("p90", "--duration-from",
                                      help="On-the-fly scoring: p50 or p90 GPU-hours."),
) -> None:
    """Plan the day: plan JSON, grid CSV/PNG and a report; tracked in MLflow when it answers."""
    from pipelines.plan_day import DayArgs, run_day

    args = DayArgs(queue=queue, cluster=cluster, traffic=traffic, services=services,
                   profile=profile, running=running, models=models, start=start,
                   step_minutes=step_minutes, steps=steps, full=full, time_limit=time_limit,
                   out_dir=out_dir, duration_from=duration_from)
    with input_errors():
        result = run_day(args)
    m = result.plans.plan.metrics
    f = result.plans.fifo.metrics
    typer.echo(f"{result.plans.plan.policy}: utilization {100 * m.utilization:.1f}% "
               f"(fifo {100 * f.utilization:.1f}%), completed {m.completed} (fifo "
               f"{f.completed}), realtime shortfall {m.rt_shortfall} (fifo {f.rt_shortfall})")
    typer.echo(f"wrote {result.outputs.report_md} (and .html), {result.outputs.plan}, "
               f"{result.outputs.grid_csv}, {result.outputs.grid_png}")


def demo(
    out_dir: Path = typer.Option(Path("out"), "--out-dir", help="Where the outputs go."),
    full: bool = typer.Option(False, "--full", help="Also plan the day with the MILP."),
) -> None:
    """Everything once: history, train, score, profile, plan the day, benchmark; all tracked."""
    from pipelines.demo import run_demo

    with input_errors():
        run_demo(out_dir=out_dir, full=full)
