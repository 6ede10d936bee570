"""A proven upper bound on MODEL.md's objective in milliseconds: a Lagrangian relaxation.

The rows relaxed, each implied by every legal grid (running jobs fixed, their cells pinned):

- capacity: at step t, queued batch cells plus realtime cells <= the unpinned GPUs;
- buddy capacity: at step t, for every block size k >= 2, the cells of jobs of >= k GPUs
  plus k x ceil((realtime GPUs - free cells in partly pinned k-blocks) / k) <= k x the
  pin-free aligned k-blocks (a job of >= k GPUs fills whole pin-free k-blocks of its own;
  realtime GPUs spoil at least that many others).

With a price per row (lambda_t >= 0, mu_t,k >= 0), what is left splits: a batch job takes
its best start (one whose run has some pin-free aligned block) if its value beats the
priced cells, else stays out; per step, the realtime jobs together hold the GPU count H
that maximises avoided shortfall (highest penalty first) minus the priced rows, ceilings
included. Of the swap limits only each service's corridor is kept (`corridors`: the
counts it can reach at step t from what it holds now, moving by at most its limit a
step); the rest is relaxed. By weak duality (which needs no linearity
of the rows, only an exact subproblem), prices x capacities + those best choices is >=
every legal plan's objective for ANY non-negative prices; the subgradient descent only
makes the bound tighter, never invalid. The realtime ceiling is what keeps the bound
near the optimum where services leave no whole block for large jobs; the start
integrality the block-capacity MILP (`bounds.block_capacity`) keeps is not captured, so
that bound is tighter where it can be afforded.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from allocator.model import BatchJob, RealtimeJob, Scenario

ITERATIONS = 120


@dataclass(frozen=True)
class QuickBound:
    """A proven upper bound on the objective, and what it cost."""

    value: float
    iterations: int
    seconds: float


@dataclass(frozen=True)
class _Problem:
    T: int
    decay_cum: NDArray[np.float64]  # (T+1,)
    free: NDArray[np.float64]  # (T,) unpinned GPUs per step
    sizes: NDArray[np.int64]  # (K,) block sizes 2, 4, ... <= G
    block_cap: NDArray[np.float64]  # (K, T): k x pin-free aligned k-blocks
    fixed: float  # running jobs' objective
    gpus: NDArray[np.int64]  # (J,) queued batch jobs
    weight: NDArray[np.float64]  # (J,) priority x gpus
    level: NDArray[np.int64]  # (J,) how many sizes in `sizes` are <= gpus
    starts_ok: NDArray[np.bool_]  # (J, T) a start is allowed
    ends: NDArray[np.int64]  # (J, T) run end per start
    rt_floor: float  # the shortfall penalty if realtime held nothing
    rt_gain: NDArray[np.float64]  # (T, H+1): penalty avoided by holding h GPUs, best jobs first
    rt_ceil: NDArray[np.float64]  # (K, T, H+1): k x ceil((h - outside_k(t))+ / k), blocks spoilt
    reward: NDArray[np.float64]  # (J, T) a run's reward per start, -inf where not allowed
    rows: NDArray[np.int64]  # (J, 1) row indices into per-job (J, T) tables
    held_cap: NDArray[np.float64]  # (K, T): block_cap less blocks services cannot have left


def _problem(scenario: Scenario) -> _Problem:
    T, G = scenario.T, scenario.G
    decay = scenario.weights.decay ** np.arange(T)
    cum = np.concatenate(([0.0], np.cumsum(decay)))
    pinned = np.zeros((T, G), dtype=bool)
    fixed = 0.0
    queued: list[BatchJob] = []
    realtime: list[RealtimeJob] = []
    for job in scenario.jobs:
        if isinstance(job, RealtimeJob):
            realtime.append(job)
        elif job.running:
            remaining = min(job.running.remaining_steps, T)
            first = job.running.first_gpu
            pinned[:remaining, first : first + job.gpus] = True
            fixed += job.priority * job.gpus * float(cum[remaining])
        else:
            queued.append(job)
    free = G - pinned.sum(axis=1)
    sizes = np.array([1 << p for p in range(1, G.bit_length()) if (1 << p) <= G],
                     dtype=np.int64)
    block_cap = np.zeros((len(sizes), T))
    pin_free: dict[int, NDArray[np.int64]] = {}  # size -> (T+1, n) pinned count per block
    for k in [1, *sizes.tolist()]:
        n = G // k
        per_block = pinned[:, : n * k].reshape(T, n, k).any(axis=2)
        pin_free[k] = np.concatenate((np.zeros((1, n), dtype=np.int64),
                                      np.cumsum(per_block, axis=0)))
        if k > 1:
            block_cap[sizes.tolist().index(k)] = k * (~per_block).sum(axis=1)
    J = len(queued)
    steps = np.arange(T)
    gpus = np.array([j.gpus for j in queued], dtype=np.int64)
    length = np.array([min(j.duration_steps, T) for j in queued], dtype=np.int64)
    arrival = np.array([j.arrival_step for j in queued], dtype=np.int64)
    ends = np.minimum(steps[None, :] + length[:, None], T)
    starts_ok = (steps[None, :] >= arrival[:, None]) & (gpus[:, None] <= G)
    if pinned.any():
        for j in range(J):
            if gpus[j] > G:
                continue
            c = pin_free[int(gpus[j])]
            hits = c[ends[j]] - c[steps]  # (T, n): pinned steps of each block over each run
            starts_ok[j] &= (hits == 0).any(axis=1)
    level = np.searchsorted(sizes, gpus, side="right")
    demand = np.array([j.demand for j in realtime], dtype=np.int64).reshape(len(realtime), T)
    demand = np.maximum(demand, 0)
    penalty = np.array([scenario.weights.realtime_penalty * j.priority for j in realtime])
    gain = realtime_gain(realtime, demand, penalty, free, G)
    H = gain.shape[1] - 1
    h = np.arange(H + 1)
    outside = free[None, :] - block_cap  # (K, T): free cells in partly pinned k-blocks
    spoilt = np.maximum(h[None, None, :] - outside[:, :, None], 0)
    k = sizes[:, None, None]
    rt_ceil = k * -(-spoilt // k)
    weight = np.array([j.priority * j.gpus for j in queued])
    reward = weight.reshape(J, 1) * (cum[ends] - cum[steps][None, :])
    return _Problem(
        T=T, decay_cum=cum, free=free.astype(np.float64), sizes=sizes, block_cap=block_cap,
        fixed=fixed, gpus=gpus, weight=weight, level=level, starts_ok=starts_ok, ends=ends,
        rt_floor=float((penalty[:, None] * demand).sum()), rt_gain=gain,
        rt_ceil=rt_ceil.astype(np.float64), reward=np.where(starts_ok, reward, -np.inf),
        rows=np.arange(J).reshape(J, 1),
        held_cap=held_block_cap(realtime, pinned, sizes, block_cap))


def corridors(realtime: list[RealtimeJob], free: NDArray[np.int64]
              ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(R, T) least and most GPUs each service can hold at each step: its count moves by at
    most its swap limit a step (||A| - |A'|| <= |A xor A'|), from what it holds now (from
    anything, without `current_gpus`), and never past the unpinned GPUs the other services'
    floors leave it."""
    R, T = len(realtime), len(free)
    lo = np.zeros((R, T), dtype=np.int64)
    hi = np.zeros((R, T), dtype=np.int64)
    limit = np.array([j.swap_limit for j in realtime], dtype=np.int64)
    held = np.array([len(j.current_gpus or ()) for j in realtime], dtype=np.int64)
    anywhere = np.array([j.current_gpus is None for j in realtime], dtype=bool)
    before_lo, before_hi = held, held
    for t in range(T):
        lo[:, t] = np.maximum(before_lo - limit, 0)
        room = int(free[t]) - (int(lo[:, t].sum()) - lo[:, t])
        reach = np.minimum(room, before_hi + limit)
        hi[:, t] = np.maximum(np.where(anywhere, room, reach) if t == 0 else reach, 0)
        before_lo, before_hi = lo[:, t], hi[:, t]
    return lo, hi


def realtime_gain(realtime: list[RealtimeJob], demand: NDArray[np.int64],
                  penalty: NDArray[np.float64], free: NDArray[np.int64], G: int
                  ) -> NDArray[np.float64]:
    """(T, H+1): the most shortfall penalty the services together avoid holding H GPUs at a
    step (-inf where no legal plan holds exactly H). Each holds at least its corridor's
    floor (past its demand, worth nothing) and earns only up to its ceiling; the rest of
    the GPUs go to the unmet units, most valuable first."""
    T = len(free)
    lo, hi = corridors(realtime, free)
    rows: list[tuple[int, float, NDArray[np.float64]]] = []
    for t in range(T):
        forced = min(int(lo[:, t].sum()), int(free[t]))
        base = float((penalty * np.minimum(lo[:, t], demand[:, t])).sum())
        extra = np.maximum(np.minimum(demand[:, t], hi[:, t]) - lo[:, t], 0)
        units = np.sort(np.repeat(penalty, extra))[::-1][: int(free[t]) - forced]
        rows.append((forced, base, units))  # (units: the unit GPUs, most valuable first)
    H = int(min(G, max((f + len(u) for f, _, u in rows), default=0)))
    gain = np.full((T, H + 1), -np.inf)
    for t, (forced, base, units) in enumerate(rows):
        gain[t, forced : forced + len(units) + 1] = base + np.concatenate(([0.0],
                                                                           np.cumsum(units)))
    return gain


def held_block_cap(realtime: list[RealtimeJob], pinned: NDArray[np.bool_],
                   sizes: NDArray[np.int64], block_cap: NDArray[np.float64]
                   ) -> NDArray[np.float64]:
    """(K, T): `block_cap` less the pin-free k-blocks the services cannot have left by step
    t. A block a service holds GPUs in now is free of it only once it has released them
    all, and by step t a service has released at most (t + 1) x its swap limit of its
    current GPUs; so at most the blocks cheapest to clear within the services' summed
    budget can be free (a relaxation of each one's own budget)."""
    T, G = pinned.shape
    cap: NDArray[np.float64] = block_cap.copy()
    owner = np.zeros(G, dtype=np.int64)  # current realtime GPUs per GPU
    budget = np.zeros(T, dtype=np.int64)
    reach = np.arange(1, T + 1, dtype=np.int64)
    for job in realtime:
        if job.current_gpus:
            owner[list(job.current_gpus)] += 1
            budget += np.minimum(job.swap_limit * reach, len(job.current_gpus))
    if not owner.any():
        return cap
    for i, k in enumerate(sizes.tolist()):
        n = G // k
        held = owner[: n * k].reshape(n, k).sum(axis=1)  # current realtime GPUs per block
        pinned_block = pinned[:, : n * k].reshape(T, n, k).any(axis=2)
        # (T, n): the pin-free blocks a service holds GPUs in now
        spoilt = np.logical_and(np.logical_not(pinned_block), (held > 0)[None, :])
        for t in range(T):
            costs = np.sort(held[spoilt[t]])
            clearable = int(np.searchsorted(np.cumsum(costs), budget[t], side="right"))
            blocked = int(spoilt[t].sum()) - clearable
            cap[i, t] -= k * blocked
    return cap


def _initial_prices(p: _Problem) -> NDArray[np.float64]:
    """Per step, the value density of the last cell a fractional greedy would fill."""
    lam = np.zeros(p.T)
    if not len(p.gpus):
        return lam
    density = p.weight / p.gpus
    order = np.argsort(-density, kind="stable")
    arrived = (np.cumsum(p.starts_ok, axis=1) > 0)[order]  # some start at or before t
    held = np.isfinite(p.rt_gain).sum(axis=1) - 1  # what realtime would hold, unpriced
    for t in range(p.T):
        room = p.free[t] - held[t]
        here = order[arrived[:, t]]
        filled = np.cumsum(p.gpus[here])
        over = np.flatnonzero(filled > room)
        if len(over):
            lam[t] = density[here[over[0]]] * (p.decay_cum[t + 1] - p.decay_cum[t])
    return lam


def _evaluate(p: _Problem, lam: NDArray[np.float64], mu: NDArray[np.float64]
              ) -> tuple[float, NDArray[np.float64], NDArray[np.float64]]:
    """The Lagrangian's value at (lam, mu) and a subgradient (capacity minus usage)."""
    T = p.T
    # Price of one GPU-step for a job at each level: lam plus mu of every size it fills.
    price = np.vstack((lam, lam + np.cumsum(mu, axis=0))) if len(mu) else lam[None, :]
    price_cum = np.concatenate((np.zeros((len(price), 1)), np.cumsum(price, axis=1)), axis=1)
    value = p.fixed + float(lam @ p.free) + float((mu * p.block_cap).sum())
    usage = np.zeros(T)
    usage_k = np.zeros((len(mu), T))
    if len(p.gpus):
        pc = price_cum[p.level]  # (J, T+1)
        # reward - cells x their price (-inf stays -inf where a start is not allowed)
        gain = p.reward - p.gpus[:, None] * (pc[p.rows, p.ends] - pc[:, :T])
        best = gain.argmax(axis=1)
        top = gain[p.rows[:, 0], best]
        take = top > 0
        value += float(top[take].sum())
        levels, width = len(price), T + 1
        at = p.level[take] * width
        cells = p.gpus[take].astype(np.float64)
        diff = (np.bincount(at + best[take], cells, levels * width)
                - np.bincount(at + p.ends[take, best[take]], cells, levels * width))
        cover = np.cumsum(diff.reshape(levels, width), axis=1)[:, :T]  # cells per level
        usage += cover.sum(axis=0)
        if len(mu):
            usage_k = np.cumsum(cover[::-1], axis=0)[::-1][1:]  # jobs of >= each size
    # Realtime, per step: the held count H with the best avoided shortfall net of prices.
    H = p.rt_gain.shape[1] - 1
    net = p.rt_gain - lam[:, None] * np.arange(H + 1)[None, :]
    if len(mu):
        net = net - np.einsum("kt,kth->th", mu, p.rt_ceil)
    held = net.argmax(axis=1)
    steps = np.arange(T)
    value += float(net[steps, held].sum()) - p.rt_floor
    usage += held
    spoilt = p.rt_ceil[:, steps, held] if len(mu) else usage_k
    return value, p.free - usage, p.block_cap - usage_k - spoilt


def lagrangian_bound(scenario: Scenario, lower: float | None = None,
                     iterations: int = ITERATIONS) -> QuickBound:
    """The least Lagrangian value found by a subgradient descent: a proven upper bound.

    `lower` (an achieved objective, e.g. the plan's) sets the Polyak step and stops the
    descent once the bound meets it (the plan is then proven optimal).
    """
    began = time.perf_counter()
    best, done, _, _ = _descend(_problem(scenario), lower, iterations)
    return QuickBound(best, done, time.perf_counter() - began)


def _descend(p: _Problem, lower: float | None = None, iterations: int = ITERATIONS
             ) -> tuple[float, int, NDArray[np.float64], NDArray[np.float64]]:
    """The descent: its least value, its iterations, and the prices that gave the value
    (allocator.decomposition starts from them)."""
    lam = _initial_prices(p)
    mu = np.zeros((len(p.sizes), p.T))
    best = np.inf
    best_lam, best_mu = lam, mu
    theta, stale, done = 1.0, 0, 0
    while done < iterations:
        done += 1
        value, g_lam, g_mu = _evaluate(p, lam, mu)
        if value < best - 1e-12:
            best, stale = value, 0
            best_lam, best_mu = lam, mu
        else:
            stale += 1
            if stale >= 5:
                theta, stale = theta / 2, 0
                if theta < 1e-3:  # ten halvings without progress: converged
                    break
        # Polyak's step aims a fifth below the known plan: aiming at the plan itself makes
        # steps too short to converge in ~100 iterations (BENCHMARKS.md compares targets).
        known = lower if lower is not None else best
        target = known - 0.2 * abs(known)
        proven = lower is not None and best <= lower + 1e-9 * max(1.0, abs(lower))
        norm = float(g_lam @ g_lam + (g_mu * g_mu).sum())
        if norm == 0 or proven:  # the plan is optimal, or the prices are
            break
        step = theta * max(value - target, 1e-3 * abs(value) + 1e-9) / norm
        lam = np.maximum(lam - step * g_lam, 0.0)
        mu = np.maximum(mu - step * g_mu, 0.0)
    return float(best), done, best_lam, best_mu


def ratio_line(objective: float, bound: float) -> str:
    """The summary's clause: how far the plan can be from the best possible one."""
    if bound <= 0 or objective <= 0:
        return f"upper bound {bound:.2f}"
    return f"within {100 * max(0.0, 1 - objective / bound):.1f}% of the best possible plan"
