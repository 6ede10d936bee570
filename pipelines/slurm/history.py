"""`sacct` records -> a training (and quantization) history that `gpuplan train` accepts.

A row is kept only when it is a finished GPU job whose metadata gives every feature its kind
needs; every other row is listed with the reason, so that an operator sees what accounting
holds that the estimators cannot learn from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from allocator.core.errors import InputError
from forecasting.columns import QUANT_FEATURES, QUANT_OPTIONAL, TRAINING_FEATURES
from forecasting.history import quant_problems, training_problems
from pipelines.slurm.parse import AcctJob, parse_meta

FINISHED = "COMPLETED"


@dataclass(frozen=True)
class Unusable:
    id: str
    name: str
    reason: str


@dataclass(frozen=True)
class History:
    training: pd.DataFrame
    quantization: pd.DataFrame
    unusable: list[Unusable]


def metadata(job: AcctJob, features: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The job's gpuplan metadata: its comment's `gpuplan:{...}`, then the `--features` file's
    entry for its id or name on top (a later correction wins)."""
    meta = parse_meta(job.comment)
    extra = features.get(job.id) or features.get(job.name)
    if extra is None:
        return meta
    return {**(meta or {}), **extra}


def build_history(jobs: list[AcctJob], features: dict[str, dict[str, Any]] | None = None
                  ) -> History:
    """Finished GPU jobs with metadata -> history rows; the rest -> Unusable with a reason."""
    features = features or {}
    unusable: list[Unusable] = []
    rows: dict[str, list[dict]] = {"training": [], "quantization": []}
    for job in jobs:
        def skip(reason: str, job: AcctJob = job) -> None:
            unusable.append(Unusable(job.id, job.name, reason))

        if job.state != FINISHED:
            skip(f"state {job.state}: only COMPLETED jobs say what a job costs")
            continue
        if not job.gpus:
            skip("no GPU in tres.allocated")
            continue
        if job.gpus & (job.gpus - 1):
            skip(f"ran on {job.gpus} GPUs, not a power of two")
            continue
        if job.elapsed_seconds <= 0:
            skip("elapsed time is 0")
            continue
        try:
            meta = metadata(job, features)
        except InputError as err:
            skip(err.message)
            continue
        if meta is None:
            skip("no gpuplan metadata (comment `gpuplan:{...}` or --features)")
            continue
        kind = str(meta.get("kind", "training"))
        if kind not in rows:
            skip(f"kind {kind!r} has no cost history (training and quantization only)")
            continue
        wanted = TRAINING_FEATURES if kind == "training" else QUANT_FEATURES
        missing = [c for c in wanted if meta.get(c) in (None, "")]
        if missing:
            skip(f"metadata lacks {', '.join(missing)}")
            continue
        row = {"id": job.id, "name": job.name,
               "submitted_at": job.submit_time.strftime("%Y-%m-%dT%H:%M:%SZ")
               if job.submit_time is not None else "",
               "status": "completed"}
        optional = QUANT_OPTIONAL if kind == "quantization" else ()
        row.update({c: meta.get(c) for c in (*wanted, *optional) if c in meta or c in wanted})
        row["gpus"] = job.gpus
        row["gpu_hours"] = job.gpus * job.elapsed_seconds / 3600.0
        rows[kind].append(row)
    frames = {}
    for kind, items in rows.items():
        frame = pd.DataFrame(items)
        if len(frame):  # the estimators' own checks, so that `gpuplan train` accepts the file
            check = training_problems if kind == "training" else quant_problems
            problems = check(frame, outcomes=True)
            for i in np.flatnonzero(problems.bad):
                unusable.append(Unusable(str(frame["id"].iloc[i]), str(frame["name"].iloc[i]),
                                         f"field {problems.field[i]!r}: {problems.reason[i]}"))
            frame = frame[~problems.bad].reset_index(drop=True)
        frames[kind] = frame
    unusable.sort(key=lambda u: (int(u.id) if u.id.isdigit() else 0, u.id))
    return History(frames["training"], frames["quantization"], unusable)
