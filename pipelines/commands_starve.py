"""`gpuplan starvation`: do large jobs start? The guard measured on Philly and on worlds built
to starve (pipelines/starvation.py runs it; this module reads the options and reports)."""

from __future__ import annotations

from pathlib import Path

import typer

from pipelines.cliutil import ESTIMATE_HORIZON_OPTION, STABILITY_OPTION, finite, input_errors
from pipelines.starve import FAST_MARGIN, starve_names


def register(app: typer.Typer) -> None:
    app.command("starvation")(starvation)


def starvation(
    worlds: str = typer.Option("philly," + ",".join(starve_names()), "--worlds",
                               help="Comma-separated: philly and/or starvation worlds."),
    seed: int = typer.Option(7, "--seed", help="Seed of the worlds and Philly priorities."),
    age: float = typer.Option(0.25, "--age", callback=finite,
                              help="Claim per step waited (0: off)."),
    reservations: int = typer.Option(1, "--reservations", help="Promises held at once."),
    half_nodes: int = typer.Option(0, "--half-node-reservations",
                                   help="Promises held for half-node jobs, besides them."),
    age_in_plan: bool = typer.Option(False, "--age-in-plan",
                                     help="Plan with claims as priorities too."),
    exact: bool = typer.Option(False, "--exact-durations",
                               help="Predicted durations = true ones (no duration error)."),
    margin: float = typer.Option(FAST_MARGIN, "--margin", callback=finite,
                                 help="fast's headroom on the realtime forecast."),
    baseline_margin: float = typer.Option(0.15, "--baseline-margin", callback=finite,
                                          help="The same for fifo, priority and backfill."),
    stability: str = STABILITY_OPTION,
    estimate_horizon: int = ESTIMATE_HORIZON_OPTION,
    out: Path = typer.Option(Path("out/starvation"), "--out", "-o", help="Output directory."),
    workers: int = typer.Option(2, "--workers", help="Processes for independent replays."),
) -> None:
    """Replay the starvation suite with and without the guard; check the targets."""
    from pipelines.simulate import stability_option
    from pipelines.starvation import StarveArgs, run_starvation

    with input_errors():
        level = stability_option(stability)
    args = StarveArgs(worlds=worlds, seed=seed, age=age, reservations=reservations,
                      age_in_plan=age_in_plan, exact=exact, margin=margin,
                      baseline_margin=baseline_margin, half_nodes=half_nodes, out=out,
                      workers=workers, stability=level, estimate_horizon=estimate_horizon)
    with input_errors():
        report = run_starvation(args)
    typer.echo(f"report -> {report}")
