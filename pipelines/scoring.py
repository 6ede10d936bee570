"""The one scoring pipeline: estimators -> a queue scored -> its files -> a scoring run.

`gpuplan score` and `plan-day` (an unscored queue) both go through `score`, so that the
estimators are chosen, the queue scored and the run logged the same way for both.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from allocator.core.atomic import write_all
from allocator.core.errors import InputError
from forecasting.scoring import Scoring

if TYPE_CHECKING:
    from pipelines.tracking import ModelRef, Tracker


@dataclass(frozen=True)
class ScoreRun:
    """A queue scored: what came of it, which models scored it, and how long it took."""

    queue: Path
    rows: int  # rows in the queue as read
    result: Scoring
    refs: dict[str, ModelRef]  # kind -> where its estimator came from
    models: Path | None  # --models, or None: the registry's champions
    step_minutes: float
    duration_from: str
    seconds: float

    def problems(self) -> dict[str, str]:
        """Rejected row id -> "field: reason" (rows without an id are left out)."""
        return {str(r.id): f"{r.field}: {r.reason}"
                for r in self.result.rejects.itertuples(index=False) if str(r.id)}

    def sources(self) -> dict[str, str]:
        """Where each estimate came from, for the day's report."""
        from pipelines import tracking

        out = {f"{kind} estimator": (f"{ref.uri} (registry alias {tracking.CHAMPION})"
                                     if ref.source == "registry" else f"{ref.uri} (local file)")
               for kind, ref in self.refs.items()}
        out["batch inference estimate"] = "throughput formula (forecasting.batch_inference)"
        out["durations"] = (f"{self.duration_from} GPU-hours / GPUs, rounded up to whole "
                            "steps")
        return out

    def log(self, caller: str, artifacts: list[Path], tracker: Tracker | None = None,
            warned: bool = True) -> None:
        """One run in gpuplan-scoring: the models, the queue and what came of it (`warned`:
        with the count of rows scored with warnings, as `score` logs; plan-day does not)."""
        from pipelines import tracking

        metrics = {"jobs": self.rows, "scored": len(self.result.scored),
                   "rejected": len(self.result.rejects)}
        if warned:
            metrics["warned"] = len(self.result.warnings)
        tracking.log_scoring(
            params={"queue": str(self.queue), "step_minutes": self.step_minutes,
                    "duration_from": self.duration_from, "models_dir": str(self.models or ""),
                    "caller": caller},
            metrics={**metrics, "seconds": self.seconds}, refs=self.refs,
            artifacts=artifacts, tracker=tracker)


def score(frame: pd.DataFrame, queue: Path, *, models: Path | None, step_minutes: float,
          duration_from: str, tracker: Tracker | None = None) -> ScoreRun:
    """Score a queue read from `queue` with --models, else the registry's champions."""
    from forecasting.scoring import score_queue_full
    from pipelines import tracking

    began = time.perf_counter()
    estimators, refs = tracking.load_estimators(models, tracker)
    try:
        result = score_queue_full(frame, estimators, step_minutes=step_minutes,
                                  duration_from=duration_from)
    except InputError as err:
        raise err.located(str(queue)) from None
    return ScoreRun(queue=Path(queue), rows=len(frame), result=result, refs=refs,
                    models=models, step_minutes=step_minutes, duration_from=duration_from,
                    seconds=time.perf_counter() - began)


# ---------------------------------------------------------------- `gpuplan score`


@dataclass(frozen=True)
class ScoreArgs:
    """What `gpuplan score` reads."""

    queue: Path
    out: Path
    rejects: Path
    step_minutes: float
    models: Path | None  # None: the registry's champions
    max_reject_share: float  # above it (or with every row rejected) the queue fails
    duration_from: str


@dataclass(frozen=True)
class ScoreFile:
    """`score_file`'s outcome: the run, and whether the queue failed (too many rejects)."""

    run: ScoreRun  # its seconds: the whole call, files written
    failed: bool
    share: float  # of the rows rejected


def table_body(df: pd.DataFrame, path: Path) -> str | bytes:
    """The file a table becomes: Parquet or CSV by extension."""
    if path.suffix.lower() in (".parquet", ".pq"):
        return df.to_parquet(index=False)
    return df.to_csv(index=False)


def score_file(args: ScoreArgs) -> ScoreFile:
    """Score a queue file; write the rejects (and warnings), and the scored queue unless more
    than max_reject_share of the rows (or all of them) were rejected."""
    from allocator.core.limits import MAX_STEP_MINUTES, finite
    from forecasting.history import read_table
    from pipelines.cliutil import distinct_outputs

    began = time.perf_counter()
    finite(args.step_minutes, "--step-minutes", low=0, low_open=True, high=MAX_STEP_MINUTES)
    distinct_outputs([args.queue], [args.out, args.rejects])
    if args.duration_from not in ("p50", "p90"):
        raise InputError("must be p50 or p90", field="--duration-from")
    try:
        frame = read_table(args.queue, as_text=True)
    except InputError as err:
        raise err.located(str(args.queue)) from None
    run = score(frame, args.queue, models=args.models, step_minutes=args.step_minutes,
                duration_from=args.duration_from)
    result = run.result
    share = len(result.rejects) / run.rows if run.rows else 1.0
    failed = len(result.scored) == 0 or share > args.max_reject_share
    # rejects, then warnings (column `level`); the scored queue only when it did not fail
    files = {args.rejects: table_body(result.report(), args.rejects)}
    if not failed:
        files[args.out] = table_body(result.scored, args.out)
    write_all(files)
    seconds = time.perf_counter() - began
    return ScoreFile(run=replace(run, seconds=seconds), failed=failed, share=share)
