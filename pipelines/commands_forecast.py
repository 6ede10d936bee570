"""CLI for the cost estimators: `synth-history`, `train`, `score`.

Heavy imports (LightGBM, statsmodels) happen inside the commands, so that the
rest of `gpuplan` starts fast.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import typer

from pipelines.cliutil import finite, input_errors

MAX_LISTED_REJECTS = 20
MAX_REJECT_SHARE = 0.5  # score's default: more than half the queue rejected is a failure
EXIT_REJECTED = 2


def register(app: typer.Typer) -> None:
    """Add the estimator commands to the `gpuplan` app."""
    app.command("synth-history")(synth_history)
    app.command("train")(train)
    app.command("score")(score)


def synth_history(
    out: Path = typer.Option(..., "--out", help="Directory for the history (the bundled "
                             "sample is data/history)."),
    seed: int = typer.Option(2026, "--seed", min=0, max=2**32 - 1,
                             help="Random seed: same seed, same files."),
    training: int = typer.Option(4000, "--training", min=0, help="Training jobs."),
    quantization: int = typer.Option(2000, "--quantization", min=0, help="Quantization jobs."),
    sigma: float = typer.Option(0.2, "--sigma", callback=finite,
                                min=0.0, help="Training noise floor (log sd)."),
    quant_sigma: float = typer.Option(0.25, "--quant-sigma", callback=finite, min=0.0,
                                      help="Quantization noise (log sd)."),
    memory_sigma: float = typer.Option(0.04, "--memory-sigma", callback=finite, min=0.0,
                                       help="Per-job memory off the formula (log sd)."),
    fmt: str = typer.Option("csv", "--format", help="csv or parquet."),
    queue_out: Path | None = typer.Option(None, "--queue-out",
                                          help="Also write a sample queue to this file."),
    queue_jobs: int = typer.Option(48, "--queue-jobs", min=1, help="Jobs in the sample queue."),
) -> None:
    """Write a seeded synthetic job history (training.csv, quantization.csv, meta.json)."""
    from pipelines.synth_history import SynthArgs
    from pipelines.synth_history import synth_history as write_history

    args = SynthArgs(out=out, seed=seed, training=training, quantization=quantization,
                     sigma=sigma, quant_sigma=quant_sigma, memory_sigma=memory_sigma, fmt=fmt,
                     queue_out=queue_out, queue_jobs=queue_jobs)
    with input_errors():
        written = write_history(args)
    for path in written:
        print(f"wrote {path}")


def train(
    history: Path = typer.Argument(..., help="Training history (CSV or Parquet)."),
    quantization: Path | None = typer.Option(
        None, "--quantization", help="Quantization history; without it only the training "
        "estimators are fitted."),
    models: Path | None = typer.Option(
        None, "--models", help="Where to save the estimators; default: out/models under "
        "gpuplan's home (`gpuplan where`), never the committed models/."),
    report: Path | None = typer.Option(None, "--report", help="Also write the report (Markdown)."),
    promote: bool = typer.Option(
        False, "--promote", help="Make the new versions @champion even when they do not "
        "beat the current champion on the held-out rows."),
    test_fraction: float = typer.Option(0.25, "--test-fraction", callback=finite, min=0.05, max=0.9,
                                        help="Share of jobs held out for the evaluation."),
    seed: int = typer.Option(0, "--seed", min=0, max=2**32 - 1,
                             help="Seed of the held-out split."),
    noise_sigma: float | None = typer.Option(
        None, "--noise-sigma", help="Noise floor sigma; default: meta.json beside the history."),
    extra_history: list[Path] = typer.Option(
        [], "--extra-history", help="More training history (e.g. real runs): joins every "
        "training fit, never the held-out evaluation. Repeatable."),
) -> None:
    """Evaluate on a held-out split, print the report, fit on all jobs, save, and register
    a new model version; it becomes @champion only if it is at least as good as the current
    one on the same held-out rows (or with --promote)."""
    from rich.console import Console

    from forecasting.evaluate import print_report
    from pipelines.home import home
    from pipelines.train import TrainArgs, run_train

    command = "gpuplan " + shlex.join(sys.argv[1:]) if sys.argv[1:] else "gpuplan train"
    args = TrainArgs(history=history, quantization=quantization, models=models
                     if models is not None else home().trained_models, report=report,
                     promote=promote, test_fraction=test_fraction, seed=seed,
                     noise_sigma=noise_sigma, extra_history=list(extra_history),
                     command=command)
    with input_errors():
        done = run_train(args)
    for line in done.warnings:
        print(line, file=sys.stderr)
    print_report(done.evaluation, Console())
    print(f"saved {', '.join(done.saved)} to {args.models}/")
    if report:
        print(f"wrote {report}")
    for uri, reason in done.registered:
        print(f"registered {uri}; {reason}")
    if not done.registered:
        print(f"not registered (MLflow tracking off); the estimators are in {args.models}/ "
              f"(use them with --models {args.models})")


def score(
    queue: Path = typer.Argument(..., help="Queue to score (CSV or Parquet)."),
    out: Path = typer.Option(..., "--out", help="Scored queue to write (CSV or Parquet)."),
    step_minutes: float = typer.Option(60.0, "--step-minutes", callback=finite,
                                       help="Minutes per plan step."),
    models: Path | None = typer.Option(
        None, "--models", help="Use the estimators in this directory (always wins over the "
        "registry). Default: the registry's @champion, else the models `train` saved in "
        "gpuplan's home, else the committed models/."),
    max_reject_share: float = typer.Option(
        MAX_REJECT_SHARE, "--max-reject-share", min=0.0, max=1.0,
        help="Exit 2, writing only the rejects file, when more than this share of the "
        "rows is rejected; every row rejected always fails."),
    rejects: Path | None = typer.Option(
        None, "--rejects", help="Rows that could not be scored; default OUT's name + .rejects.csv"),
    duration_from: str = typer.Option(
        "p90", "--duration-from", help="Size duration_steps by p50 or p90 GPU-hours."),
) -> None:
    """Add gpus, duration_steps, gpu_hours_p50, gpu_hours_p90 to every scorable row."""
    from pipelines import tracking
    from pipelines.scoring import ScoreArgs, score_file

    args = ScoreArgs(queue=queue, out=out, rejects=rejects or out.with_name(
        out.stem + ".rejects.csv"), step_minutes=step_minutes, models=models,
        max_reject_share=max_reject_share, duration_from=duration_from)
    with input_errors():
        done = score_file(args)
    run, result = done.run, done.run.result
    bad, rows = result.rejects, run.rows
    print(tracking.describe_refs(run.refs))
    if done.failed:
        limit = ("" if len(result.scored) == 0
                 else f", above --max-reject-share {max_reject_share:g}")
        print(f"gpuplan: error: rejected {len(bad)} of {rows} rows of {queue} "
              f"({done.share:.0%}{limit}); {out} not written, the reasons are in "
              f"{args.rejects}", file=sys.stderr)
    else:
        print(f"scored {len(result.scored)} of {rows} jobs in {run.seconds:.2f} s -> {out}")
    _list("rejected", bad, args.rejects, lambda r: f"{r.id if r.id else f'row {r.row}'}: "
          f"field {r.field!r}: {r.reason}")
    _list("scored with warnings", result.warnings, args.rejects,
          lambda r: f"{r.id or f'row {r.row}'}: {r.reason}")
    if done.failed:
        raise typer.Exit(EXIT_REJECTED)
    run.log("score", [out, args.rejects])


def _list(what: str, rows, path: Path, line) -> None:
    """On stderr: how many rows, where they are, and the first MAX_LISTED_REJECTS of them."""
    if not len(rows):
        return
    print(f"{what} {len(rows)} -> {path}", file=sys.stderr)
    for r in rows.head(MAX_LISTED_REJECTS).itertuples(index=False):
        print(f"  {line(r)}", file=sys.stderr)
    if what == "rejected" and len(rows) > MAX_LISTED_REJECTS:
        print(f"  ... and {len(rows) - MAX_LISTED_REJECTS} more", file=sys.stderr)
