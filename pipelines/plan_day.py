"""The daily plan: cluster + scored queue + realtime demand + running jobs -> scenario -> plan.

Everything that can be wrong in one queue row rejects that row (with its reason, shown in the
report) and never the day; what is wrong with the cluster, the running jobs or the services
is bad input (exit 2). The plan is a pure function of the inputs: the same files give the
same plan, whatever the clock says, unless `--start now` is asked for.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from allocator.errors import InputError
from allocator.model import Scenario
from allocator.plan import Plan, make_plan
from allocator.scenario_io import scenario_from_dict, scenario_to_dict
from pipelines import atomic

BATCH_KINDS = ("training", "quantization", "batch_inference")


@dataclass(frozen=True)
class Rejected:
    """A queued job left out of the scenario itself, and why (shown as unplaced)."""

    id: str
    kind: str
    reason: str


@dataclass
class Day:
    """The day's scenario with everything the report needs that the scenario does not hold."""

    scenario: Scenario
    start: pd.Timestamp
    rejected: list[Rejected] = field(default_factory=list)
    queued: list[str] = field(default_factory=list)  # batch ids from the queue, in queue order
    running: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)  # where the estimates came from

    def time(self, step: int) -> pd.Timestamp:
        return self.start + pd.Timedelta(minutes=self.scenario.cluster.step_minutes * step)


@dataclass
class DayPlans:
    day: Day
    plan: Plan
    fifo: Plan


# ---------------------------------------------------------------- inputs


def read_json(path: str | Path) -> Any:
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"),
                          parse_constant=lambda c: _raise(f"{c} is not allowed"))
    except FileNotFoundError:
        raise InputError("file not found", file=str(path)) from None
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise InputError(f"not valid JSON: {err}", file=str(path)) from None


def _raise(message: str) -> Any:
    raise ValueError(message)


def load_cluster(path: str | Path, step_minutes: int | None = None,
                 horizon_steps: int | None = None) -> dict:
    """The cluster config: MODEL.md's `cluster` and `weights` (plus an optional `name`).

    `horizon_steps` defaults to one day of steps; a step override rescales it.
    """
    doc = read_json(path)
    try:
        if not isinstance(doc, dict) or not isinstance(doc.get("cluster"), dict):
            raise InputError('expected {"cluster": {...}, "weights": {...}}', field="cluster")
        cluster = dict(doc["cluster"])
        if step_minutes is not None:
            cluster["step_minutes"] = step_minutes
        minutes = cluster.get("step_minutes", 60)
        if horizon_steps is not None:
            cluster["horizon_steps"] = horizon_steps
        elif step_minutes is not None or "horizon_steps" not in cluster:
            if type(minutes) is not int or minutes <= 0:
                raise InputError("must be a positive integer", field="cluster.step_minutes")
            cluster["horizon_steps"] = max(1, (24 * 60) // minutes)
        body = {"name": doc.get("name", "day"), "cluster": cluster,
                "weights": doc.get("weights"), "jobs": []}
        scenario_from_dict(body)  # every contract rule on cluster and weights, once
        return body
    except InputError as err:
        raise err.located(str(path)) from None


def parse_start(value: str | None, fallback: pd.Timestamp | None) -> pd.Timestamp:
    """ISO 8601 (UTC when no offset), `now` (this hour), or the fallback; floored to the minute."""
    if value is None or value == "":
        if fallback is None:
            raise InputError("give --start (ISO 8601 or 'now'): nothing to derive it from",
                             field="--start")
        return fallback
    if value.lower() == "now":
        return pd.Timestamp.now(tz="UTC").floor("h")
    try:
        stamp = pd.Timestamp(value)
    except (ValueError, TypeError):
        stamp = pd.NaT
    if stamp is pd.NaT:
        raise InputError(f"{value!r} is not an ISO 8601 time", field="--start")
    stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    return stamp.floor("min")


def load_running(path: str | Path | None, G: int) -> tuple[list[dict], dict[str, list[int]]]:
    """Running batch jobs (scenario entries) and the GPUs each realtime service holds now.

    File: {"jobs": [{id, kind, priority, gpus, duration_steps, first_gpu, remaining_steps}],
           "realtime": {"service": [gpu, ...]}}
    """
    if path is None:
        return [], {}
    doc = read_json(path)
    try:
        if not isinstance(doc, dict):
            raise InputError('expected {"jobs": [...], "realtime": {...}}')
        jobs = []
        for i, entry in enumerate(doc.get("jobs") or []):
            if not isinstance(entry, dict):
                raise InputError("a running job is an object", job=f"#{i}")
            job = {k: entry.get(k) for k in ("id", "kind", "priority", "gpus")}
            remaining = entry.get("remaining_steps")
            duration = entry.get("duration_steps", remaining)
            if type(remaining) is int and type(duration) is int:
                duration = max(duration, remaining)
            job["duration_steps"] = duration
            job["running"] = {"first_gpu": entry.get("first_gpu"), "remaining_steps": remaining}
            if job["kind"] not in BATCH_KINDS:
                raise InputError(f"must be one of {', '.join(BATCH_KINDS)}",
                                 job=str(job["id"]), field="kind")
            jobs.append(job)
        held = doc.get("realtime") or {}
        if not isinstance(held, dict):
            raise InputError("must map a service to the GPUs it holds", field="realtime")
        current = {}
        for service, gpus in held.items():
            if not isinstance(gpus, list):
                raise InputError("must be a list of GPU indices", job=service,
                                 field="realtime")
            current[str(service)] = gpus
        # the contract's own checks (alignment, overlaps, ranges), before anything else
        scenario_from_dict({"cluster": {"gpus": G, "horizon_steps": 1}, "jobs": jobs})
        return jobs, current
    except InputError as err:
        raise err.located(str(path)) from None


def read_queue(path: str | Path) -> pd.DataFrame:
    """A queue or scored queue, CSV or Parquet by extension (FORECASTING.md)."""
    path = Path(path)
    name = path.name.lower()
    try:
        if name.endswith((".parquet", ".pq")):
            return pd.read_parquet(path)
        return pd.read_csv(path, dtype={"id": str})
    except FileNotFoundError:
        raise InputError("file not found", file=str(path)) from None
    except (OSError, ValueError, pd.errors.ParserError) as err:
        raise InputError(f"cannot read queue: {err}", file=str(path)) from None


def is_scored(frame: pd.DataFrame) -> bool:
    return {"gpus", "duration_steps"}.issubset(frame.columns)


# ---------------------------------------------------------------- building the scenario


def _whole(value: Any) -> int | None:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(f) or f != int(f):
        return None
    return int(f)


def queue_jobs(frame: pd.DataFrame, G: int, taken: set[str],
               problems: dict[str, str] | None = None) -> tuple[list[dict], list[Rejected]]:
    """Scored rows -> batch job entries; a row that cannot become a job is rejected, named.

    `problems` are the scorer's own (id -> reason) for rows it could not score.
    """
    problems = problems or {}
    jobs, rejected = [], []
    if "id" not in frame.columns:
        raise InputError("the queue needs an `id` column", field="id")
    for row in frame.to_dict("records"):
        job_id = str(row.get("id", "")).strip()
        kind = str(row.get("kind", ""))
        if not job_id or job_id == "nan":
            rejected.append(Rejected("(no id)", kind, "row without an id"))
            continue
        if job_id in problems:
            rejected.append(Rejected(job_id, kind, f"not scored: {problems[job_id]}"))
            continue
        if job_id in taken:
            rejected.append(Rejected(job_id, kind, "duplicate id (already running or queued)"))
            continue
        reason = None
        gpus = _whole(row.get("gpus"))
        duration = _whole(row.get("duration_steps"))
        arrival = _whole(row.get("arrival_step", 0))
        if pd.isna(row.get("arrival_step", 0)):
            arrival = 0
        try:
            priority = float(row.get("priority"))
        except (TypeError, ValueError):
            priority = float("nan")
        if kind not in BATCH_KINDS:
            reason = f"unknown kind {kind!r}"
        elif not math.isfinite(priority) or priority <= 0:
            reason = "priority must be a number > 0"
        elif gpus is None or gpus < 1 or gpus & (gpus - 1):
            reason = ("no GPU count fits its memory" if gpus == 0 else
                      "GPU count is not a power of two")
        elif gpus > G:
            reason = f"needs {gpus} GPUs; the cluster has {G}"
        elif duration is None or duration < 1:
            reason = "no duration estimate"
        elif arrival is None or arrival < 0:
            reason = "arrival_step must be a whole number >= 0"
        if reason:
            rejected.append(Rejected(job_id, kind, reason))
            continue
        taken.add(job_id)
        jobs.append({"id": job_id, "kind": kind, "priority": priority, "gpus": gpus,
                     "duration_steps": duration, "arrival_step": arrival})
    return jobs, rejected


def realtime_jobs(demand: dict[str, list[int]], priorities: dict[str, float],
                  swap_limits: dict[str, int], current: dict[str, list[int]]) -> list[dict]:
    out = []
    for service, curve in demand.items():
        entry = {"id": service, "kind": "realtime", "priority": priorities[service],
                 "demand": [int(x) for x in curve], "swap_limit": int(swap_limits[service])}
        if service in current:
            entry["current_gpus"] = list(current[service])
        out.append(entry)
    return out


def build_day(cluster: dict, start: pd.Timestamp, queue: pd.DataFrame,
              demand: dict[str, list[int]], priorities: dict[str, float],
              swap_limits: dict[str, int], running: list[dict],
              current: dict[str, list[int]], problems: dict[str, str] | None = None,
              sources: dict[str, str] | None = None) -> Day:
    """The day's scenario: realtime first (file order), then running jobs, then the queue."""
    G = cluster["cluster"]["gpus"]
    unknown = sorted(set(current) - set(demand))
    if unknown:
        raise InputError("holds GPUs but has no demand (not in the services)",
                         job=unknown[0], field="realtime")
    rt = realtime_jobs(demand, priorities, swap_limits, current)
    taken = {j["id"] for j in rt} | {str(j["id"]) for j in running}
    queued, rejected = queue_jobs(queue, G, taken, problems)
    body = dict(cluster, jobs=[*rt, *running, *queued])
    scenario = scenario_from_dict(body)
    return Day(scenario=scenario, start=start, rejected=rejected,
               queued=[j["id"] for j in queued], running=[str(j["id"]) for j in running],
               sources=dict(sources or {}))


# ---------------------------------------------------------------- planning and outputs


def plan_day(day: Day, full: bool = False, time_limit: float = 60.0) -> DayPlans:
    """The day's plan (fast, or the MILP for the periodic review) and fifo on the same day."""
    options = {"time_limit": time_limit} if full else {}
    plan = make_plan(day.scenario, "full" if full else "fast", **options)
    fifo = make_plan(day.scenario, "fifo")
    return DayPlans(day=day, plan=plan, fifo=fifo)


def grid_csv(day: Day, plan: Plan) -> str:
    """One row per step: its start time, then the job on each GPU (empty when free)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["step", "time", *[f"gpu{g}" for g in range(day.scenario.G)]])
    for t, row in enumerate(plan.id_grid()):
        writer.writerow([t, day.time(t).strftime("%Y-%m-%dT%H:%M:%SZ"),
                         *["" if c is None else c for c in row]])
    return buf.getvalue()


def plan_document(plans: DayPlans) -> dict:
    """The plan JSON (MODEL.md's fields first), with the day's context beside them."""
    day = plans.day
    body = plans.plan.to_dict()
    body["start"] = day.start.strftime("%Y-%m-%dT%H:%M:%SZ")
    body["step_minutes"] = day.scenario.cluster.step_minutes
    body["rejected"] = [{"id": r.id, "kind": r.kind, "reason": r.reason} for r in day.rejected]
    body["fifo_metrics"] = plans.fifo.metrics.as_dict()
    body["estimates"] = day.sources
    return body


@dataclass
class DayOutputs:
    plan: Path
    scenario: Path
    grid_csv: Path
    grid_png: Path
    report_md: Path
    report_html: Path

    def all(self) -> list[Path]:
        return [self.plan, self.scenario, self.grid_csv, self.grid_png, self.report_md,
                self.report_html]


def write_outputs(plans: DayPlans, out_dir: str | Path, tracking_note: str = "") -> DayOutputs:
    """Every file atomically: plan.json, scenario.json, grid.csv, grid.png, report.md/.html."""
    from allocator.render import render_png
    from pipelines import report

    out_dir = Path(out_dir)
    out = DayOutputs(plan=out_dir / "plan.json", scenario=out_dir / "scenario.json",
                     grid_csv=out_dir / "grid.csv", grid_png=out_dir / "grid.png",
                     report_md=out_dir / "report.md", report_html=out_dir / "report.html")
    day, plan = plans.day, plans.plan
    atomic.write_text(out.plan, json.dumps(plan_document(plans), indent=1) + "\n")
    atomic.write_text(out.scenario,
                      json.dumps(scenario_to_dict(day.scenario), indent=1) + "\n")
    atomic.write_text(out.grid_csv, grid_csv(day, plan))
    atomic.write_bytes(out.grid_png, render_png([plan.to_dict(), plans.fifo.to_dict()]))
    doc = report.build(plans, picture=out.grid_png.name, tracking_note=tracking_note)
    atomic.write_text(out.report_md, doc.markdown())
    atomic.write_text(out.report_html, doc.html())
    return out


def plan_metrics(plans: DayPlans) -> dict[str, float]:
    """What each plan run logs: the plan's metrics, fifo's beside them, latency and gap."""
    m = plans.plan.metrics.as_dict()
    f = plans.fifo.metrics.as_dict()
    out = {k: float(v) for k, v in m.items()}
    out.update({f"fifo_{k}": float(v) for k, v in f.items()})
    out["latency_ms"] = plans.plan.latency_ms
    out["unplaced"] = len(plans.plan.unplaced()) + len(plans.day.rejected)
    out["started"] = len([j for j in plans.day.queued if j in plans.plan.starts()])
    solve = plans.plan.extras.get("solve") or {}  # the MILP's report (allocator.policies.full)
    for key, name in (("gap", "gap"), ("best_bound", "best_bound"),
                      ("solve_seconds", "solve_seconds")):
        value = solve.get(key)
        if isinstance(value, int | float) and math.isfinite(value):
            out[name] = float(value)
    return out


def plan_params(plans: DayPlans, cluster_file: str = "") -> dict[str, Any]:
    s = plans.day.scenario
    return {"scenario": s.name, "policy": plans.plan.policy, "cluster_file": cluster_file,
            "gpus": s.G, "node_size": s.cluster.node_size,
            "step_minutes": s.cluster.step_minutes, "horizon_steps": s.T,
            "realtime_penalty": s.weights.realtime_penalty, "decay": s.weights.decay,
            "start": plans.day.start.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "queued_jobs": len(plans.day.queued), "rejected_jobs": len(plans.day.rejected),
            "running_jobs": len(plans.day.running),
            "realtime_services": len(s.realtime_jobs)}
