"""A tighter proven bound for small clusters: Lagrangian decomposition by step and by job.

The Lagrangian of allocator.lagrange prices the capacity rows, so each job picks its
start alone and a step may be filled by slivers of many jobs: on the wider family it
sits 5-17% above the optimum on 10-16 GPUs. The block-capacity MILP is tight there, and
what makes it tight is integrality at each step (an 8-GPU job cannot share a block with
a small job or a service), not integral starts or swap limits (BENCHMARKS.md, "A tighter
bound on small clusters"). So each batch job's cells are split into two copies:

- per step t: which queued jobs run (y_jt binary) and how many GPUs realtime holds (h_t),
  under the rows every legal grid keeps at that step: the cells of jobs of >= k GPUs fit
  the pin-free aligned k-blocks (k = 2, 4, ...) the services can have left by then
  (lagrange.held_block_cap), and batch cells plus h_t fit the unpinned GPUs, h_t within
  the services' corridors (lagrange.corridors). Sizes are powers of two, so this is a
  small exact knapsack (a DP over cells used);
- per job: one allowed start or none, as in allocator.lagrange.

y_jt = "the job's run covers t" is priced by pi_jt (any sign). For every pi, the sum of
both exact maxima is >= every legal plan's objective (weak duality); the subgradient
descent only lowers it. Starting from the Lagrangian's prices (pi_jt = gpus_j x the price
of a cell of its size at t) the first value is already <= the Lagrangian's (every row it
prices holds at an integral step), so the decomposition never loosens the plan's bound.
The descent is deflected: each step follows the subgradient plus BETA of the last step's
direction, which damps the zigzag the plain one stalled in (on the tuning and replan sets
it ended 0.26% of the optimum above its LP limit on average, 8.9% at worst; now 0.04%
and 0.9%: BENCHMARKS.md). It runs in C (allocator/policies/_packc.c, `decomp`); `descend`
here is the same loop in Python, the reference a test holds the compiled one to.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from allocator.lagrange import _descend, _Problem, _problem
from allocator.model import Scenario
from allocator.policies.decoder import _packc  # None without a current compiled kernel

ITERATIONS = 1500
# The descent's cost is about queued jobs x steps x (GPUs + 1) per iteration: up to this
# many operations in all it stays within ~25 ms at 8-16 GPUs and at 64 GPUs.
WORK = 16_000_000
MIN_ITERATIONS = 100  # below this few the descent barely moves off the Lagrangian
STALE = 50  # iterations without a new best before the step halves
AIM = 0.05  # Polyak's step aims this share below the plan's objective
BETA = 0.85  # the step follows the subgradient plus this share of the last step's direction


@dataclass(frozen=True)
class Bound:
    """A proven upper bound on the objective, the method that gave it, and its cost."""

    value: float
    method: str  # "lagrangian" or "decomposition"
    iterations: int
    seconds: float
    lagrangian: float  # the Lagrangian's own value, never below `value`


@dataclass(frozen=True)
class Tables:
    """The decomposition's inputs, flat and typed as the compiled kernel reads them."""

    J: int
    T: int
    G: int
    reward: NDArray[np.float64]  # (J, T), -inf where a start is not allowed
    ends: NDArray[np.int64]  # (J, T)
    gpus: NDArray[np.int64]  # (J,)
    cover: NDArray[np.uint8]  # (J, T): some allowed start's run covers t
    caps: NDArray[np.int64]  # (K, T): k x pin-free aligned k-blocks services can have left
    free: NDArray[np.int64]  # (T,) unpinned GPUs
    rt_best: NDArray[np.float64]  # (T, G+1): realtime's best avoided penalty within r GPUs
    base: float  # running jobs' value minus the shortfall if realtime held nothing


def tables(p: _Problem, G: int) -> Tables:
    J, T = len(p.gpus), p.T
    cover = np.zeros((J, T), dtype=np.uint8)
    for j in range(J):
        for s in np.flatnonzero(p.starts_ok[j]):
            cover[j, s : p.ends[j, s]] = 1
    gain = np.where(np.isfinite(p.rt_gain), p.rt_gain, -np.inf)
    best = np.maximum.accumulate(gain, axis=1)  # within h GPUs, not exactly h
    room = np.minimum(np.arange(G + 1), best.shape[1] - 1)
    rt_best = best[:, room]
    return Tables(J=J, T=T, G=G, reward=np.ascontiguousarray(p.reward, dtype=np.float64),
                  ends=np.ascontiguousarray(p.ends, dtype=np.int64),
                  gpus=np.ascontiguousarray(p.gpus, dtype=np.int64), cover=cover,
                  caps=np.ascontiguousarray(p.held_cap.round().astype(np.int64)),
                  free=np.ascontiguousarray(p.free.round().astype(np.int64)),
                  rt_best=np.ascontiguousarray(rt_best, dtype=np.float64),
                  base=p.fixed - p.rt_floor)


def prices_from(p: _Problem, lam: NDArray[np.float64], mu: NDArray[np.float64]
                ) -> NDArray[np.float64]:
    """pi_jt from the Lagrangian's row prices: a cell of job j at t costs lam_t plus mu_kt
    of every block size k <= its size; the job's cells at t cost gpus_j of those."""
    price = np.vstack((lam, lam + np.cumsum(mu, axis=0))) if len(mu) else lam[None, :]
    return np.ascontiguousarray(p.gpus[:, None] * price[p.level], dtype=np.float64)


def step_value(tb: Tables, pi: NDArray[np.float64], t: int
               ) -> tuple[float, list[int]]:
    """Step t's exact maximum and the jobs it runs: a 0/1 knapsack over cells used, jobs
    by size from the largest, each block size's row applied once its jobs are in."""
    G = tb.G
    neg = -np.inf
    dp = [0.0] + [neg] * G
    taken: list[tuple[int, int, list[bool]]] = []
    k = 1
    while k * 2 <= G:
        k *= 2
    while k >= 1:
        for j in range(tb.J):
            if tb.gpus[j] != k or not tb.cover[j, t]:
                continue
            value = float(pi[j, t])
            if not value > 0.0:
                continue
            chosen = [False] * (G + 1)
            for b in range(G, k - 1, -1):
                cand = dp[b - k] + value
                if cand > dp[b]:
                    dp[b] = cand
                    chosen[b] = True
            taken.append((j, k, chosen))
        if k >= 2:
            cap = int(tb.caps[k.bit_length() - 2, t])
            for b in range(cap + 1, G + 1):
                dp[b] = neg
        k //= 2
    free = int(tb.free[t])
    best, at = neg, 0
    for b in range(min(free, G) + 1):
        v = dp[b] + float(tb.rt_best[t, free - b])
        if v > best:
            best, at = v, b
    jobs = []
    for j, k, chosen in reversed(taken):
        if chosen[at]:
            jobs.append(j)
            at -= k
    return best, jobs


def job_value(tb: Tables, pi: NDArray[np.float64], j: int) -> tuple[float, int]:
    """Job j's best start against the prices of its cells (-1: none earns anything)."""
    before = [0.0]
    for t in range(tb.T):
        before.append(before[-1] + float(pi[j, t]))
    best, at = 0.0, -1
    for s in range(tb.T):
        reward = float(tb.reward[j, s])
        if reward == -np.inf:
            continue
        gain = reward - (before[int(tb.ends[j, s])] - before[s])
        if gain > best:
            best, at = gain, s
    return best, at


def evaluate(tb: Tables, pi: NDArray[np.float64]
             ) -> tuple[float, NDArray[np.float64]]:
    """The decomposition's value at pi (a proven bound for any pi) and a subgradient."""
    total = tb.base
    sub = np.zeros((tb.J, tb.T))
    for t in range(tb.T):
        value, jobs = step_value(tb, pi, t)
        total += value
        sub[jobs, t] += 1.0
    for j in range(tb.J):
        value, s = job_value(tb, pi, j)
        total += value
        if s >= 0:
            sub[j, s : int(tb.ends[j, s])] -= 1.0
    return total, sub * tb.cover


def descend(tb: Tables, pi: NDArray[np.float64], lower: float | None, iterations: int
            ) -> tuple[float, int]:
    """The least value the subgradient descent finds, and its iterations (the reference
    for `_packc.decomp`, which runs the same loop)."""
    pi = pi.copy()
    direction = np.zeros_like(pi)
    best = np.inf
    theta, stale, done = 1.0, 0, 0
    while done < iterations:
        done += 1
        value, sub = evaluate(tb, pi)
        best, theta, stale = patience(value, best, theta, stale)
        if theta < 1e-3:
            break
        if lower is not None and best <= lower + 1e-9 * max(1.0, abs(lower)):
            break
        norm = 0.0
        for j in range(tb.J):
            for t in range(tb.T):
                direction[j, t] = sub[j, t] + BETA * direction[j, t]
                norm += direction[j, t] * direction[j, t]
        if norm == 0.0:
            break
        known = lower if lower is not None else best
        target = known - AIM * abs(known)
        step = theta * max(value - target, 1e-3 * abs(value) + 1e-9) / norm
        pi -= step * direction
    return float(best), done


def patience(value: float, best: float, theta: float, stale: int
             ) -> tuple[float, float, int]:
    """The descent's bookkeeping after an iteration worth `value`: the least value so far,
    and the step's scale halved after STALE iterations without a new least one (the
    descent stops once it falls below 1e-3)."""
    if value < best:
        return value, theta, 0
    stale += 1
    if stale >= STALE:
        return best, theta / 2, 0
    return best, theta, stale


def iterations_for(jobs: int, steps: int, gpus: int) -> int:
    """The descent's iterations within WORK: one costs about jobs x steps x (GPUs + 1)."""
    return min(ITERATIONS, WORK // max(1, jobs * steps * (gpus + 1)))


def quick_bound(scenario: Scenario, lower: float | None = None) -> Bound:
    """The plan's default bound: the Lagrangian, then (where the compiled kernel is there
    and the work is small) the decomposition from its prices; the least of the two."""
    began = time.perf_counter()
    p = _problem(scenario)
    lagrangian, done, lam, mu = _descend(p, lower)
    found = Bound(lagrangian, "lagrangian", done, 0.0, lagrangian)
    proven = lower is not None and lagrangian <= lower + 1e-9 * max(1.0, abs(lower))
    budget = iterations_for(len(p.gpus), p.T, scenario.G)
    if _packc is not None and len(p.gpus) and not proven and budget >= MIN_ITERATIONS:
        value, steps = run_compiled(tables(p, scenario.G), prices_from(p, lam, mu), lower,
                                    budget)
        if value < lagrangian:
            found = Bound(value, "decomposition", done + steps, 0.0, lagrangian)
    return Bound(found.value, found.method, found.iterations, time.perf_counter() - began,
                 lagrangian)


def run_compiled(tb: Tables, pi: NDArray[np.float64], lower: float | None, iterations: int
                 ) -> tuple[float, int]:
    """`descend` in C."""
    assert _packc is not None
    value, done = _packc.decomp(
        np.ascontiguousarray(pi, dtype=np.float64), tb.reward, tb.ends, tb.gpus, tb.cover,
        tb.caps, tb.free, tb.rt_best, tb.J, tb.T, tb.G, tb.base,
        np.nan if lower is None else float(lower), AIM, BETA, iterations, STALE)
    return float(value), int(done)
