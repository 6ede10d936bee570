"""Why a job waits: its planned start, what binds it, and what change would start it earlier.

The reason is read off the plan's grid: from the job's arrival to its planned start, no
aligned block of its size is free for its whole run, and the block that frees first is
held by named jobs (running, realtime, queued jobs placed ahead, a reservation) until a
named step. The counterfactuals are not guessed: each is the same policy re-run on the
scenario with one change (fewer GPUs, a shorter run, a higher priority, a named job held
back until the job's planned start), and the start that re-plan gives. A job that starts
at its arrival, or arrives past the horizon, gets none: no change can start it earlier.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from allocator import grid as gridlib
from allocator.model import BatchJob, RealtimeJob, Scenario
from allocator.plan import make_plan


@dataclass(frozen=True)
class Holder:
    job: str
    kind: str  # running | realtime | placed ahead | reserved
    until: int  # first step the holder no longer holds the block (T: not in the horizon)
    priority: float


@dataclass(frozen=True)
class Change:
    what: str
    start: int | None  # the start the re-plan gives (None: still not in the horizon)


@dataclass(frozen=True)
class Explanation:
    job: str
    start: int | None  # None: not in the horizon
    reason: str
    holders: tuple[Holder, ...]
    changes: tuple[Change, ...]
    best: Change | None  # the change that starts it earliest (None: none helps)


def replan_start(scenario: Scenario, policy: str, job_id: str) -> int | None:
    """The start `policy` gives `job_id` on `scenario` (None: not in the horizon)."""
    plan = make_plan(scenario, policy)
    got = plan.starts().get(job_id)
    return None if got is None else got["start"]


def _with_job(scenario: Scenario, job_id: str, **changes: Any) -> Scenario:
    jobs = tuple(replace(j, **changes) if j.id == job_id else j for j in scenario.jobs)
    return replace(scenario, jobs=jobs)


def explain(scenario: Scenario, grid: np.ndarray, policy: str, job_id: str,
            movable: int = 3) -> Explanation:
    """Explain one queued batch job of a legal plan (`grid`: job indices, -1 free)."""
    index = next(i for i, j in enumerate(scenario.jobs) if j.id == job_id)
    job = scenario.jobs[index]
    if not isinstance(job, BatchJob) or job.running:
        raise ValueError(f"{job_id} is not a queued batch-like job")
    T = scenario.T
    placed = gridlib.placement(grid, index)
    start = None if placed is None else placed.start
    end_search = T if start is None else start
    held = holders(scenario, grid, index, job, end_search)
    if start is not None and start <= job.arrival_step:
        reason = f"starts at its arrival (step {job.arrival_step})"
    elif job.arrival_step >= T:
        reason = f"arrives at step {job.arrival_step}, past the horizon ({T} steps)"
    elif job.gpus > scenario.G:
        reason = f"needs {job.gpus} GPUs, the cluster has {scenario.G}"
    elif held:
        named = ", ".join(f"{h.job} ({h.kind}, until step {h.until})" for h in held)
        reason = (f"no aligned block of {job.gpus} GPUs is free for its {job.duration_steps}"
                  f"-step run before step {end_search}; the block that frees first is held "
                  f"by {named}")
        if start is None:
            reason += "; the horizon ends first"
    else:
        reason = "a block was free earlier, but the policy's objective placed it later"
    # Nothing starts a job before its arrival: one that starts there, or arrives past the
    # horizon, has no change to re-plan (each re-plan is a whole run of the policy).
    hopeless = job.arrival_step >= T or (start is not None and start <= job.arrival_step)
    changes = [] if hopeless else _changes(scenario, policy, job, held, start, movable)
    later = T + 1
    helping = [c for c in changes if (c.start if c.start is not None else later)
               < (start if start is not None else later)]
    best = min(helping, key=lambda c: later if c.start is None else c.start) if helping else None
    return Explanation(job_id, start, reason, tuple(held), tuple(changes), best)


def holders(scenario: Scenario, grid: np.ndarray, index: int, job: BatchJob,
             before: int) -> list[Holder]:
    """Who holds the block of the job's size that frees first after its arrival."""
    T, G, k = scenario.T, scenario.G, job.gpus
    if k > G or job.arrival_step >= T:
        return []
    t0 = min(job.arrival_step, T - 1)
    others = np.where(grid == index, -1, grid)
    best: tuple[int, int] | None = None  # (earliest free window, first GPU)
    for b in range(0, G - k + 1, k):
        busy = np.any(others[:, b : b + k] >= 0, axis=1)
        fits = [t for t in range(t0, T) if not busy[t : min(t + job.duration_steps, T)].any()]
        free_from = fits[0] if fits else T
        if best is None or free_from < best[0]:
            best = (free_from, b)
    if best is None:
        return []
    free_from, b = best
    before = min(before, free_from) if free_from > t0 else before
    reserved = {r.id for r in scenario.reservations}
    out: dict[int, Holder] = {}
    for i in sorted({int(c) for c in np.unique(others[t0:max(before, t0 + 1), b : b + k])
                     if c >= 0}):
        holder = scenario.jobs[i]
        cols = (others[:, b : b + k] == i).any(axis=1)
        until = int(np.flatnonzero(cols)[-1]) + 1
        if isinstance(holder, RealtimeJob):
            kind = "realtime"
        elif holder.running:
            kind = "running"
        elif holder.id in reserved:
            kind = "reserved"
        else:
            kind = "placed ahead"
        out[i] = Holder(holder.id, kind, until, holder.priority)
    return sorted(out.values(), key=lambda h: (h.until, h.job))


def _changes(scenario: Scenario, policy: str, job: BatchJob, holders: list[Holder],
             start: int | None, movable: int) -> list[Change]:
    """Each single change re-planned with the same policy; the job's start in each."""
    out = []
    if job.gpus > 1:
        fewer = _with_job(scenario, job.id, gpus=job.gpus // 2)
        out.append(Change(f"{job.gpus // 2} GPUs instead of {job.gpus}",
                          replan_start(_drop_reservation(fewer, job.id), policy, job.id)))
    if job.duration_steps > 1:
        half = -(-job.duration_steps // 2)
        shorter = _with_job(scenario, job.id, duration_steps=half)
        out.append(Change(f"{half} steps instead of {job.duration_steps}",
                          replan_start(_drop_reservation(shorter, job.id), policy, job.id)))
    top = max((j.priority for j in scenario.batch_jobs), default=job.priority)
    if job.priority <= top:
        raised = _with_job(scenario, job.id, priority=2 * top)
        out.append(Change(f"priority {2 * top:g} instead of {job.priority:g}",
                          replan_start(raised, policy, job.id)))
    until = scenario.T if start is None else start
    for h in [h for h in holders if h.kind == "placed ahead"][:movable]:
        held = scenario.job(h.job)
        if isinstance(held, BatchJob) and held.arrival_step < until:
            moved = _with_job(scenario, h.job, arrival_step=until)
            out.append(Change(f"{h.job} held back until step {until}",
                              replan_start(_drop_reservation(moved, h.job), policy, job.id)))
    return out


def _drop_reservation(scenario: Scenario, job_id: str) -> Scenario:
    """A changed job no longer matches its promise (size, run, arrival): the promise goes."""
    kept = tuple(r for r in scenario.reservations if r.id != job_id)
    return scenario if len(kept) == len(scenario.reservations) else replace(
        scenario, reservations=kept)
