"""Two ways to tighten the plan's bound (allocator.decomposition), measured on named seeds.

The plan's bound sits up to 15% above the proven optimum on some family seeds. This
script measures two valid tightenings of the step-by-job decomposition on them, beside
the bound as it is (a diagnosis; neither is in the product):

- **ramp**: a third copy, each service's count of GPUs as a path whose step-to-step change
  stays within its swap limit (|h_t - h_{t-1}| <= limit; a legal grid keeps it, since a
  count moves by at most the GPUs changed), linked to the steps' realtime counts by a
  price per step. In Python (seconds a scenario); from prices 0 it starts at the bound's
  own first value, and the descent keeps the least value it finds.
- **split**: one job's starts cut at a quantile m into [.., m) and [m, ..) (each side
  keeps "not run"), the decomposition run on each side, the larger of the two a bound;
  the best such split over every queued job and the quartiles (the compiled kernel).

    python benchmarks/bound_tightenings.py --set tuning5 --seeds 3012,3281,3253,3235
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import typer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from allocator import grid as gridlib  # noqa: E402
from allocator.decomposition import (  # noqa: E402
    AIM,
    Tables,
    iterations_for,
    patience,
    prices_from,
    quick_bound,
    run_compiled,
    tables,
)
from allocator.lagrange import _descend, _problem  # noqa: E402
from allocator.model import RealtimeJob, Scenario  # noqa: E402
from allocator.policies.fast import fast  # noqa: E402


def _step_with_price(tb: Tables, pi: np.ndarray, t: int, sigma: float
                     ) -> tuple[float, list[int], int]:
    """Step t's maximum with realtime's GPUs priced sigma each: `step_value`'s knapsack
    over batch cells, then realtime's count r <= the free cells left, the best of
    rt_best[t, r] - sigma r; the jobs run and r."""
    G = tb.G
    dp = [0.0] + [-np.inf] * G
    taken: list[tuple[int, int, list[bool]]] = []
    k = 1 << (G.bit_length() - 1)
    while k >= 1:
        for j in range(tb.J):
            if tb.gpus[j] != k or not tb.cover[j, t] or not float(pi[j, t]) > 0.0:
                continue
            chosen = [False] * (G + 1)
            for b in range(G, k - 1, -1):
                if dp[b - k] + float(pi[j, t]) > dp[b]:
                    dp[b], chosen[b] = dp[b - k] + float(pi[j, t]), True
            taken.append((j, k, chosen))
        if k >= 2:
            for b in range(int(tb.caps[k.bit_length() - 2, t]) + 1, G + 1):
                dp[b] = -np.inf
        k //= 2
    free = int(tb.free[t])
    best, at, r_at = -np.inf, 0, 0
    for b in range(min(free, G) + 1):
        rt = tb.rt_best[t, : free - b + 1] - sigma * np.arange(free - b + 1)
        r = int(np.argmax(rt))
        if dp[b] + rt[r] > best:
            best, at, r_at = dp[b] + float(rt[r]), b, r
    jobs = []
    for j, k, chosen in reversed(taken):
        if chosen[at]:
            jobs.append(j)
            at -= k
    return float(best), jobs, r_at


def _paths(sigma: np.ndarray, limits: list[int], starts: list[int | None], top: int
           ) -> tuple[float, np.ndarray]:
    """Each service's count path (0 .. top, moving <= its limit a step, within it of its
    current count at step 0) that earns most at prices sigma: their sum and counts."""
    T = len(sigma)
    z = np.arange(top + 1)
    total, counts = 0.0, np.zeros(T)
    for limit, start in zip(limits, starts, strict=True):
        value = np.where(np.abs(z - start) <= limit, 0.0, -np.inf) if start is not None \
            else np.zeros(top + 1)
        value = value + sigma[0] * z
        came: list[np.ndarray] = []
        for t in range(1, T):
            reach, src = np.full(top + 1, -np.inf), np.zeros(top + 1, dtype=np.int64)
            for d in range(-limit, limit + 1):
                frm = z + d
                ok = (frm >= 0) & (frm <= top)
                cand = np.full(top + 1, -np.inf)
                cand[ok] = value[frm[ok]]
                better = cand > reach
                reach[better], src[better] = cand[better], frm[better]
            came.append(src)
            value = reach + sigma[t] * z
        at = int(np.argmax(value))
        total += float(value[at])
        path = [at]
        for src in reversed(came):
            at = int(src[at])
            path.append(at)
        counts += np.array(path[::-1])
    return total, counts


def ramp_bound(scenario: Scenario, tb: Tables, pi: np.ndarray, lower: float,
               iterations: int) -> float:
    """The decomposition with the services' count paths (module docstring), in Python."""
    realtime = [j for j in scenario.jobs if isinstance(j, RealtimeJob)]
    limits = [min(j.swap_limit, scenario.G) for j in realtime]
    starts = [None if j.current_gpus is None or j.swap_limit >= scenario.G
              else len(j.current_gpus) for j in realtime]
    pi, sigma = pi.copy(), np.zeros(tb.T)
    best, theta, stale = np.inf, 1.0, 0
    for _ in range(iterations):
        total, sub, held = tb.base, np.zeros((tb.J, tb.T)), np.zeros(tb.T)
        for t in range(tb.T):
            got, jobs, r = _step_with_price(tb, pi, t, float(sigma[t]))
            total += got
            sub[jobs, t] += 1.0
            held[t] = r
        for j in range(tb.J):
            before = np.concatenate(([0.0], np.cumsum(pi[j])))
            gain = tb.reward[j] - (before[tb.ends[j]] - before[:-1])
            s = int(np.argmax(gain))
            if gain[s] > 0:
                total += float(gain[s])
                sub[j, s : int(tb.ends[j, s])] -= 1.0
        paths, counts = _paths(sigma, limits, starts, tb.G)
        total += paths
        sub *= tb.cover
        ssub = counts - held
        best, theta, stale = patience(total, best, theta, stale)
        if theta < 1e-3 or best <= lower + 1e-9 * max(1.0, abs(lower)):
            break
        norm = float((sub * sub).sum() + (ssub * ssub).sum())
        if norm == 0.0:
            break
        step = theta * max(total - (lower - AIM * abs(lower)), 1e-3 * abs(total) + 1e-9) / norm
        pi -= step * sub
        sigma -= step * ssub
    return float(best)


def split_bound(tb: Tables, pi: np.ndarray, lower: float, iterations: int
                ) -> tuple[float, str]:
    """The least bound over one job's starts split at a quartile (module docstring)."""
    best, where = np.inf, ""
    steps = np.arange(tb.T)
    for j in range(tb.J):
        ok = np.isfinite(tb.reward[j])
        starts = np.flatnonzero(ok)
        if len(starts) < 2:
            continue
        for m in sorted({int(q) for q in np.quantile(starts, [0.25, 0.5, 0.75])}):
            sides = (ok & (steps < m), ok & (steps >= m))
            if not all(side.any() for side in sides):
                continue
            value = max(run_compiled(_only(tb, j, side), pi, lower, iterations)[0]
                        for side in sides)
            if value < best:
                best, where = value, f"job {j} ({int(tb.gpus[j])} GPUs) at step {m}"
    return float(best), where


def _only(tb: Tables, j: int, allowed: np.ndarray) -> Tables:
    """`tb` with job j's starts cut to `allowed` (its cover recomputed)."""
    reward = tb.reward.copy()
    reward[j, ~allowed] = -np.inf
    cover = np.zeros_like(tb.cover)
    for s in np.flatnonzero(np.isfinite(reward[j])):
        cover[j, s : int(tb.ends[j, s])] = 1
    cover = np.where(np.arange(tb.J)[:, None] == j, cover, tb.cover).astype(np.uint8)
    return replace(tb, reward=np.ascontiguousarray(reward), cover=np.ascontiguousarray(cover))


def main(which: str = typer.Option("tuning5", "--set", help="a tuning set"),
         seeds: str = typer.Option(..., "--seeds", help="seeds of the set, comma-separated"),
         ramp_iterations: int = typer.Option(1500, "--ramp-iterations")) -> None:
    from benchmarks.bench_quality import SEED_SETS, cases_for, only_seeds, scenario_for

    if which.startswith("test") or which not in SEED_SETS:
        raise typer.BadParameter("a tuning set (the test seeds stay out of diagnosis)",
                                 param_hint="--set")
    cases = only_seeds(which, cases_for(which, 16), seeds)
    print("| scenario | fast | the plan's bound | ramp | split | split on "
          "| seconds (ramp, split) |")
    print("|---|---:|---:|---:|---:|---|---|")
    for case in cases:
        scenario = scenario_for(case)
        objective = gridlib.objective(scenario, fast(scenario))
        plain = quick_bound(scenario, objective).value
        p = _problem(scenario)
        _, _, lam, mu = _descend(p, objective)
        tb, pi = tables(p, scenario.G), prices_from(p, lam, mu)
        iterations = iterations_for(len(p.gpus), p.T, scenario.G)
        began = time.perf_counter()
        ramp = ramp_bound(scenario, tb, pi, objective, ramp_iterations)
        middle = time.perf_counter()
        split, where = split_bound(tb, pi, objective, iterations)
        print(f"| {scenario.name} | {objective:.2f} | {plain:.2f} | {ramp:.2f} | {split:.2f} "
              f"| {where} | {middle - began:.1f}, {time.perf_counter() - middle:.1f} |",
              flush=True)


if __name__ == "__main__":
    typer.run(main)
