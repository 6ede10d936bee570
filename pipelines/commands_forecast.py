"""CLI for the cost estimators: `synth-history`, `train`, `score`.

Heavy imports (LightGBM, statsmodels) happen inside the commands, so that the
rest of `gpuplan` starts fast.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import typer

from allocator.core.atomic import atomic_path, write_text
from allocator.core.errors import InputError
from pipelines.cliutil import distinct_outputs, input_errors

MAX_LISTED_REJECTS = 20
MAX_REJECT_SHARE = 0.5  # score's default: more than half the queue rejected is a failure
EXIT_REJECTED = 2


def register(app: typer.Typer) -> None:
    """Add the estimator commands to the `gpuplan` app."""
    app.command("synth-history")(synth_history)
    app.command("train")(train)
    app.command("score")(score)


def _write_table(df, path: Path) -> None:
    """CSV or Parquet by extension, atomically."""
    with atomic_path(path) as tmp:
        if path.suffix.lower() in (".parquet", ".pq"):
            df.to_parquet(tmp, index=False)
        else:
            df.to_csv(tmp, index=False)


def _table_body(df, path: Path) -> str | bytes:
    """The file a table becomes: Parquet or CSV by extension."""
    if path.suffix.lower() in (".parquet", ".pq"):
        return df.to_parquet(index=False)
    return df.to_csv(index=False)


def synth_history(
    out: Path = typer.Option(..., "--out", help="Directory for the history (the bundled "
                             "sample is data/history)."),
    seed: int = typer.Option(2026, "--seed", min=0, max=2**32 - 1,
                             help="Random seed: same seed, same files."),
    training: int = typer.Option(4000, "--training", min=0, help="Training jobs."),
    quantization: int = typer.Option(2000, "--quantization", min=0, help="Quantization jobs."),
    sigma: float = typer.Option(0.2, "--sigma", min=0.0, help="Training noise floor (log sd)."),
    quant_sigma: float = typer.Option(0.25, "--quant-sigma", min=0.0,
                                      help="Quantization noise (log sd)."),
    memory_sigma: float = typer.Option(0.04, "--memory-sigma", min=0.0,
                                       help="Per-job memory off the formula (log sd)."),
    fmt: str = typer.Option("csv", "--format", help="csv or parquet."),
    queue_out: Path | None = typer.Option(None, "--queue-out",
                                          help="Also write a sample queue to this file."),
    queue_jobs: int = typer.Option(48, "--queue-jobs", min=1, help="Jobs in the sample queue."),
) -> None:
    """Write a seeded synthetic job history (training.csv, quantization.csv, meta.json)."""
    from allocator.core.limits import finite
    from forecasting.synth import SynthConfig, synth_history, synth_queue

    with input_errors():
        if fmt not in ("csv", "parquet"):
            raise InputError("must be csv or parquet", field="format")
        for value, name in ((sigma, "--sigma"), (quant_sigma, "--quant-sigma"),
                            (memory_sigma, "--memory-sigma")):
            finite(value, name, low=0, high=5)
        if max(training, quantization, queue_jobs) > 1_000_000:
            raise InputError("at most 1,000,000 jobs per file", field="--training")
        from allocator.core.atomic import writable_target
        from pipelines import outset

        outset.check_target(out)
        if queue_out is not None:
            writable_target(queue_out)
        config = SynthConfig(seed=seed, n_training=training, n_quantization=quantization,
                             sigma=sigma, quant_sigma=quant_sigma, memory_sigma=memory_sigma)
        train_df, quant_df, meta = synth_history(config)
        queue = synth_queue(queue_jobs, seed=seed) if queue_out else None
    names = [f"training.{fmt}"] if training else []
    names += [f"quantization.{fmt}"] if quantization else []
    with input_errors(), outset.output_set(out, "synth-history") as stage:  # one set
        for name, frame in zip(names, [d for d, n in ((train_df, training),
                                                      (quant_df, quantization)) if n],
                               strict=True):
            _write_table(frame, stage / name)
        write_text(stage / "meta.json", meta)
    written = [out / name for name in names]
    if queue is not None:
        _write_table(queue, queue_out)
        written.append(queue_out)
    for path in written:
        print(f"wrote {path}")


def _noise_floor(history: Path, sigma: float | None) -> float | None:
    """The noise floor to judge MdAPE by: --noise-sigma, else meta.json beside the history."""
    from forecasting.synth import noise_floor_mdape

    if sigma is None:
        meta = history.parent / "meta.json"
        if not meta.exists():
            return None
        try:
            sigma = float(json.loads(meta.read_text())["sigma"])
        except (ValueError, KeyError, TypeError) as err:
            raise InputError(f"no usable sigma: {err}", file=str(meta)) from None
    return noise_floor_mdape(sigma) if sigma > 0 else None


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
    test_fraction: float = typer.Option(0.25, "--test-fraction", min=0.05, max=0.9,
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

    from allocator.core.limits import finite
    from forecasting.evaluate import (
        evaluate,
        join_histories,
        print_report,
        split_index,
        to_markdown,
    )
    from forecasting.history import load_quant_history, load_training_history
    from forecasting.quantization import QuantizationCostEstimator
    from forecasting.store import save_estimators
    from forecasting.training import PowerLawBaseline, TrainingCostEstimator
    from pipelines import outset, promotion, tracking
    from pipelines.home import home

    models = models if models is not None else home().trained_models
    with input_errors():
        finite(test_fraction, "--test-fraction", low=0.05, high=0.9)
        if noise_sigma is not None:
            finite(noise_sigma, "--noise-sigma", low=0, high=5)
        outset.check_target(models)
        distinct_outputs([history, *([quantization] if quantization else [])],
                          [p for p in (report,) if p])
        if report:
            from allocator.core.atomic import writable_target

            writable_target(report)
        hist = load_training_history(history)
        extra = [load_training_history(p) for p in extra_history]
        quant = load_quant_history(quantization) if quantization else None
        floor = _noise_floor(history, noise_sigma)
    more = join_histories(*extra) if extra else None
    X, g, y = join_histories(hist, more)
    # the warning is about the user's own history: --extra-history rows do not make it larger
    own = (("training", len(hist[2])), ("quantization", len(quant[2]) if quant else None))
    for kind, rows in own:
        line = promotion.size_warning(kind, rows) if rows is not None else None
        if line:
            print(line, file=sys.stderr)
    rep = evaluate(hist, quant, test_fraction=test_fraction, seed=seed, noise_floor=floor,
                   extra_training=more)
    print_report(rep, Console())
    estimators = {"training": TrainingCostEstimator().fit(X, y, gpus=g),
                  "baseline": PowerLawBaseline().fit(X, y, gpus=g)}
    source = ", ".join(str(p) for p in [history, *extra_history])
    info = {"training": {"history": source, "jobs": len(y)},
            "baseline": {"history": source, "jobs": len(y)}}
    if quant is not None:
        Xq, gq, yq = quant
        estimators["quantization"] = QuantizationCostEstimator().fit(Xq, yq, gpus=gq)
        info["quantization"] = {"history": str(quantization), "jobs": len(yq)}
    with input_errors(), outset.output_set(models, "train") as stage:  # the models as one set
        save_estimators(stage, info=info, **estimators)
    print(f"saved {', '.join(sorted(estimators))} to {models}/")
    if report:
        command = "gpuplan " + shlex.join(sys.argv[1:]) if sys.argv[1:] else "gpuplan train"
        write_text(report, to_markdown(rep, command) + "\n")
        print(f"wrote {report}")
    # MLflow: one run, each estimator registered; @champion moves only on evidence
    tracker = tracking.get_tracker()
    verdicts: dict[str, promotion.Verdict] = {}
    descriptions: dict[str, str] = {}
    sources = {"training": (history, hist), "quantization": (quantization, quant)}
    for kind in tracking.ESTIMATOR_KINDS:
        path, data = sources[kind]
        if data is None:
            continue
        _, test = split_index(len(data[2]), test_fraction, seed)
        heldout = (data[0].iloc[test].assign(gpus=data[1][test]) if kind == "quantization"
                   else data[0].iloc[test], data[2][test])
        champion = tracker.champion(kind) if tracker.enabled else None
        verdicts[kind] = promotion.decide(kind, promotion.overall_mdape(rep, kind), champion,
                                          heldout, force=promote)
        descriptions[kind] = promotion.description(kind, Path(path), len(data[2]),
                                                   verdicts[kind], promotion.summary(rep, kind))
    refs = tracking.log_training(
        estimators, params={"history": str(history), "quantization": str(quantization or ""),
                            "models_dir": str(models), "test_fraction": test_fraction,
                            "seed": seed, "training_jobs": len(y), "promote_forced": promote},
        metrics=tracking.evaluation_metrics(rep),
        artifacts=[p for p in (report, models / "manifest.json") if p],
        promote={k: v.promote for k, v in verdicts.items()}, descriptions=descriptions,
        run_name=f"train {Path(history).name} ({len(y)} jobs)", tracker=tracker)
    for kind, ref in refs.items():
        print(f"registered {ref.uri}; {verdicts[kind].reason}")
    if not refs:
        print(f"not registered (MLflow tracking off); the estimators are in {models}/ "
              f"(use them with --models {models})")


def score(
    queue: Path = typer.Argument(..., help="Queue to score (CSV or Parquet)."),
    out: Path = typer.Option(..., "--out", help="Scored queue to write (CSV or Parquet)."),
    step_minutes: float = typer.Option(60.0, "--step-minutes", help="Minutes per plan step."),
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
