"""`gpuplan simulate`: rolling-horizon replays of a suite world, the seeded suite or Philly.

Each run writes a report (Markdown table, PNG of utilization and shortfall over time,
metrics and the resolved configuration) atomically under --out, and logs it to MLflow
when tracking is on; `--sweep-horizon` adds the horizon/decay sweep (end-of-world effect).
The work is pipelines/simulate_compare.py's; this module reads the options and reports.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import replace
from pathlib import Path

import typer

from pipelines.cliutil import ESTIMATE_HORIZON_OPTION, STABILITY_OPTION, finite, input_errors
from pipelines.home import out_dir as out_dir_default
from pipelines.philly import PHILLY_CSV, SERVEGEN_CSV


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate)


def simulate(
    world: str | None = typer.Option(None, "--world", help="One suite world, e.g. high-03."),
    use_suite: bool = typer.Option(False, "--suite", help="The seeded suite (21 worlds)."),
    use_philly: bool = typer.Option(False, "--philly",
                                    help="A week of Philly jobs with ServeGen demand."),
    seed: int = typer.Option(7, "--seed", min=0, max=2**32 - 1,
                             help="Seed of the suite / Philly priorities."),
    days: int = typer.Option(2, "--days", help="Suite worlds: days replayed."),
    horizon: int = typer.Option(24, "--horizon", help="Steps each plan looks ahead."),
    replan_every: int = typer.Option(1, "--replan-every", help="Steps committed per plan."),
    policy_list: str = typer.Option("fast,fifo,priority", "--policies",
                                    help="Policies to replay, comma-separated."),
    margin: float = typer.Option(0.15, "--margin", callback=finite,
                                 help="Headroom on the demand forecast."),
    lead: int = typer.Option(1, "--lead", help="Provision each step for the next LEAD too."),
    overrun_share: float = typer.Option(0.0, "--overrun-share", callback=finite,
                                        help="A job past its predicted end is planned to run "
                                             "this share of its elapsed time more; 0: one "
                                             "more step."),
    sweep_horizon: str | None = typer.Option(None, "--sweep-horizon",
                                             help="Also sweep fast's horizon, e.g. 2,6,12,24,48."),
    sweep_decay: str = typer.Option("0.97,1.0", "--sweep-decay",
                                    help="Decays crossed with --sweep-horizon."),
    gpus: int = typer.Option(32, "--gpus", help="Philly: cluster size."),
    philly_start: str = typer.Option("2017-11-06", "--philly-start", help="Philly: week start."),
    philly_vc: str = typer.Option("6c71a0", "--philly-vc", help="Philly: virtual cluster."),
    forecaster: str = typer.Option("naive", "--forecaster",
                                   help="Philly: naive (hour-of-day median + level) or profile "
                                        "(forecasting.profile's upper band)."),
    philly_csv: Path = typer.Option(PHILLY_CSV, "--philly-csv", help="Philly trace (extract)."),
    traffic: Path = typer.Option(SERVEGEN_CSV, "--traffic", help="ServeGen 10-min pool rates."),
    out: Path = typer.Option(out_dir_default("simulate"), "--out", "-o", help="Output directory."),
    workers: int = typer.Option(2, "--workers", help="Processes for independent replays."),
    guard: bool = typer.Option(False, "--guard/--no-guard",
                               help="Starvation guard for fast/full/backfill: age claims and "
                                    "the top job's reservation (docs/starvation.md)."),
    track: bool = typer.Option(True, "--track/--no-track", help="Log the report to MLflow."),
    stability: str = STABILITY_OPTION,
    estimate_horizon: int = ESTIMATE_HORIZON_OPTION,
    max_seconds: float = typer.Option(0.0, "--max-seconds", callback=finite,
                                      help="Stop (exit 2, nothing written) past this many "
                                           "seconds of replay; 0 = no limit but the caps."),
) -> None:
    """Replay with forecast error: plan the horizon, commit the step, compare policies."""
    from pipelines.simulate import stability_option
    from pipelines.simulate_compare import SimArgs, resolve, run_simulate

    args = SimArgs(world=world, use_suite=use_suite, use_philly=use_philly, seed=seed,
                   days=days, horizon=horizon, replan_every=replan_every, policies=policy_list,
                   margin=margin, lead=lead, sweep_horizon=sweep_horizon,
                   sweep_decay=sweep_decay, gpus=gpus, philly_start=philly_start,
                   philly_vc=philly_vc, forecaster=forecaster, philly_csv=philly_csv,
                   traffic=traffic, out=out, workers=workers, guard=guard, track=track,
                   max_seconds=max_seconds, estimate_horizon=estimate_horizon,
                   overrun_share=overrun_share)
    with input_errors():
        args = replace(args, stability=stability_option(stability))
        request = resolve(args)
    with _progress(request.replays) as tick, input_errors():
        files = run_simulate(request, progress=tick)
    typer.echo(f"report -> {files[0]}")


def _progress(total: int):
    """A progress bar on stderr when it is a terminal; else a no-op tick."""
    if not sys.stderr.isatty():
        return contextlib.nullcontext(lambda: None)
    from rich.console import Console
    from rich.progress import Progress

    @contextlib.contextmanager
    def bar():
        with Progress(console=Console(stderr=True), transient=True) as shown:
            task = shown.add_task("replaying", total=total)
            yield lambda: shown.advance(task)
    return bar()
