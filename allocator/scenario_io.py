"""Scenario files in, typed scenarios out: every rule of MODEL.md's fine print, checked once.

A rule broken raises `InputError` naming the job and the field; the CLI adds the file.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from allocator.core import limits
from allocator.core.errors import InputError
from allocator.model import (
    BATCH_KINDS,
    REALTIME,
    BatchJob,
    Cluster,
    Job,
    RealtimeJob,
    Reservation,
    Running,
    Scenario,
    Weights,
)
from allocator.reservations import as_dicts
from allocator.reservations import problems as reservation_problems


class _NonFinite:
    """Stands in for NaN/Infinity while parsing, so the error can say where it was."""

    def __init__(self, text: str) -> None:
        self.text = text


def _parse_float(text: str) -> Any:
    value = float(text)
    return value if math.isfinite(value) else _NonFinite(text)


def _find_non_finite(node: Any, path: list[str | int]) -> list[str | int] | None:
    if isinstance(node, _NonFinite):
        return path
    items: Iterable[tuple[Any, Any]]
    if isinstance(node, dict):
        items = node.items()
    elif isinstance(node, list):
        items = enumerate(node)
    else:
        return None
    for key, value in items:
        found = _find_non_finite(value, [*path, key])
        if found is not None:
            return found
    return None


def load_scenario(path: str | Path) -> Scenario:
    """Read and check a scenario file; InputError (with the file named) on any bad input."""
    path = Path(path)
    limits.check_file_size(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise InputError(f"cannot read scenario: {err.strerror or err}", file=str(path)
                         ) from None
    except UnicodeDecodeError:
        raise InputError("scenario is not UTF-8 text", file=str(path)) from None
    try:
        return parse_scenario(text)
    except InputError as err:
        raise err.located(str(path)) from None


def load_scenario_dir(directory: str | Path) -> list[Scenario]:
    """Every *.json scenario in `directory`: the generator's named ones first, in its order."""
    from allocator.scenarios import SPECS

    files = sorted(Path(directory).glob("*.json"))
    if not files:
        raise InputError("no scenario files", file=str(directory))
    loaded = [load_scenario(f) for f in files]
    order = list(SPECS)
    loaded.sort(key=lambda s: (order.index(s.name) if s.name in order else len(order), s.name))
    return loaded


def parse_scenario(text: str) -> Scenario:
    try:
        raw = json.loads(text, parse_constant=_NonFinite, parse_float=_parse_float)
    except json.JSONDecodeError as err:
        raise InputError(f"not valid JSON: {err.msg} at line {err.lineno} column {err.colno}"
                         ) from None
    except RecursionError:
        raise InputError("not valid JSON: nesting too deep") from None
    except ValueError as err:  # e.g. an integer beyond Python's digit limit
        raise InputError(f"not valid JSON: {err}") from None
    return scenario_from_dict(raw)


def scenario_from_dict(raw: Any) -> Scenario:
    bad = _find_non_finite(raw, [])
    if bad is not None:
        job = None
        if len(bad) >= 2 and bad[0] == "jobs" and isinstance(raw.get("jobs"), list):
            entry = raw["jobs"][bad[1]]
            named = isinstance(entry, dict) and isinstance(entry.get("id"), str)
            job = entry["id"] if named else f"#{bad[1]}"
        raise InputError("NaN and Infinity are not allowed", job=job,
                         field=".".join(str(p) for p in bad))
    if not isinstance(raw, dict):
        raise InputError("a scenario is a JSON object")
    name = raw.get("name", "")
    if name is None:
        name = ""
    if not isinstance(name, str):
        raise InputError("must be a string", field="name")
    cluster = _cluster(raw.get("cluster"))
    weights = _weights(raw.get("weights"))
    jobs_raw = raw.get("jobs", [])
    if not isinstance(jobs_raw, list):
        raise InputError("must be a list of jobs", field="jobs")
    if len(jobs_raw) > limits.MAX_JOBS:
        raise InputError(f"{len(jobs_raw)} jobs; gpuplan plans at most {limits.MAX_JOBS}",
                         field="jobs")
    jobs: list[Job] = []
    seen: set[str] = set()
    for index, entry in enumerate(jobs_raw):
        job = _job(entry, index, cluster)
        if job.id in seen:
            raise InputError("duplicate id", job=job.id, field="id")
        seen.add(job.id)
        jobs.append(job)
    _check_occupancy(jobs, cluster)
    scenario = Scenario(cluster=cluster, weights=weights, jobs=tuple(jobs), name=name)
    promised = reservations_from_json(raw.get("reservations"))
    if promised:
        broken = reservation_problems(scenario, promised)
        if broken:
            job, fld, message = broken[0]
            raise InputError(message, job=job, field=f"reservations.{fld}")
        scenario = replace(scenario, reservations=promised)
    return scenario


def reservations_from_json(raw: Any) -> tuple[Reservation, ...]:
    """The optional `reservations` list of a scenario or a plan: {"id", "start",
    "first_gpu", "gpus"} each, every field checked."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InputError("must be a list", field="reservations")
    out = []
    for n, entry in enumerate(raw):
        if not isinstance(entry, dict):
            raise InputError("must be an object", job=f"#{n}", field="reservations")
        rid = entry.get("id")
        if not isinstance(rid, str) or not rid:
            raise InputError("must be a non-empty string", job=f"#{n}", field="reservations.id")
        out.append(Reservation(
            id=rid, start=_int(entry, "start", job=rid, field="reservations.start", minimum=0),
            first_gpu=_int(entry, "first_gpu", job=rid, field="reservations.first_gpu",
                           minimum=0),
            gpus=_int(entry, "gpus", job=rid, field="reservations.gpus", minimum=1)))
    return tuple(out)


# -- field readers ---------------------------------------------------------------------------

def _default(default: object, job: str | None, name: str) -> object:
    """An absent or null field: its default, or an error when it has none."""
    if default is None:
        raise InputError("is required", job=job, field=name)
    return default


def _int(obj: dict[str, Any], key: str, *, job: str | None = None, field: str | None = None,
         default: int | None = None, minimum: int | None = None,
         maximum: int | None = None) -> int:
    name = field or key
    value = obj.get(key)
    if value is None:
        return _default(default, job, name)  # type: ignore[return-value]
    if type(value) is not int:
        raise InputError(f"must be a JSON integer, got {json.dumps(value)}", job=job, field=name)
    if minimum is not None and value < minimum:
        raise InputError(f"must be >= {minimum}, got {value}", job=job, field=name)
    if maximum is not None and value > maximum:
        raise InputError(f"must be <= {maximum} (gpuplan's limit), got {value}", job=job,
                         field=name)
    return value


def _number(obj: dict[str, Any], key: str, *, job: str | None = None, field: str | None = None,
            default: float | None = None) -> float:
    name = field or key
    value = obj.get(key)
    if value is None:
        return _default(default, job, name)  # type: ignore[return-value]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"must be a number, got {json.dumps(value)}", job=job, field=name)
    try:
        number = float(value)
    except OverflowError:  # an integer too large for a float overflows, like 1e400
        number = math.inf
    if not math.isfinite(number):
        raise InputError("must be finite", job=job, field=name)
    return number


def _cluster(raw: Any) -> Cluster:
    if not isinstance(raw, dict):
        raise InputError("is required and must be an object", field="cluster")
    gpus = _int(raw, "gpus", field="cluster.gpus", minimum=1, maximum=limits.MAX_GPUS)
    horizon = _int(raw, "horizon_steps", field="cluster.horizon_steps", minimum=1,
                   maximum=limits.MAX_STEPS)
    node_size = _int(raw, "node_size", field="cluster.node_size", default=8, minimum=1,
                     maximum=limits.MAX_GPUS)
    step_minutes = _int(raw, "step_minutes", field="cluster.step_minutes", default=60, minimum=1,
                        maximum=limits.MAX_STEP_MINUTES)
    if gpus * horizon > limits.MAX_CELLS:
        raise InputError(f"a grid of {gpus} GPUs x {horizon} steps is beyond gpuplan's limit "
                         f"of {limits.MAX_CELLS} cells", field="cluster.horizon_steps")
    return Cluster(gpus=gpus, horizon_steps=horizon, node_size=node_size,
                   step_minutes=step_minutes)


def _weights(raw: Any) -> Weights:
    if raw is None:
        return Weights()
    if not isinstance(raw, dict):
        raise InputError("must be an object", field="weights")
    penalty = _number(raw, "realtime_penalty", field="weights.realtime_penalty", default=8.0)
    decay = _number(raw, "decay", field="weights.decay", default=0.97)
    if not 0 <= penalty <= limits.MAX_PRIORITY:
        raise InputError(f"must be from 0 to {limits.MAX_PRIORITY:g}, got {penalty:g}",
                         field="weights.realtime_penalty")
    if not 0 < decay <= 1:
        raise InputError(f"must be in (0, 1], got {decay}", field="weights.decay")
    return Weights(realtime_penalty=penalty, decay=decay)


def _job(raw: Any, index: int, cluster: Cluster) -> Job:
    label = f"#{index}"
    if not isinstance(raw, dict):
        raise InputError("a job is a JSON object", job=label)
    job_id = raw.get("id")
    if not isinstance(job_id, str) or not job_id:
        raise InputError("must be a non-empty string", job=label, field="id")
    kind = raw.get("kind")
    if kind not in (*BATCH_KINDS, REALTIME):
        allowed = ", ".join((*BATCH_KINDS, REALTIME))
        raise InputError(f"must be one of {allowed}; got {json.dumps(kind)}", job=job_id,
                         field="kind")
    priority = _number(raw, "priority", job=job_id)
    if not 0 < priority <= limits.MAX_PRIORITY:
        raise InputError(f"must be > 0 and <= {limits.MAX_PRIORITY:g}, got {priority:g}",
                         job=job_id, field="priority")
    if kind == REALTIME:
        return _realtime(raw, job_id, priority, cluster)
    return _batch(raw, job_id, kind, priority, cluster)


def _batch(raw: dict[str, Any], job_id: str, kind: str, priority: float,
           cluster: Cluster) -> BatchJob:
    gpus = _int(raw, "gpus", job=job_id, minimum=1)
    if gpus & (gpus - 1) or gpus > cluster.gpus:
        raise InputError(f"must be a power of two from 1 to {cluster.gpus}, got {gpus}",
                         job=job_id, field="gpus")
    duration = _int(raw, "duration_steps", job=job_id, minimum=1, maximum=limits.MAX_DURATION)
    arrival = _int(raw, "arrival_step", job=job_id, default=0, minimum=0,
                   maximum=limits.MAX_DURATION)
    running = None
    if raw.get("running") is not None:
        raw_running = raw["running"]
        if not isinstance(raw_running, dict):
            raise InputError("must be an object or null", job=job_id, field="running")
        first = _int(raw_running, "first_gpu", job=job_id, field="running.first_gpu", minimum=0)
        remaining = _int(raw_running, "remaining_steps", job=job_id,
                         field="running.remaining_steps", minimum=1)
        if remaining > duration:
            raise InputError(f"must be <= duration_steps ({duration}), got {remaining}",
                             job=job_id, field="running.remaining_steps")
        # Not required to be aligned: a real cluster's current placement is what it is
        # (MODEL.md, "running blocks"); it is pinned where it runs, new blocks stay aligned.
        if first + gpus > cluster.gpus:
            raise InputError(f"block [{first}, {first + gpus}) is outside the cluster of "
                             f"{cluster.gpus} GPUs", job=job_id, field="running.first_gpu")
        running = Running(first_gpu=first, remaining_steps=remaining)
    return BatchJob(id=job_id, kind=kind, priority=priority, gpus=gpus,
                    duration_steps=duration, arrival_step=arrival, running=running)


def _realtime(raw: dict[str, Any], job_id: str, priority: float, cluster: Cluster) -> RealtimeJob:
    demand = raw.get("demand")
    if not isinstance(demand, list):
        raise InputError("is required: a list of integers, one per step", job=job_id,
                         field="demand")
    if len(demand) != cluster.horizon_steps:
        raise InputError(f"must have horizon_steps = {cluster.horizon_steps} entries, "
                         f"got {len(demand)}", job=job_id, field="demand")
    for t, value in enumerate(demand):
        if type(value) is not int or value < 0:
            raise InputError(f"must be a non-negative JSON integer, got {json.dumps(value)}",
                             job=job_id, field=f"demand[{t}]")
        if value > limits.MAX_DEMAND:
            raise InputError(f"must be <= {limits.MAX_DEMAND} (gpuplan's limit), got {value}",
                             job=job_id, field=f"demand[{t}]")
    swap = _int(raw, "swap_limit", job=job_id, minimum=0, maximum=limits.MAX_SWAP)
    current = None
    if raw.get("current_gpus") is not None:
        raw_gpus = raw["current_gpus"]
        if not isinstance(raw_gpus, list):
            raise InputError("must be a list of GPU indices or null", job=job_id,
                             field="current_gpus")
        for value in raw_gpus:
            if type(value) is not int or not 0 <= value < cluster.gpus:
                raise InputError(f"must hold GPU indices in [0, {cluster.gpus}), got "
                                 f"{json.dumps(value)}", job=job_id, field="current_gpus")
        if len(set(raw_gpus)) != len(raw_gpus):
            raise InputError("GPUs must be distinct", job=job_id, field="current_gpus")
        current = tuple(raw_gpus)
    return RealtimeJob(id=job_id, priority=priority, demand=tuple(demand), swap_limit=swap,
                       current_gpus=current)


def _check_occupancy(jobs: list[Job], cluster: Cluster) -> None:
    """Running blocks and current_gpus must not overlap each other at step 0."""
    owner: dict[int, str] = {}
    for job in jobs:
        if isinstance(job, BatchJob) and job.running:
            first = job.running.first_gpu
            for g in range(first, first + job.gpus):
                if g in owner:
                    raise InputError(f"block overlaps the running block of {owner[g]!r} on "
                                     f"GPU {g}", job=job.id, field="running.first_gpu")
                owner[g] = job.id
    for job in jobs:
        if isinstance(job, RealtimeJob) and job.current_gpus:
            for g in job.current_gpus:
                if g in owner:
                    raise InputError(f"GPU {g} is already held by {owner[g]!r}", job=job.id,
                                     field="current_gpus")
                owner[g] = job.id


def scenario_to_dict(scenario: Scenario) -> dict[str, Any]:
    """The scenario back as contract JSON (for generated scenarios and round trips)."""
    jobs = []
    for job in scenario.jobs:
        if isinstance(job, RealtimeJob):
            entry: dict[str, Any] = {"id": job.id, "kind": REALTIME, "priority": job.priority,
                                     "demand": list(job.demand), "swap_limit": job.swap_limit}
            if job.current_gpus is not None:
                entry["current_gpus"] = list(job.current_gpus)
        else:
            entry = {"id": job.id, "kind": job.kind, "priority": job.priority,
                     "gpus": job.gpus, "duration_steps": job.duration_steps,
                     "arrival_step": job.arrival_step}
            if job.running:
                entry["running"] = {"first_gpu": job.running.first_gpu,
                                    "remaining_steps": job.running.remaining_steps}
        jobs.append(entry)
    c, w = scenario.cluster, scenario.weights
    return {
        "name": scenario.name,
        "cluster": {"gpus": c.gpus, "node_size": c.node_size, "step_minutes": c.step_minutes,
                    "horizon_steps": c.horizon_steps},
        "weights": {"realtime_penalty": w.realtime_penalty, "decay": w.decay},
        "jobs": jobs,
        **({"reservations": as_dicts(scenario.reservations)} if scenario.reservations else {}),
    }
