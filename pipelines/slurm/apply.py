"""A plan's committed hour -> `scontrol` actions, computed against what Slurm shows now.

Only what differs is changed, so applying the same plan twice changes nothing the second
time, and a run stopped by a failing `scontrol` is completed by the next. Order: first what
restrains (holds, begin times, reservations), then the jobs the plan starts now are released,
so Slurm never sees a released job before the rest of the plan is in place. A running job is
never touched: gpuplan does not cancel, requeue or move running work.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from allocator.core.errors import InputError
from allocator.core.timeparse import parse_time
from allocator.model import Reservation
from pipelines.slurm.parse import Node, QueueJob

MARK = "gpuplan"  # AdminComment prefix on every job gpuplan changed (release-all finds them)
RESV_PREFIX = "gpuplan-"
SLACK_S = 90  # a begin time this close to the planned one is the same begin time


@dataclass(frozen=True)
class Action:
    job: str
    what: str  # start-now, start-later, hold, reserve, unreserve, release
    argv: tuple[str, ...]  # the scontrol arguments

    def line(self) -> str:
        return shlex.join(("scontrol", *self.argv))


@dataclass(frozen=True)
class PlanView:
    """What apply reads from a plan JSON (plan-day's plan.json, MODEL.md's plan plus starts)."""

    start: pd.Timestamp
    step_minutes: int
    gpus: int
    starts: dict[str, dict[str, int]]
    block: dict[str, int]  # GPUs each placed job holds (from the grid)
    unplaced: tuple[str, ...]
    reservations: tuple[Reservation, ...]
    rejected: dict[str, str]  # queue rows plan-day could not plan, with the reason
    label: str


def _int(value: Any, job: str | None, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"expected an integer, got {value!r}", job=job, field=where)
    return value


def read_plan(doc: Any) -> PlanView:
    if not isinstance(doc, dict):
        raise InputError("expected a plan object")
    grid = doc.get("grid")
    if not isinstance(grid, list) or not grid or not isinstance(grid[0], list):
        raise InputError("expected a grid of steps x GPUs", field="grid")
    if doc.get("start") is None:
        raise InputError("needs the plan's start time (plan-day writes it)", field="start")
    start = parse_time(doc["start"], "start")
    starts = doc.get("starts")
    if not isinstance(starts, dict):
        raise InputError("expected {job: {start, end, first_gpu}}", field="starts")
    clean = {}
    for job, s in starts.items():
        if not isinstance(s, dict):
            raise InputError("expected {start, end, first_gpu}", job=job, field="starts")
        clean[str(job)] = {k: _int(s.get(k), job, f"starts.{k}")
                           for k in ("start", "end", "first_gpu")}
    block = {}
    for job, s in clean.items():
        row = grid[s["start"]] if 0 <= s["start"] < len(grid) else []
        block[job] = sum(1 for cell in row if cell is not None and str(cell) == job) or 1
    unplaced = doc.get("unplaced") or []
    if not isinstance(unplaced, list):
        raise InputError("expected a list of job ids", field="unplaced")
    resv = doc.get("reservations") or []
    if not isinstance(resv, list):
        raise InputError("expected a list", field="reservations")
    reservations = []
    for r in resv:
        if not isinstance(r, dict):
            raise InputError("expected {id, start, first_gpu, gpus}", field="reservations")
        job = str(r.get("id"))
        reservations.append(Reservation(job, *(_int(r.get(k), job, f"reservations.{k}")
                                               for k in ("start", "first_gpu", "gpus"))))
    rejected = {str(r.get("id")): str(r.get("reason", "")) for r in doc.get("rejected") or []
                if isinstance(r, dict)}
    return PlanView(start=start, step_minutes=_int(doc.get("step_minutes", 60), None,
                                                    "step_minutes"),
                    gpus=len(grid[0]), starts=clean, block=block,
                    unplaced=tuple(map(str, unplaced)),
                    reservations=tuple(reservations), rejected=rejected,
                    label=f"{doc.get('policy', '?')} plan from {start:%Y-%m-%dT%H:%MZ}")


def nodes_for(first_gpu: int, gpus: int, nodes: list[str], node_size: int) -> list[str]:
    """GPUs [first, first + gpus) -> the nodes holding them (GPU g is on nodes[g // size])."""
    lo, hi = first_gpu // node_size, (first_gpu + max(gpus, 1) - 1) // node_size
    if hi >= len(nodes):
        raise InputError(f"GPU {first_gpu + gpus - 1} is beyond the cluster's {len(nodes)} "
                         f"nodes of {node_size}", field="first_gpu")
    return nodes[lo:hi + 1]


def _when(ts: float) -> str:
    """Epoch seconds -> scontrol's time syntax, which is the machine's local time."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(ts))


def _epoch(text: str) -> float:
    """scontrol's local `2026-11-30T18:00:00` -> epoch seconds (0 when not a time)."""
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return 0.0


def plan_actions(plan: PlanView, jobs: list[QueueJob], nodes: list[Node],
                 reservations: dict[str, dict[str, str]], now: float
                 ) -> tuple[list[Action], list[str]]:
    """(the actions that make Slurm match the plan's committed hour, notes on what is left)."""
    gpu_nodes = sorted((n for n in nodes if n.gpus > 0), key=lambda n: n.name)
    if not gpu_nodes:
        raise InputError("no node has GPUs", field="gres")
    size = gpu_nodes[0].gpus
    names = [n.name for n in gpu_nodes]
    if plan.gpus != size * len(names):
        raise InputError(f"plans {plan.gpus} GPUs; Slurm has {len(names)} nodes of {size}",
                         field="grid")
    by_id = {j.id: j for j in jobs}
    step_s = plan.step_minutes * 60
    t0 = plan.start.timestamp()
    if now >= t0 + step_s:  # its "now" is over: starting its step-0 jobs would be a guess
        raise InputError(f"the plan's committed step ended at {_when(t0 + step_s)} (local "
                         "time); plan again", field="start")
    notes: list[str] = []
    restrain: list[Action] = []
    release: list[Action] = []
    mark = f"AdminComment={MARK} {plan.label}"
    durations = {j: plan.starts[j]["end"] - plan.starts[j]["start"] for j in plan.starts}

    for job_id, s in plan.starts.items():
        job = by_id.get(job_id)
        want = nodes_for(s["first_gpu"], plan.block[job_id], names, size)
        if job is None:
            notes.append(f"{job_id}: not in Slurm's queue (finished or cancelled); skipped")
            continue
        if job.state != "PENDING":
            if job.state == "RUNNING" and not set(job.nodes) <= set(want):
                notes.append(f"{job_id}: running on {','.join(job.nodes)}, planned on "
                             f"{','.join(want)}; left alone (gpuplan never moves running work)")
            continue
        begin = t0 + s["start"] * step_s
        later = s["start"] > 0 and begin > now + SLACK_S
        same_nodes = set(job.required_nodes) == set(want)
        if later:
            begin_ok = abs(job.eligible_time - begin) <= SLACK_S
            if not (same_nodes and begin_ok):
                restrain.append(Action(job_id, "start-later", (
                    "update", f"JobId={job_id}", f"Nodelist={','.join(want)}",
                    f"StartTime={_when(begin)}", mark)))
            if job.held:
                restrain.append(Action(job_id, "release", ("release", job_id)))
        else:
            begin_ok = job.eligible_time <= now + SLACK_S
            if not (same_nodes and begin_ok):
                release.append(Action(job_id, "start-now", (
                    "update", f"JobId={job_id}", f"Nodelist={','.join(want)}",
                    "StartTime=now", mark)))
            if job.held:
                release.append(Action(job_id, "release", ("release", job_id)))

    for job_id, reason in plan.rejected.items():
        job = by_id.get(job_id)
        if job is not None and job.state == "PENDING":
            notes.append(f"{job_id}: not in the plan ({reason}); left to Slurm")

    for job_id in plan.unplaced:
        job = by_id.get(job_id)
        if job is None or job.state != "PENDING":
            continue
        if not job.held:  # marked first: a rerun after a failed hold redoes both
            restrain.append(Action(job_id, "hold", ("update", f"JobId={job_id}", mark)))
            restrain.append(Action(job_id, "hold", ("hold", job_id)))

    wanted = set()
    for r in plan.reservations:
        job = by_id.get(r.id)
        if job is None or job.state != "PENDING":
            continue
        name = f"{RESV_PREFIX}{r.id}"
        wanted.add(name)
        want = nodes_for(r.first_gpu, r.gpus, names, size)
        begin = max(t0 + r.start * step_s, now + 60)
        minutes = (job.time_limit_minutes or
                   durations.get(r.id, 1) * plan.step_minutes)
        have = reservations.get(name)
        if have is not None:
            have_begin = _epoch(have.get("StartTime", ""))
            soon = begin <= now + 2 * SLACK_S  # "now": any begin up to then is the same
            if (set(_expand(have.get("Nodes", ""))) == set(want)
                    and (abs(have_begin - begin) <= SLACK_S
                         or (soon and have_begin <= now + 2 * SLACK_S))):
                if job.reservation != name:
                    restrain.append(Action(r.id, "reserve", (
                        "update", f"JobId={r.id}", f"ReservationName={name}", mark)))
                continue
            restrain.append(Action(r.id, "unreserve", ("delete", "reservation", name)))
        restrain.append(Action(r.id, "reserve", (
            "create", "reservation", f"ReservationName={name}", f"StartTime={_when(begin)}",
            f"Duration={max(1, int(minutes))}", f"Nodes={','.join(want)}",
            f"Users={job.user or 'root'}", "Flags=IGNORE_JOBS")))
        restrain.append(Action(r.id, "reserve", (
            "update", f"JobId={r.id}", f"ReservationName={name}", mark)))
    running_in = {j.reservation for j in jobs if j.state == "RUNNING"}
    for name in sorted(reservations):
        if name.startswith(RESV_PREFIX) and name not in wanted and name not in running_in:
            for j in jobs:  # a pending job must not be left asking for a deleted reservation
                if j.state == "PENDING" and j.reservation == name:
                    restrain.append(Action(j.id, "unreserve", (
                        "update", f"JobId={j.id}", "ReservationName=", mark)))
            restrain.append(Action(name[len(RESV_PREFIX):], "unreserve",
                                   ("delete", "reservation", name)))
    return restrain + release, notes


def _expand(text: str) -> tuple[str, ...]:
    from pipelines.slurm.parse import expand_hostlist

    return expand_hostlist(text)


def release_actions(jobs: list[QueueJob], reservations: dict[str, dict[str, str]]
                    ) -> list[Action]:
    """Undo gpuplan: every pending job it marked goes back to Slurm's own scheduling (no node,
    no begin time, no hold), and its reservations are deleted."""
    out = []
    for job in jobs:
        if job.state != "PENDING" or not job.admin_comment.startswith(MARK):
            continue
        out.append(Action(job.id, "release", (
            "update", f"JobId={job.id}", "Nodelist=", "StartTime=now", "ReservationName=",
            "AdminComment=")))
        if job.held:
            out.append(Action(job.id, "release", ("release", job.id)))
    for name in sorted(reservations):
        if name.startswith(RESV_PREFIX):
            out.append(Action(name[len(RESV_PREFIX):], "unreserve",
                              ("delete", "reservation", name)))
    return out


@dataclass(frozen=True)
class Outcome:
    applied: list[Action]
    failed: Action | None
    error: str
    not_applied: list[Action]


def execute(actions: list[Action], scontrol: Callable[[tuple[str, ...]], None],
            log: Path | None, label: str) -> Outcome:
    """Run the actions in order; stop at the first failure. Each one is logged (JSON lines)."""
    applied: list[Action] = []
    for i, action in enumerate(actions):
        entry: dict[str, object] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "plan": label,
            "job": action.job, "what": action.what, "command": action.line()}
        try:
            scontrol(action.argv)
        except Exception as err:  # the summary names it; the rest is not attempted
            entry["error"] = str(err)
            _log(log, entry)
            return Outcome(applied, action, str(err), actions[i + 1:])
        entry["ok"] = True
        _log(log, entry)
        applied.append(action)
    return Outcome(applied, None, "", [])


def _log(path: Path | None, entry: dict[str, object]) -> None:
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry) + "\n")
