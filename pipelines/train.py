"""What `gpuplan train` does: evaluate on a held-out split, fit on every job, save, register.

A new model version becomes @champion only if it is at least as good as the current one on
the same held-out rows (pipelines.promotion), or when promotion is forced.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class TrainArgs:
    """What `gpuplan train` reads."""

    history: Path
    quantization: Path | None
    models: Path  # where the estimators are saved
    report: Path | None  # the report as Markdown, if asked for
    promote: bool
    test_fraction: float
    seed: int
    noise_sigma: float | None  # None: meta.json beside the history
    extra_history: list[Path] = field(default_factory=list)
    command: str = "gpuplan train"  # how to reproduce it, for the report


@dataclass(frozen=True)
class Trained:
    """What came of it: the evaluation, what was saved and registered, and the warnings."""

    evaluation: Any  # forecasting.evaluate's report
    saved: list[str]  # estimator names, sorted
    warnings: list[str]  # small-history warnings, one line each
    registered: list[tuple[str, str]]  # (model URI, the promotion verdict's reason)


def noise_floor(history: Path, sigma: float | None) -> float | None:
    """The noise floor to judge MdAPE by: --noise-sigma, else meta.json beside the history."""
    import json

    from allocator.core.errors import InputError
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


def _load(a: TrainArgs) -> tuple[Any, list, Any, float | None]:
    """Check the options and read the histories; nothing is written before."""
    from allocator.core.atomic import writable_target
    from allocator.core.limits import finite
    from forecasting.history import load_quant_history, load_training_history
    from pipelines import outset
    from pipelines.cliutil import distinct_outputs

    finite(a.test_fraction, "--test-fraction", low=0.05, high=0.9)
    if a.noise_sigma is not None:
        finite(a.noise_sigma, "--noise-sigma", low=0, high=5)
    outset.check_target(a.models)
    distinct_outputs([a.history, *([a.quantization] if a.quantization else [])],
                     [p for p in (a.report,) if p])
    if a.report:
        writable_target(a.report)
    hist = load_training_history(a.history)
    extra = [load_training_history(p) for p in a.extra_history]
    quant = load_quant_history(a.quantization) if a.quantization else None
    return hist, extra, quant, noise_floor(a.history, a.noise_sigma)


def run_train(a: TrainArgs) -> Trained:
    """Evaluate, fit on all jobs, save the models as one set, write the report, register."""
    from allocator.core.atomic import write_text
    from forecasting.evaluate import evaluate, join_histories, to_markdown
    from forecasting.quantization import QuantizationCostEstimator
    from forecasting.store import save_estimators
    from forecasting.training import PowerLawBaseline, TrainingCostEstimator
    from pipelines import outset, promotion

    hist, extra, quant, floor = _load(a)
    more = join_histories(*extra) if extra else None
    X, g, y = join_histories(hist, more)
    # the warning is about the user's own history: --extra-history rows do not make it larger
    own = (("training", len(hist[2])), ("quantization", len(quant[2]) if quant else None))
    warnings = [line for kind, rows in own if rows is not None
                for line in [promotion.size_warning(kind, rows)] if line]
    rep = evaluate(hist, quant, test_fraction=a.test_fraction, seed=a.seed, noise_floor=floor,
                   extra_training=more)
    estimators = {"training": TrainingCostEstimator().fit(X, y, gpus=g),
                  "baseline": PowerLawBaseline().fit(X, y, gpus=g)}
    source = ", ".join(str(p) for p in [a.history, *a.extra_history])
    info = {"training": {"history": source, "jobs": len(y)},
            "baseline": {"history": source, "jobs": len(y)}}
    if quant is not None:
        Xq, gq, yq = quant
        estimators["quantization"] = QuantizationCostEstimator().fit(Xq, yq, gpus=gq)
        info["quantization"] = {"history": str(a.quantization), "jobs": len(yq)}
    with outset.output_set(a.models, "train") as stage:  # the models as one set
        save_estimators(stage, info=info, **estimators)
    if a.report:
        write_text(a.report, to_markdown(rep, a.command) + "\n")
    registered = _register(a, estimators, rep, {"training": hist, "quantization": quant},
                           len(y))
    return Trained(evaluation=rep, saved=sorted(estimators), warnings=warnings,
                   registered=registered)


def _register(a: TrainArgs, estimators: dict, rep: Any, data: dict,
              jobs: int) -> list[tuple[str, str]]:
    """MLflow: one run, each estimator registered; @champion moves only on evidence."""
    from forecasting.evaluate import split_index
    from pipelines import promotion, tracking

    tracker = tracking.get_tracker()
    verdicts: dict[str, promotion.Verdict] = {}
    descriptions: dict[str, str] = {}
    paths = {"training": a.history, "quantization": a.quantization}
    for kind in tracking.ESTIMATOR_KINDS:
        path, rows = paths[kind], data[kind]
        if rows is None or path is None:
            continue
        _, test = split_index(len(rows[2]), a.test_fraction, a.seed)
        heldout = (rows[0].iloc[test].assign(gpus=rows[1][test]) if kind == "quantization"
                   else rows[0].iloc[test], rows[2][test])
        champion = tracker.champion(kind) if tracker.enabled else None
        verdicts[kind] = promotion.decide(kind, promotion.overall_mdape(rep, kind), champion,
                                          heldout, force=a.promote)
        descriptions[kind] = promotion.description(kind, Path(path), len(rows[2]),
                                                   verdicts[kind], promotion.summary(rep, kind))
    refs = tracking.log_training(
        estimators, params={"history": str(a.history),
                            "quantization": str(a.quantization or ""),
                            "models_dir": str(a.models), "test_fraction": a.test_fraction,
                            "seed": a.seed, "training_jobs": jobs,
                            "promote_forced": a.promote},
        metrics=tracking.evaluation_metrics(rep),
        artifacts=[p for p in (a.report, a.models / "manifest.json") if p],
        promote={k: v.promote for k, v in verdicts.items()}, descriptions=descriptions,
        run_name=f"train {Path(a.history).name} ({jobs} jobs)", tracker=tracker)
    return [(ref.uri, verdicts[kind].reason) for kind, ref in refs.items()]
