"""CLI for the published figures: `gpuplan figures [--check] [--quick]` (benchmarks/figures.py,
loaded from the checkout by pipelines/checkout.py)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    app.command("figures")(figures)


def figures(
    check: bool = typer.Option(False, "--check",
                               help="Recompute and compare; exit 1 with a diff if any is stale."),
    quick: bool = typer.Option(False, "--quick",
                               help="Only the quick tier (no replays): seconds."),
) -> None:
    """Regenerate every figure block in README.md, BENCHMARKS.md and docs/*.md."""
    from pipelines.checkout import benchmarks
    from pipelines.cliutil import input_errors

    with input_errors():
        figs = benchmarks("figures")
    try:
        status = figs.run(check=check, quick=quick, log=typer.echo)
    except KeyError as err:
        typer.echo(f"gpuplan: error: {err.args[0]}", err=True)
        raise typer.Exit(2) from None
    raise typer.Exit(status)
