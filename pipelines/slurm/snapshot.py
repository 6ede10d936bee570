"""The scheduler's state now -> plan-day's three inputs: queue CSV, running.json, cluster.json.

GPU `g` of the plan is on node `g // node_size`, nodes in `sinfo`'s order sorted by name
(written to cluster.json as `nodes`). Slurm decides which GPUs inside a node a job gets, so a
running job's block is re-packed per node into aligned power-of-two blocks (its own indices
kept when they already are one): the plan only needs each node's capacity to be right.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from allocator.core.errors import InputError
from forecasting.columns import (
    BATCH_FEATURES,
    KINDS,
    QUANT_FEATURES,
    QUANT_OPTIONAL,
    TRAINING_FEATURES,
)
from pipelines.slurm.parse import Node, QueueJob, parse_meta

DEFAULT_WEIGHTS = {"realtime_penalty": 8.0, "decay": 0.97}
KIND_COLUMNS = {"training": TRAINING_FEATURES, "quantization": (*QUANT_FEATURES, *QUANT_OPTIONAL),
                "batch_inference": BATCH_FEATURES}


@dataclass(frozen=True)
class Snapshot:
    queue: pd.DataFrame
    running: dict[str, Any]
    cluster: dict[str, Any]
    skipped: list[tuple[str, str]]  # (job id, why it is in neither file)


def pow2(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def cluster_doc(nodes: list[Node], step_minutes: int, steps: int | None,
                name: str = "slurm") -> dict[str, Any]:
    """MODEL.md's cluster and weights, plus `nodes` (GPU g -> nodes[g // node_size])."""
    gpu_nodes = [n for n in nodes if n.gpus > 0]
    if not gpu_nodes:
        raise InputError("no node has GPUs (gres gpu)", field="gres")
    size = gpu_nodes[0].gpus
    for node in gpu_nodes:
        if node.gpus != size:
            raise InputError(f"has {node.gpus} GPUs; the model needs every node to have the "
                             f"same ({gpu_nodes[0].name} has {size})", job=node.name,
                             field="gres")
    horizon = steps or max(1, (24 * 60) // step_minutes)
    return {"name": name,
            "cluster": {"gpus": size * len(gpu_nodes), "node_size": size,
                        "step_minutes": step_minutes, "horizon_steps": horizon},
            "weights": dict(DEFAULT_WEIGHTS),
            "nodes": [n.name for n in gpu_nodes]}


def _kind_and_meta(job: QueueJob) -> tuple[str, dict[str, Any]]:
    try:
        meta = parse_meta(job.comment) or {}
    except InputError as err:
        raise InputError(err.message, job=job.id, field="comment") from None
    kind = str(meta.get("kind", "training"))
    return kind, meta


def _priority(meta: dict[str, Any]) -> Any:
    """gpuplan's priority from the metadata (the allocator's scale), else 1. Slurm's own
    priority (a large integer, 0 while held) is kept beside it as `slurm_priority`."""
    return meta.get("priority", 1)


def queue_frame(jobs: list[QueueJob]) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """Pending GPU jobs -> FORECASTING.md's queue (unscored), Slurm's view in extra columns."""
    rows, skipped = [], []
    for job in jobs:
        if job.state != "PENDING":
            continue
        if job.gpus <= 0:
            skipped.append((job.id, "pending without GPUs"))
            continue
        kind, meta = _kind_and_meta(job)
        row: dict[str, Any] = {"id": job.id, "kind": kind, "priority": _priority(meta),
                               "arrival_step": 0}
        for col in KIND_COLUMNS.get(kind, ()):
            row[col] = meta.get(col)
        row["gpus"] = job.gpus
        row.update({"name": job.name, "user": job.user,
                    "time_limit_minutes": job.time_limit_minutes,
                    "slurm_priority": job.priority,
                    "submitted_at": pd.Timestamp(job.submit_time, unit="s", tz="UTC")
                    .strftime("%Y-%m-%dT%H:%M:%SZ") if job.submit_time else "",
                    "slurm_reason": job.reason})
        rows.append(row)
    columns = ["id", "kind", "priority", "arrival_step"]
    for kind in KINDS:
        columns += [c for c in KIND_COLUMNS[kind] if c not in columns]
    columns += ["gpus", "name", "user", "time_limit_minutes", "slurm_priority", "submitted_at",
                "slurm_reason"]
    return pd.DataFrame(rows, columns=columns), skipped


def _steps(minutes: float, step_minutes: int) -> int:
    return max(1, math.ceil(minutes / step_minutes - 1e-9))


def running_doc(jobs: list[QueueJob], cluster: dict[str, Any], now: float
                ) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """Running GPU jobs -> plan-day's running.json (realtime: none; Slurm does not know it)."""
    names: list[str] = cluster["nodes"]
    size = cluster["cluster"]["node_size"]
    horizon = cluster["cluster"]["horizon_steps"]
    step = cluster["cluster"]["step_minutes"]
    free = {n: [True] * size for n in names}
    placed: list[tuple[QueueJob, int, int, str]] = []
    skipped = []
    todo = []
    for job in jobs:
        if job.state != "RUNNING" or job.gpus <= 0:
            continue
        unknown = [n for n in job.nodes if n not in free]
        if unknown:
            skipped.append((job.id, f"runs on {unknown[0]}, not a GPU node of the cluster"))
            continue
        todo.append(job)
    # multi-node jobs first: whole consecutive nodes, then single-node jobs, largest first
    todo.sort(key=lambda j: (-len(j.nodes), -pow2(j.gpus // max(1, len(j.nodes))), j.id))
    for job in todo:
        if len(job.nodes) > 1:
            idx = sorted(names.index(n) for n in job.nodes)
            per = job.gpus // len(job.nodes)
            k = pow2(job.gpus)
            if (per != size or idx != list(range(idx[0], idx[0] + len(idx)))
                    or (idx[0] * size) % k or len(idx) * size != k):
                raise InputError(f"runs on {','.join(job.nodes)} with {job.gpus} GPUs: not "
                                 "an aligned block of whole nodes the model can hold",
                                 job=job.id, field="nodes")
            for n in job.nodes:
                if not all(free[n]):
                    raise InputError("shares a node with another multi-node job", job=job.id,
                                     field="nodes")
                free[n] = [False] * size
            placed.append((job, idx[0] * size, k, job.nodes[0]))
            continue
        node = job.nodes[0] if job.nodes else ""
        if node not in free:
            skipped.append((job.id, "running without a node"))
            continue
        k = pow2(job.gpus)
        if k > size:
            raise InputError(f"holds {job.gpus} GPUs on one node of {size}", job=job.id,
                             field="gres_detail")
        own = job.gpu_index.get(node, ())
        starts = list(range(0, size, k))
        if own and min(own) % k == 0 and min(own) in starts:
            starts.remove(min(own))
            starts.insert(0, min(own))  # its real block first, when aligned
        for b in starts:
            if all(free[node][b:b + k]):
                free[node][b:b + k] = [False] * k
                placed.append((job, names.index(node) * size + b, k, node))
                break
        else:
            raise InputError(f"no aligned block of {k} GPUs left on {node}", job=job.id,
                             field="gres_detail")
    out = []
    for job, first, k, node in sorted(placed, key=lambda p: int(p[0].id)
                                      if p[0].id.isdigit() else 0):
        kind, meta = _kind_and_meta(job)
        if kind not in KINDS:
            raise InputError(f"must be one of {', '.join(KINDS)}", job=job.id, field="kind")
        elapsed_min = max(0.0, (now - job.start_time) / 60.0) if job.start_time else 0.0
        if job.time_limit_minutes is None:
            duration, remaining = horizon, horizon
        else:
            duration = _steps(job.time_limit_minutes, step)
            remaining = _steps(max(1.0, job.time_limit_minutes - elapsed_min), step)
        out.append({"id": job.id, "kind": kind, "priority": _priority(meta), "gpus": k,
                    "duration_steps": max(duration, remaining), "first_gpu": first,
                    "remaining_steps": remaining, "node": node,
                    "elapsed_minutes": round(elapsed_min, 1), "slurm_gpus": job.gpus})
    return {"jobs": out, "realtime": {}}, skipped


def take_snapshot(jobs: list[QueueJob], nodes: list[Node], now: float, step_minutes: int = 60,
                  steps: int | None = None) -> Snapshot:
    cluster = cluster_doc(nodes, step_minutes, steps)
    queue, skipped_q = queue_frame(jobs)
    running, skipped_r = running_doc(jobs, cluster, now)
    return Snapshot(queue=queue, running=running, cluster=cluster,
                    skipped=skipped_q + skipped_r)
