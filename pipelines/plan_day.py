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
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from allocator.core import atomic, limits, readers
from allocator.core.errors import InputError
from allocator.core.readers import read_json
from allocator.core.timeparse import parse_time
from allocator.model import BATCH_KINDS, Cluster, Scenario, Weights
from allocator.plan import Plan, make_plan
from allocator.policies.refine import DAY_TRIALS
from allocator.scenario_io import scenario_from_dict, scenario_to_dict
from pipelines import outset
from pipelines.day_guard import (
    PreviousPlan,
    Promise,
    guard_day,
    read_previous,
    reanchor,
    waited_steps,
)
from pipelines.home import bundled
from pipelines.home import out_dir as out_dir_default


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
    promises: tuple[Promise, ...] = ()  # --guard: the plan's promises (pipelines.day_guard)
    warnings: tuple[str, ...] = ()  # --guard: previous promises dropped, and why

    def time(self, step: int) -> pd.Timestamp:
        return self.start + pd.Timedelta(minutes=self.scenario.cluster.step_minutes * step)


@dataclass
class DayPlans:
    day: Day
    plan: Plan
    fifo: Plan


# ---------------------------------------------------------------- inputs


@dataclass(frozen=True)
class DayCluster:
    """The validated cluster config: MODEL.md's `cluster` and `weights`, and a name."""

    name: str
    cluster: Cluster
    weights: Weights

    def scenario(self, jobs: list[dict]) -> Scenario:
        """The day's scenario over these job entries; every contract rule checked once more."""
        return scenario_from_dict({"name": self.name, "cluster": asdict(self.cluster),
                                   "weights": asdict(self.weights), "jobs": jobs})


def load_cluster(path: str | Path, step_minutes: int | None = None,
                 horizon_steps: int | None = None) -> DayCluster:
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
        # every contract rule on cluster and weights, once
        empty = scenario_from_dict({"name": doc.get("name", "day"), "cluster": cluster,
                                    "weights": doc.get("weights"), "jobs": []})
        return DayCluster(name=empty.name, cluster=empty.cluster, weights=empty.weights)
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
    return parse_time(value, "--start").floor("min")


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
        held_now = [{"id": name, "kind": "realtime", "priority": 1, "demand": [0],
                     "swap_limit": 0, "current_gpus": gpus} for name, gpus in current.items()]
        scenario_from_dict({"cluster": {"gpus": G, "horizon_steps": 1},
                            "jobs": [*jobs, *held_now]})
        return jobs, current
    except InputError as err:
        raise err.located(str(path)) from None


def read_queue(path: str | Path) -> pd.DataFrame:
    """A queue or scored queue, CSV or Parquet by extension (FORECASTING.md)."""
    return readers.read_table(path, dtype={"id": str})


def is_scored(frame: pd.DataFrame) -> bool:
    return {"gpus", "duration_steps"}.issubset(frame.columns)


@dataclass
class Realtime:
    """Per service: GPU demand for the plan's steps, priority and swap limit."""

    demand: dict[str, list[int]]
    priority: dict[str, float]
    swap_limit: dict[str, int]
    source: str


def realtime_from_traffic(traffic: str | Path, services: str | Path, start: str | None,
                          steps: int, step_minutes: int, current: dict[str, list[int]],
                          quantile: float = 0.95) -> tuple[Realtime, pd.Timestamp]:
    """Fit the weekly profile on the traffic history (forecasting.profile) and map it to GPUs.

    Without a start, the plan begins at the hour after the history ends: same files, same day.
    """
    from forecasting.demand import demand_for_services, fit_services

    model, configs = fit_services(traffic, services, quantile)
    when = parse_start(start, model.last_hour_ + pd.Timedelta(hours=1))
    demand = demand_for_services(model, configs, when, steps, step_minutes,
                                 current={k: len(v) for k, v in current.items()})
    source = (f"weekly profile fitted on {Path(traffic).name} through "
              f"{model.last_hour_.strftime('%Y-%m-%d %H:%M')} UTC, {quantile:g} quantile, "
              f"services from {Path(services).name}")
    return Realtime(demand, {k: c.priority for k, c in configs.items()},
                    {k: c.swap_limit for k, c in configs.items()}, source), when


def realtime_from_profile(path: str | Path, start: str | None, steps: int,
                          step_minutes: int) -> tuple[Realtime, pd.Timestamp]:
    """Demand from a PROFILE.json written by `gpuplan profile` for this very plan window."""
    from forecasting.profile_file import ProfileFile

    doc = ProfileFile.read(path)  # every field checked: none is defaulted
    try:
        begins = parse_start(doc.start, None)
        when = parse_start(start, begins)
        if when != begins:
            raise InputError(f"is for a plan starting {begins}, not {when}", field="start")
        if doc.step_minutes != step_minutes:
            raise InputError(f"has {doc.step_minutes}-minute steps; the plan has "
                             f"{step_minutes}", field="step_minutes")
        short = next((s for s in doc.services if len(s.demand) < steps), None)
        if short is not None:
            raise InputError(f"needs at least {steps} demand values", job=short.service,
                             field="demand")
    except InputError as err:
        raise err.located(str(path)) from None
    return Realtime({s.service: list(s.demand[:steps]) for s in doc.services},
                    {s.service: s.priority for s in doc.services},
                    {s.service: s.swap_limit for s in doc.services},
                    f"demand from {Path(path).name}"), when


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
        elif not math.isfinite(priority) or not 0 < priority <= limits.MAX_PRIORITY:
            reason = f"priority must be a number > 0 and <= {limits.MAX_PRIORITY:g}"
        elif gpus is None or gpus < 1 or gpus & (gpus - 1):
            reason = ("no GPU count fits its memory" if gpus == 0 else
                      "GPU count is not a power of two")
        elif gpus > G:
            reason = f"needs {gpus} GPUs; the cluster has {G}"
        elif duration is None or duration < 1:
            reason = "no duration estimate"
        elif duration > limits.MAX_DURATION:
            reason = f"{duration} steps is beyond gpuplan's limit of {limits.MAX_DURATION}"
        elif arrival is None or not 0 <= arrival <= limits.MAX_DURATION:
            reason = f"arrival_step must be a whole number from 0 to {limits.MAX_DURATION}"
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


def build_day(cluster: DayCluster, start: pd.Timestamp, queue: pd.DataFrame, realtime: Realtime,
              running: list[dict], current: dict[str, list[int]],
              problems: dict[str, str] | None = None,
              sources: dict[str, str] | None = None) -> Day:
    """The day's scenario: realtime first (file order), then running jobs, then the queue."""
    unknown = sorted(set(current) - set(realtime.demand))
    if unknown:
        raise InputError("holds GPUs but has no demand (not in the services)",
                         job=unknown[0], field="realtime")
    rt = realtime_jobs(realtime.demand, realtime.priority, realtime.swap_limit, current)
    taken = {j["id"] for j in rt} | {str(j["id"]) for j in running}
    queued, rejected = queue_jobs(queue, cluster.cluster.gpus, taken, problems)
    scenario = cluster.scenario([*rt, *running, *queued])
    return Day(scenario=scenario, start=start, rejected=rejected,
               queued=[j["id"] for j in queued], running=[str(j["id"]) for j in running],
               sources={"realtime demand": realtime.source, **(sources or {})})


# ---------------------------------------------------------------- planning and outputs


# A daily plan is made once and kept, so fast spends a few more runs on it: pin trials
# (BENCHMARKS.md, "Pin trials": chosen on the tuning seeds), a round of defer trials after
# them ("Defer trials"), two rounds of realtime hops on fast's plan beside the trials and on
# what they found ("Realtime hops"), and the trials again from the plan they found, until a
# pass lifts nothing ("Trial passes"). `gpuplan plan` spends the same on a plan its bound
# finds wanting (allocator/policies/refine.py, where the numbers live).
DAY_PIN_TRIALS = DAY_TRIALS["pin_trials"]
DAY_DEFER_TRIALS = DAY_TRIALS["defer_trials"]
DAY_HOPS = DAY_TRIALS["hops"]
DAY_TRIAL_PASSES = DAY_TRIALS["trial_passes"]


def plan_day(day: Day, full: bool = False, time_limit: float = 60.0,
             pin_trials: int = DAY_PIN_TRIALS,
             defer_trials: int = DAY_DEFER_TRIALS, hops: int = DAY_HOPS,
             trial_passes: int = DAY_TRIAL_PASSES) -> DayPlans:
    """The day's plan (fast, or the MILP for the periodic review) and fifo on the same day;
    `pin_trials`: fast's replans with one delayed job pinned earlier, `defer_trials` with
    one started job held back a step, `hops` rounds of realtime hops (0: none),
    `trial_passes` how often the trials run again from what they found."""
    options: dict[str, float | int] = (
        {"time_limit": time_limit} if full else {"pin_trials": pin_trials,
                                                 "defer_trials": defer_trials, "hops": hops,
                                                 "trial_passes": trial_passes})
    plan = make_plan(day.scenario, "full" if full else "fast", bound="auto", **options)
    # fifo is the contract's baseline, which honours no promise (MODEL.md)
    fifo = make_plan(replace(day.scenario, reservations=()), "fifo")
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
    body["node_size"] = day.scenario.cluster.node_size
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


# Every file plan-day writes: one output set (pipelines.outset), swapped in as a whole.
DAY_FILES = ("plan.json", "scenario.json", "grid.csv", "grid.png", "report.md", "report.html",
             "queue_scored.csv", "queue_rejects.csv")


def day_outputs(out_dir: str | Path) -> DayOutputs:
    out_dir = Path(out_dir)
    return DayOutputs(plan=out_dir / "plan.json", scenario=out_dir / "scenario.json",
                      grid_csv=out_dir / "grid.csv", grid_png=out_dir / "grid.png",
                      report_md=out_dir / "report.md", report_html=out_dir / "report.html")


def write_outputs(plans: DayPlans, out_dir: str | Path, tracking_note: str = "") -> DayOutputs:
    """Every file atomically: plan.json, scenario.json, grid.csv, grid.png, report.md/.html."""
    from allocator.render import render_png
    from pipelines import report

    out = day_outputs(out_dir)
    day, plan = plans.day, plans.plan
    atomic.write_text(out.plan, json.dumps(plan_document(plans), indent=1, allow_nan=False)
                      + "\n")
    atomic.write_text(out.scenario, json.dumps(scenario_to_dict(day.scenario), indent=1,
                                               allow_nan=False) + "\n")
    atomic.write_text(out.grid_csv, grid_csv(day, plan))
    atomic.write_bytes(out.grid_png, render_png(
        [plan.to_dict(), plans.fifo.to_dict()], node_size=day.scenario.cluster.node_size,
        step_minutes=day.scenario.cluster.step_minutes,
        start=day.start.to_pydatetime()))
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
    proven = plans.plan.extras.get("bound") or {}  # allocator.plan.prove_bound
    if proven.get("value") is not None:
        out["upper_bound"] = float(proven["value"])
        if proven.get("gap") is not None:
            out["gap_to_bound"] = float(proven["gap"])
    out["unplaced"] = len(plans.plan.unplaced()) + len(plans.day.rejected)
    out["started"] = len([j for j in plans.day.queued if j in plans.plan.starts()])
    solve = plans.plan.solve  # the MILP's report (policy full)
    if solve is not None:
        for name, value in (("gap", solve.gap), ("best_bound", solve.best_bound),
                            ("solve_seconds", solve.solve_seconds)):
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


# ---------------------------------------------------------------- the whole pipeline


@dataclass
class DayArgs:
    """What `gpuplan plan-day` reads; the demo and the tests build it directly."""

    queue: Path
    cluster: Path = field(default_factory=lambda: bundled("data/cluster.json"))
    traffic: Path | None = None
    services: Path | None = field(
        default_factory=lambda: bundled("data/traffic/services.json"))
    profile: Path | None = None
    running: Path | None = None
    models: Path | None = None  # None: the registry's champion, else home.default_models()
    start: str | None = None
    step_minutes: int | None = None
    steps: int | None = None
    full: bool = False
    time_limit: float = 60.0
    pin_trials: int = DAY_PIN_TRIALS  # fast: replans with one delayed job pinned earlier
    defer_trials: int = DAY_DEFER_TRIALS  # fast: replans with one started job held back
    hops: int = DAY_HOPS  # fast: rounds of realtime hops
    trial_passes: int = DAY_TRIAL_PASSES  # fast: the trials again until a pass lifts nothing
    out_dir: Path = field(default_factory=lambda: out_dir_default("day"))
    duration_from: str = "p90"
    guard: bool = False  # the starvation guard: promises kept from --previous-plan, and made
    previous_plan: Path | None = None
    age: float = 0.25  # claim per step waited (with the queue's optional submitted_at)


@dataclass
class DayResult:
    plans: DayPlans
    outputs: DayOutputs
    run_id: str | None


def score_on_the_fly(args: DayArgs, frame: pd.DataFrame, step_minutes: int, tracker,
                     into: Path | None = None
                     ) -> tuple[pd.DataFrame, dict[str, str], dict[str, str]]:
    """Score an unscored queue with the registry's champions (else models/); logged as a
    scoring run, the scored file kept beside the plan."""
    from pipelines import scoring

    run = scoring.score(frame, args.queue, models=args.models, step_minutes=step_minutes,
                        duration_from=args.duration_from, tracker=tracker)
    into = Path(args.out_dir) if into is None else into
    scored_path = into / "queue_scored.csv"
    rejects_path = into / "queue_rejects.csv"
    atomic.write_all({scored_path: run.result.scored.to_csv(index=False),
                      rejects_path: run.result.rejects.to_csv(index=False)})
    run.log("plan-day", [scored_path, rejects_path], tracker=tracker, warned=False)
    return run.result.scored, run.problems(), run.sources()


def run_day(args: DayArgs, tracker=None) -> DayResult:
    """Build, plan, write (atomically, always), then log to MLflow (when it answers)."""
    from pipelines import tracking

    tracker = tracker or tracking.get_tracker()
    cluster = load_cluster(args.cluster, args.step_minutes, args.steps)
    steps, minutes = cluster.cluster.horizon_steps, cluster.cluster.step_minutes
    running, current = load_running(args.running, cluster.cluster.gpus)
    if args.time_limit is not None:
        limits.finite(args.time_limit, "--time-limit", low=0, low_open=True,
                      high=limits.MAX_SECONDS)
    if args.profile is not None:
        realtime, start = realtime_from_profile(args.profile, args.start, steps, minutes)
    elif args.traffic is not None:
        if args.services is None:
            raise InputError("--traffic needs --services (SERVICES.json)", field="--services")
        realtime, start = realtime_from_traffic(args.traffic, args.services, args.start,
                                                steps, minutes, current)
    else:
        raise InputError("give --traffic (with --services) or --profile", field="--traffic")
    unknown = sorted(set(current) - set(realtime.demand))
    if unknown:
        raise InputError("holds GPUs but is not among the services", file=str(args.running),
                         job=unknown[0], field="realtime")
    frame = read_queue(args.queue)
    previous = None
    if args.previous_plan is not None:
        if not args.guard:
            raise InputError("needs --guard (the promises are the guard's)",
                             field="--previous-plan")
        previous = read_previous(args.previous_plan)
    limits.finite(args.age, "--age", low=0, high=limits.MAX_PRIORITY)
    # Everything below writes into a staging directory that replaces out_dir as one set.
    with outset.output_set(args.out_dir, "plan-day", owned=DAY_FILES) as stage:
        if is_scored(frame):
            problems: dict[str, str] = {}
            sources = {"queue estimates": f"scored beforehand ({Path(args.queue).name})"}
        else:
            try:
                frame, problems, sources = score_on_the_fly(args, frame, minutes, tracker,
                                                            stage)
            except InputError as err:
                raise err.located(str(args.queue)) from None
        try:
            day = build_day(cluster, start, frame, realtime, running, current, problems,
                            sources)
        except InputError as err:
            raise err.located(str(args.cluster)) from None
        if args.guard:
            day = guard(day, frame, previous, args.age, str(args.queue))
        plans = plan_day(day, full=args.full, time_limit=args.time_limit,
                         pin_trials=args.pin_trials, defer_trials=args.defer_trials,
                         hops=args.hops, trial_passes=args.trial_passes)
        cluster_name = cluster_label(day.scenario.name, args.cluster)
        # the cluster, the plan's start and the policy; the wall-clock minute it was planned
        # tells reruns of the same day apart (the plan itself never depends on the clock)
        planned = pd.Timestamp.now(tz="UTC").strftime("%H:%M")
        run_name = (f"{cluster_name} {start.strftime('%Y-%m-%d %H:%M')} {plans.plan.policy} "
                    f"(planned {planned} UTC)")
        tags = {**tracking.run_tags(), "policy": plans.plan.policy, "cluster": cluster_name,
                "plan_start": start.strftime("%Y-%m-%dT%H:%MZ")}
        with tracker.run("plans", run_name, tags=tags) as run:
            note = (f"MLflow run {run.run_id} in experiment {tracking.EXPERIMENTS['plans']} "
                    f"at {tracker.uri}" if run.run_id else "MLflow tracking off for this run")
            staged = write_outputs(plans, stage, tracking_note=note)
            run.params(plan_params(plans, str(args.cluster)))
            run.metrics(plan_metrics(plans))
            run.artifacts(staged.all(), "plan")
            run.tags({"mlflow.note.content": run_note(staged.report_md)})  # the UI's description
    return DayResult(plans=plans, outputs=day_outputs(args.out_dir), run_id=run.run_id)


def guard(day: Day, queue: pd.DataFrame, previous: PreviousPlan | None, age: float,
          queue_file: str) -> Day:
    """The day with the starvation guard's promises (pipelines.day_guard) as reservations."""
    minutes = day.scenario.cluster.step_minutes
    waited, claims_from = waited_steps(queue, day.start, minutes, queue_file)
    held = reanchor(previous, day.start, minutes) if previous is not None else {}
    got = guard_day(day.scenario, day.queued, waited, age, held)
    kept = (f"; promises kept from {previous.path.name}" if previous is not None else "")
    return replace(day, scenario=got.scenario, promises=got.promises, warnings=got.warnings,
                   sources={**day.sources,
                            "promise claims": f"age {age:g} per step: {claims_from}{kept}"})


def cluster_label(name: str, cluster_file: Path) -> str:
    """The cluster's name for run names and tags: its `name`, else the config file's stem."""
    return name if name and name != "day" else Path(cluster_file).stem


NOTE_LIMIT = 4000  # MLflow caps tag values; the whole report is an artifact beside it


def run_note(report_md: Path) -> str:
    """The report's first part (what to do now, the fifo comparison), for the run's page."""
    text = report_md.read_text(encoding="utf-8")
    cut = text.find("## Hour by hour")
    head = text[: cut if cut > 0 else len(text)]
    head = "\n".join(ln for ln in head.splitlines() if not ln.startswith("!["))
    if len(head) > NOTE_LIMIT:
        head = head[:NOTE_LIMIT].rsplit("\n", 1)[0] + "\n\n(continued in plan/report.md)"
    return head
