"""Optimise the day, commit the hour: a rolling-horizon replay of one world under one policy.

At each planning step the planner sees only the jobs that have arrived, running jobs pinned
with their remaining time re-estimated from the prediction (an overrun gets 1 more step, or
`overrun_share` of its elapsed steps; never a move), and a forecast of realtime demand.
Only the next `replan_every` steps are committed; the true world then advances with actual
durations and actual demand, so forecast errors are absorbed by the next plan instead of
compounding.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures import TimeoutError as FuturesTimeout
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from allocator import grid as gridlib
from allocator.core.errors import InputError
from allocator.grid import FREE
from allocator.model import BatchJob, Cluster, RealtimeJob, Running, Scenario
from allocator.plan import make_plan
from allocator.reservations import problems
from pipelines.estimates import duration_sigma, p90_starts, range_accuracy
from pipelines.guard import GUARDED, Guard
from pipelines.promising import Rules
from pipelines.worlds import Service, SimJob, World


@dataclass(frozen=True)
class SimConfig:
    """How the planner is run inside the replay (the world itself is fixed)."""

    horizon: int = 24  # steps each plan looks ahead
    replan_every: int = 1  # steps committed per plan (1 = commit the hour)
    margin: float = 0.15  # provisioning headroom on the realtime forecast
    level_rho: float = 0.8  # how far the last observed level carries into the forecast
    lead: int = 1  # provision each step for the max of itself and the next `lead` steps
    decay: float | None = None  # override the world's decay (the horizon sweep uses it)
    guard: bool = False  # the starvation guard for fast/full/backfill (pipelines/guard.py)
    age: float = 0.25  # ... its claim per step waited; 0: off
    reserve: bool = True  # the top job's reservation for fast/full/backfill; False: off
    reservations: int = 1  # promises held at once
    half_node_reservations: int = 0  # ... and besides them, for jobs of half a node or more
    age_in_plan: bool = False  # plan with claims as priorities too (not only to pick the top)
    ranges: bool = False  # also plan at p90 durations for a start range (pipelines/estimates)
    stability: float | None = None  # fast keeps last plan's starts unless a fresh plan gains
    # more than this (relative; allocator/policies/stable.py); None: off
    estimate_horizon: int = 72  # a job the first plan leaves out of its horizon gets its
    # estimate from a plan this many steps long (same policy, estimates only); 0: off
    overrun_share: float = 0.0  # a job past its predicted end is planned to run this share
    # of its elapsed steps more (rounded up, at least 1); 0: one more step each plan


@dataclass
class Replay:
    """What actually ran: grid codes are job index, `len(jobs) + r` for service r, -1 free."""

    world: World
    policy: str
    config: SimConfig
    grid: np.ndarray
    starts: dict[int, tuple[int, int]] = field(default_factory=dict)
    provisioned: np.ndarray | None = None  # (L, R) demand the plan was given for each step
    plan_ms: list[float] = field(default_factory=list)
    churn_pairs: int = 0  # (job, consecutive plans) pairs where the job stayed queued
    churn_moved: int = 0  # ... of which its planned start moved
    blocked_starts: int = 0  # planned starts not taken: the block was still truly busy
    estimates: dict[int, int | None] = field(default_factory=dict)  # first plan's start
    estimates_p90: dict[int, int | None] = field(default_factory=dict)  # ... at p90 durations
    guard: Guard | None = None  # the starvation guard's promises, for guarded policies
    long_plans: int = 0  # plans made at `estimate_horizon` for start estimates


MAX_ESTIMATE_HORIZON = 336  # two weeks of hourly steps


def check_estimate_horizon(value: int, horizon: int) -> int:
    """`--estimate-horizon`: 0 (off) or more steps than the plan's horizon, at most 336."""
    if value != 0 and not horizon < value <= MAX_ESTIMATE_HORIZON:
        raise InputError(f"--estimate-horizon must be 0 (off) or in ({horizon}, "
                         f"{MAX_ESTIMATE_HORIZON}], got {value}", field="--estimate-horizon")
    return value


def stability_option(text: str) -> float | None:
    """`--stability`: "off", or the relative gain in [0, 10] a fresh plan needs."""
    if text.strip().lower() == "off":
        return None
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 <= value <= 10:  # also refuses NaN
        raise InputError(f"--stability must be 'off' or a number in [0, 10], got {text!r}",
                         field="--stability")
    return value


# -- forecast ---------------------------------------------------------------------------

def forecast(service: Service, t0: int, horizon: int, config: SimConfig,
             extend: bool = False) -> tuple[int, ...]:
    """Demand for steps t0.. : the expected curve, rescaled by what was just observed.

    Two corrections, both from actual load already seen: the level of the last 24 steps
    (a trend the profile misses) for the whole horizon, and the last step's ratio, fading
    over the lead time (weight `level_rho ** lead`) and never below 1, so a dip or a trace
    gap never releases GPUs the profile says are needed. `margin` is added, then rounded up.
    A service carrying an estimator's `issued` forecasts uses them as they are (no
    correction: the estimator already updated on the hours seen).
    Each step then asks for the most of itself and the next `lead` steps: rising early is
    the hedge against a batch job that overruns onto GPUs the service was to grow into.
    `extend` (the long plans made for start estimates only): past the curve's end, its last
    day repeated.
    """
    span = horizon + config.lead
    if service.issued is not None:  # an estimator's own forecast, made at t0
        expected = np.asarray(service.issued[t0, :span], dtype=float)
    else:
        expected = np.asarray(service.expected[t0 : t0 + span], dtype=float)
    if extend and 0 < len(expected) < span:
        expected = periodic(expected, span)
    if len(expected) < span:
        raise ValueError(f"service {service.id}: expected curve ends before step "
                         f"{t0 + horizon}; extend the world's look-ahead")
    if t0 > 0 and service.issued is None:
        seen = slice(max(0, t0 - 24), t0)
        level = service.actual[seen].mean() / max(service.expected[seen].mean(), 1e-6)
        level = float(np.clip(level, 0.5, 2.0))
        last = service.actual[t0 - 1] / max(service.expected[t0 - 1] * level, 1e-6)
        last = float(np.clip(last, 1.0, 4.0))
        expected = expected * level * last ** (config.level_rho ** np.arange(1, span + 1))
    need = np.maximum(np.ceil(expected * (1.0 + config.margin) - 1e-9), service.min_gpus)
    ahead = np.lib.stride_tricks.sliding_window_view(need, config.lead + 1).max(axis=1)
    return tuple(int(v) for v in ahead[:horizon])


def periodic(curve: np.ndarray, span: int, period: int = 24) -> np.ndarray:
    """`curve` continued to `span` steps by repeating its last `period` steps (a day)."""
    last = curve[-min(period, len(curve)):]
    reps = -(-(span - len(curve)) // len(last))
    return np.concatenate([curve, np.tile(last, reps)])[:span]


# -- one planning run --------------------------------------------------------------------

def build_scenario(world: World, t0: int, starts: dict[int, tuple[int, int]],
                   held: Sequence[set[int] | None], config: SimConfig
                   ) -> tuple[Scenario, list[int]]:
    """The planner's view at t0, and for each scenario job its world code."""
    jobs: list[BatchJob | RealtimeJob] = []
    codes: list[int] = []
    n = len(world.jobs)
    for r, service in enumerate(world.services):
        current = held[r]
        jobs.append(RealtimeJob(id=service.id, priority=service.priority,
                                demand=forecast(service, t0, config.horizon, config),
                                swap_limit=service.swap_limit,
                                current_gpus=None if current is None else tuple(sorted(current))))
        codes.append(n + r)
    for i, job in enumerate(world.jobs):
        if job.arrival > t0:
            continue
        common: dict[str, Any] = {"id": job.id, "kind": job.kind, "priority": job.priority,
                                  "gpus": job.gpus}
        if i in starts:
            start, first = starts[i]
            if start + job.true_steps <= t0:
                continue  # finished
            elapsed = t0 - start
            jobs.append(_running(common, job, elapsed, first, config.overrun_share))
        else:
            jobs.append(BatchJob(**common, duration_steps=job.predicted_steps))
        codes.append(i)
    weights = world.weights if config.decay is None else replace(world.weights,
                                                                  decay=config.decay)
    cluster = Cluster(gpus=world.gpus, horizon_steps=config.horizon, node_size=world.node_size)
    return Scenario(cluster=cluster, weights=weights, jobs=tuple(jobs),
                    name=f"{world.name}@{t0}"), codes


def remaining_steps(predicted: int, elapsed: int, overrun_share: float) -> int:
    """The steps a running job is planned to need yet: its prediction's rest; once past it,
    one more step, or `overrun_share` of the steps it has run (at least one).

    Real overruns are long: on the bundled Philly weeks a job already past its prediction
    ran on a median 0.22-0.31 times the steps it had run (docs/simulate.md), so "one
    more step" lets the plan grow a service onto GPUs the job will hold for hours.
    """
    if elapsed < predicted:
        return predicted - elapsed
    return max(1, math.ceil(overrun_share * elapsed - 1e-9))


def _running(common: dict[str, Any], job: SimJob, elapsed: int, first: int,
             overrun_share: float) -> BatchJob:
    """A world job that has run `elapsed` steps from GPU `first`, as the planner sees it."""
    remaining = remaining_steps(job.predicted_steps, elapsed, overrun_share)
    return BatchJob(**common, duration_steps=elapsed + remaining,
                    running=Running(first_gpu=first, remaining_steps=remaining))


def planned_starts(scenario: Scenario, grid: np.ndarray) -> dict[int, tuple[int, int]]:
    """Scenario position of each queued job the plan places -> (start, first GPU)."""
    return {i: (p.start, p.first_gpu)
            for i, p in gridlib.placements(scenario, grid, queued_only=True).items()}


def long_scenario(world: World, scenario: Scenario, codes: list[int], t0: int,
                  config: SimConfig) -> Scenario:
    """The plan's own scenario (its guard's claims and promises included) over
    `config.estimate_horizon` steps: realtime forecast that far, past the world's curve its
    last day repeated. Made only for start estimates; nothing it plans is committed."""
    horizon = config.estimate_horizon
    wide = replace(config, horizon=horizon)
    n = len(world.jobs)
    jobs = [replace(job, demand=forecast(world.services[codes[p] - n], t0, horizon, wide,
                                         extend=True))
            if isinstance(job, RealtimeJob) else job for p, job in enumerate(scenario.jobs)]
    out = replace(scenario, jobs=tuple(jobs),
                  cluster=replace(scenario.cluster, horizon_steps=horizon))
    if out.reservations and problems(out, out.reservations):
        out = replace(out, reservations=())  # a promise the longer forecast cannot keep
    return out


def _starts_in(scenario: Scenario, codes: list[int], t0: int, policy: str,
               want: Sequence[int], **options: Any) -> dict[int, int | None]:
    """World code -> absolute start of each job in `want` in `policy`'s plan of `scenario`
    (None: left out of it too)."""
    spots = planned_starts(scenario, make_plan(scenario, policy, **options).grid)
    got = {codes[p]: t0 + s for p, (s, _) in spots.items()}
    return {code: got.get(code) for code in want}


# -- the event loop ----------------------------------------------------------------------

def replay(world: World, policy: str, config: SimConfig = SimConfig()) -> Replay:
    """Plan, commit `replan_every` steps, advance the true world; repeat to the end."""
    L, G = world.steps, world.gpus
    rec = Replay(world=world, policy=policy, config=config,
                 grid=np.full((L, G), FREE, dtype=np.int32),
                 provisioned=np.zeros((L, len(world.services)), dtype=np.int64))
    held: list[set[int] | None] = [None] * len(world.services)
    previous: dict[int, int | None] = {}  # queued job -> planned absolute start, last run
    spots_abs: dict[int, tuple[int, int]] = {}  # queued job -> (absolute start, GPU), last run
    sigma = duration_sigma(world)
    if config.guard and policy in GUARDED and (config.age > 0 or config.reserve):
        rules = Rules(count=config.reservations, half_nodes=config.half_node_reservations)
        rec.guard = Guard(world, policy, age=config.age, reserve=config.reserve, rules=rules,
                          age_in_plan=config.age_in_plan)
    for t0 in range(0, L, config.replan_every):
        scenario, codes = build_scenario(world, t0, rec.starts, held, config)
        if rec.guard is not None:
            scenario = rec.guard.apply(scenario, codes, t0, rec.starts)
        options = _stable_options(scenario, codes, spots_abs, t0, policy, config)
        plan = make_plan(scenario, policy, **options)
        rec.plan_ms.append(plan.latency_ms)
        spots = planned_starts(scenario, plan.grid)
        spots_abs = {codes[p]: (t0 + s, f) for p, (s, f) in spots.items()}
        previous = _churn(rec, scenario, codes, spots, previous, t0)
        new = [code for code in previous if code not in rec.estimates]
        for code in new:  # the start a user is first told
            rec.estimates[code] = previous[code]
        beyond = [code for code in new if previous[code] is None]
        wide = None
        quick = {"search": 0} if policy == "fast" else {}  # fast's greedy orders only
        if config.estimate_horizon > config.horizon and beyond:  # out of the first horizon
            wide = long_scenario(world, scenario, codes, t0, config)
            rec.estimates.update(_starts_in(wide, codes, t0, policy, beyond, **quick))
            rec.long_plans += 1
        if config.ranges and new and sigma > 0:
            late = p90_starts(scenario, codes, policy, sigma, t0, **options)
            rec.estimates_p90.update({code: late.get(code) for code in new})
            if wide is not None:  # the range's top from the long plan too, for those jobs
                later = p90_starts(wide, codes, policy, sigma, t0, **quick)
                rec.estimates_p90.update({code: later.get(code) for code in beyond})
        for t in range(t0, min(t0 + config.replan_every, L)):
            _commit(world, rec, scenario, codes, spots, plan.grid[t - t0], t, t0, held)
    return rec


def _stable_options(scenario: Scenario, codes: list[int],
                    spots_abs: dict[int, tuple[int, int]], t0: int, policy: str,
                    config: SimConfig) -> dict[str, Any]:
    """fast's stability term: the last plan's starts of the jobs still queued, as anchors."""
    if config.stability is None or policy != "fast":
        return {}
    anchors = {job.id: (spots_abs[codes[p]][0] - t0, spots_abs[codes[p]][1])
               for p, job in enumerate(scenario.jobs)
               if isinstance(job, BatchJob) and not job.running and codes[p] in spots_abs}
    return {"anchors": anchors, "stability": config.stability}


def _churn(rec: Replay, scenario: Scenario, codes: list[int],
           spots: dict[int, tuple[int, int]], previous: dict[int, int | None],
           t0: int) -> dict[int, int | None]:
    """Count queued jobs whose planned start moved since the last run (unplaced = None)."""
    now: dict[int, int | None] = {}
    for p, job in enumerate(scenario.jobs):
        if isinstance(job, BatchJob) and not job.running:
            now[codes[p]] = t0 + spots[p][0] if p in spots else None
    for i, start in now.items():
        if i in previous:
            rec.churn_pairs += 1
            rec.churn_moved += start != previous[i]
    return now


def _commit(world: World, rec: Replay, scenario: Scenario, codes: list[int],
            spots: dict[int, tuple[int, int]], plan_row: np.ndarray, t: int, t0: int,
            held: list[set[int] | None]) -> None:
    """Step t as it really happens: running jobs go on, planned starts whose block is free."""
    row = rec.grid[t]
    for i, (start, first) in rec.starts.items():
        job = world.jobs[i]
        if t < start + job.true_steps:
            row[first : first + job.gpus] = i
    for p, (start, first) in spots.items():
        i = codes[p]
        if start != t - t0 or i in rec.starts:
            continue
        block = slice(first, first + world.jobs[i].gpus)
        if (row[block] == FREE).all():
            rec.starts[i] = (t, first)
            row[block] = i
        else:
            rec.blocked_starts += 1  # an overrun still holds it: the next plan decides
    n = len(world.jobs)
    for p, code in enumerate(codes):
        if code < n:
            continue
        r = code - n
        free = {int(g) for g in np.flatnonzero(row == FREE)}
        planned = {int(g) for g in np.flatnonzero(plan_row == p)} & free
        now = _within_swap_limit(held[r], planned, free, world.services[r].swap_limit)
        row[sorted(now)] = code
        held[r] = now
        if rec.provisioned is not None:
            rec.provisioned[t, r] = scenario.realtime_job_at(p).demand[t - t0]


def _within_swap_limit(before: set[int] | None, planned: set[int], free: set[int],
                       limit: int) -> set[int]:
    """The planned GPUs, unless an overrun took some: then move toward them within the limit.

    At a plan's first step the two agree (the planner saw `before`); later in a committed
    window a batch job that overran may hold a planned GPU, and the service must not pay
    for it with more swaps than it is allowed.
    """
    if before is None or len(planned ^ before) <= limit:
        return planned
    now = before & free
    budget = limit - len(before - free)  # GPUs lost to a start the plan made
    for g in sorted(planned - now)[: max(budget, 0)]:
        now.add(g)
        budget -= 1
    for g in sorted(now - planned)[: max(budget, 0)]:
        now.discard(g)
    return now


# -- what actually ran -------------------------------------------------------------------

def series(rec: Replay) -> dict[str, np.ndarray]:
    """Per-step realized utilization, realtime demand and shortfall (GPUs)."""
    world, grid = rec.world, rec.grid
    n, L, G = len(world.jobs), world.steps, world.gpus
    batch = ((grid >= 0) & (grid < n)).sum(axis=1)
    served = np.zeros(L)
    short = np.zeros(L)
    demand = np.zeros(L)
    missed = np.zeros(L)
    priced = np.zeros(L)  # shortfall times its service's priority
    for r, service in enumerate(world.services):
        have = (grid == n + r).sum(axis=1)
        need = service.demand()[:L]
        served += np.minimum(have, need)
        short += np.maximum(need - have, 0)
        priced += service.priority * np.maximum(need - have, 0)
        demand += need
        if rec.provisioned is not None:  # the part the forecast itself did not ask for
            missed += np.maximum(need - np.maximum(rec.provisioned[:, r], have), 0)
    return {"utilization": (batch + served) / G, "shortfall": short, "demand": demand,
            "batch_gpus": batch, "forecast_miss": missed,
            "priced_shortfall": priced}


def realized(rec: Replay) -> dict[str, float]:
    """The replay's metrics, computed on the realized grid and the ACTUAL demand."""
    world, grid = rec.world, rec.grid
    n, L = len(world.jobs), world.steps
    cells = np.bincount(grid[(grid >= 0) & (grid < n)].ravel(), minlength=n)[:n]
    prio = np.array([j.priority for j in world.jobs])
    s = series(rec)
    demanded = float(s["demand"].sum())
    value = float(prio @ cells)
    out: dict[str, float] = {
        "utilization": float(s["utilization"].mean()),
        "value": value,
        # the objective's terms undiscounted: batch value less the realtime penalty
        "net_value": value - world.weights.realtime_penalty * float(s["priced_shortfall"].sum()),
        "rt_shortfall": float(s["shortfall"].sum()),
        "rt_shortfall_pct": 100.0 * float(s["shortfall"].sum()) / demanded if demanded else 0.0,
        "rt_demand": demanded,
        # shortfall split: demand above the forecast the plan was given / forecast demand
        # the plan or the world did not grant (a placement or an overrun problem)
        "rt_short_forecast_pct": 100.0 * float(s["forecast_miss"].sum()) / demanded
        if demanded else 0.0,
        "rt_short_granted_pct": 100.0 * float(s["shortfall"].sum() - s["forecast_miss"].sum())
        / demanded if demanded else 0.0,
        "completed": float(sum(start + world.jobs[i].true_steps <= L
                               for i, (start, _) in rec.starts.items())),
        "started": float(len(rec.starts)),
        "arrived": float(sum(j.arrival < L for j in world.jobs)),
        "churn_pct": 100.0 * rec.churn_moved / rec.churn_pairs if rec.churn_pairs else 0.0,
        "stranded_pct": 100.0 * stranded(rec) / (world.gpus * L),
        "blocked_starts": float(rec.blocked_starts),
        "plans": float(len(rec.plan_ms)),
        "plan_ms_mean": float(np.mean(rec.plan_ms)) if rec.plan_ms else 0.0,
        "violations": float(len(integrity(rec))),
    }
    out.update(waits(rec))
    for k in sorted({j.gpus for j in world.jobs}):
        sized = [i for i, j in enumerate(world.jobs) if j.gpus == k and j.arrival < L]
        out[f"arrived_{k}gpu"] = float(len(sized))
        out[f"started_{k}gpu"] = float(sum(i in rec.starts for i in sized))
        waited = [(rec.starts[i][0] if i in rec.starts else L) - world.jobs[i].arrival
                  for i in sized]
        out[f"p95wait_{k}gpu"] = float(np.percentile(waited, 95)) if waited else 0.0
    out.update(estimate_accuracy(rec))
    out.update(range_accuracy(rec))
    if rec.guard is not None:
        out["promises"] = float(rec.guard.made)
        out["promises_later"] = float(rec.guard.later)
    return out


def estimate_accuracy(rec: Replay) -> dict[str, float]:
    """The start the first plan that saw each job predicted, against the start it got.

    Over jobs that arrived and started in the replay: the share predicted within 1 and
    3 steps, and the median absolute error; a job the first plan left out of its horizon
    has no estimate (counted as a miss, and in `estimate_none_pct`).
    """
    errors: list[float] = []
    none = 0
    for i, (start, _) in rec.starts.items():
        guess = rec.estimates.get(i)
        if guess is None:
            none += 1
            errors.append(float("inf"))
        else:
            errors.append(float(abs(start - guess)))
    if not errors:
        return {}
    e = np.asarray(errors)
    return {"estimate_1h_pct": 100.0 * float((e <= 1).mean()),
            "estimate_3h_pct": 100.0 * float((e <= 3).mean()),
            "estimate_median_err": float(np.median(e)),
            "estimate_none_pct": 100.0 * none / len(errors)}


def stranded(rec: Replay) -> int:
    """GPU-steps left idle while some arrived job waited: capacity lost to shape, not demand.

    On a contended cluster this is fragmentation (no aligned block free for the waiting
    sizes) or a reservation holding GPUs the service did not use.
    """
    world = rec.world
    L = world.steps
    waiting = np.zeros(L + 1, dtype=np.int64)
    for i, job in enumerate(world.jobs):
        if job.arrival >= L:
            continue
        until = rec.starts[i][0] if i in rec.starts else L
        waiting[job.arrival] += 1
        waiting[max(until, job.arrival)] -= 1
    queued = np.cumsum(waiting)[:L] > 0
    free = (rec.grid == FREE).sum(axis=1)
    return int(free[queued].sum())


def waits(rec: Replay) -> dict[str, float]:
    """Mean wait (steps from arrival to start; unstarted jobs count to the end) by priority."""
    world = rec.world
    L = world.steps
    by: dict[float, list[int]] = {}
    for i, job in enumerate(world.jobs):
        if job.arrival >= L:
            continue
        start = rec.starts[i][0] if i in rec.starts else L
        by.setdefault(job.priority, []).append(start - job.arrival)
    return {f"wait_p{p:g}": float(np.mean(v)) for p, v in sorted(by.items(), reverse=True)}


def integrity(rec: Replay) -> list[str]:
    """From the realized grid alone: every started job ran on one aligned block, without a
    break or a move, from its start for its true duration (or to the end); realtime swaps
    stayed within their limits."""
    world, grid = rec.world, rec.grid
    L, n = world.steps, len(world.jobs)
    problems = []
    for i, job in enumerate(world.jobs):
        mask = grid == i
        rows = np.flatnonzero(mask.any(axis=1))
        if not len(rows):
            continue
        start = int(rows[0])
        first = int(np.flatnonzero(mask[start])[0])
        want = np.zeros_like(mask)
        want[start : min(start + job.true_steps, L), first : first + job.gpus] = True
        if start < job.arrival:
            problems.append(f"{job.id}: started at {start}, before its arrival {job.arrival}")
        if first % job.gpus:
            problems.append(f"{job.id}: block at GPU {first} is not aligned to {job.gpus}")
        if not np.array_equal(mask, want):
            problems.append(f"{job.id}: moved or interrupted (started {start} on GPU {first})")
    for r, service in enumerate(world.services):
        have = grid == n + r
        changes = (have[1:] ^ have[:-1]).sum(axis=1)
        over = np.flatnonzero(changes > service.swap_limit)
        if len(over):
            problems.append(f"{service.id}: {int(changes[over[0]])} GPU changes at step "
                            f"{int(over[0]) + 1}, swap limit {service.swap_limit}")
    return problems


# -- several policies, several worlds ----------------------------------------------------

def _one(args: tuple[World, str, SimConfig]) -> tuple[str, str, dict[str, float], Replay]:
    world, policy, config = args
    rec = replay(world, policy, config)
    return world.name, policy, realized(rec), rec


class OutOfTime(RuntimeError):
    """The replays did not finish within the time given (`simulate --max-seconds`)."""


def run_many(worlds: Sequence[World], policies: Sequence[str], config: SimConfig,
             workers: int = 1, *, progress: Callable[[], None] | None = None,
             deadline: float | None = None) -> list[tuple[str, str, dict[str, float], Replay]]:
    """Every (world, policy) replay, in order; `workers` > 1 spreads them over processes.

    `progress` is called once per finished replay; past `deadline` (time.monotonic()) the
    remaining replays are abandoned, running workers stopped, and OutOfTime raised.
    """
    return run_tasks([(w, p, config) for w in worlds for p in policies], workers,
                     progress=progress, deadline=deadline)


def run_tasks(tasks: Sequence[tuple[World, str, SimConfig]], workers: int = 1, *,
              progress: Callable[[], None] | None = None, deadline: float | None = None
              ) -> list[tuple[str, str, dict[str, float], Replay]]:
    """`run_many` over explicit (world, policy, config) replays, each with its own config."""
    tick = progress or (lambda: None)
    if workers <= 1 or len(tasks) == 1:
        out: list[tuple[str, str, dict[str, float], Replay]] = []
        for task in tasks:
            if deadline is not None and time.monotonic() > deadline:
                raise OutOfTime(f"finished {len(out)} of {len(tasks)} replays")
            out.append(_one(task))
            tick()
        return out
    pool = ProcessPoolExecutor(max_workers=workers)
    try:
        futures = [pool.submit(_one, task) for task in tasks]
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            for _ in as_completed(futures, timeout=left):
                tick()
        except FuturesTimeout:
            done = sum(f.done() for f in futures)
            for proc in list(getattr(pool, "_processes", {}).values()):
                proc.terminate()  # a replay already running would otherwise run to its end
            raise OutOfTime(f"finished {done} of {len(tasks)} replays") from None
        return [f.result() for f in futures]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
