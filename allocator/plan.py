"""A plan: the grid a policy chose, its metrics (recomputed from the grid) and its latency.

`make_plan` is the one way plans are made, so every plan is validated before it leaves.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from allocator import grid as gridlib
from allocator import policies
from allocator.model import Scenario, queued_work
from allocator.policies import refine
from allocator.reservations import as_dicts
from allocator.result import PolicyResult, SolveReport
from allocator.validator import Metrics, compute_metrics, violations


class IllegalPlanError(RuntimeError):
    """A policy produced a grid that breaks the contract: a bug, never bad input."""


@dataclass(frozen=True)
class Plan:
    scenario: Scenario
    policy: str
    grid: np.ndarray
    metrics: Metrics
    latency_ms: float
    extras: dict[str, Any] = field(default_factory=dict)  # JSON additions: "bound"
    solve: SolveReport | None = None  # the MILP's report (policy `full`)

    def id_grid(self) -> list[list[str | None]]:
        return gridlib.to_ids(self.scenario, self.grid)

    def starts(self) -> dict[str, dict[str, int]]:
        jobs = self.scenario.jobs
        return {jobs[i].id: p._asdict()
                for i, p in gridlib.placements(self.scenario, self.grid).items()}

    def unplaced(self, starts: dict[str, dict[str, int]] | None = None) -> list[str]:
        placed = self.starts() if starts is None else starts
        return [j.id for j in self.scenario.batch_jobs if j.id not in placed]

    def to_dict(self) -> dict[str, Any]:
        starts = self.starts()
        body = {
            "scenario": self.scenario.name,
            "policy": self.policy,
            "grid": self.id_grid(),
            "metrics": self.metrics.as_dict(),
            "latency_ms": self.latency_ms,
            "starts": starts,
            "unplaced": self.unplaced(starts),
            "kinds": {job.id: job.kind for job in self.scenario.jobs},
            "reservations": as_dicts(self.scenario.reservations),
        }
        if self.solve is not None:
            body["solve"] = self.solve.as_dict()
        body.update(self.extras)
        return body

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, allow_nan=False)


# "auto" bounds a plan when the Lagrangian is cheap (the decomposition after it limits its
# own work: allocator.decomposition.WORK): queued jobs x steps up to this many
# (256 GPUs / 120 jobs / 24 steps is 2,880 and bounds in ~20-50 ms; 1,000 jobs x 48 steps
# takes ~0.5 s, more than the plan itself: BENCHMARKS.md, "Every plan carries a bound").
AUTO_BOUND_WORK = 10_000
BOUND_MODES = ("auto", "on", "off", "block")


def make_plan(scenario: Scenario, policy: str, *, bound: str = "off",
              block_seconds: float = 30.0, refine_below: float = 0.0,
              **options: Any) -> Plan:
    """Run a policy, time it, validate its grid and recompute its metrics from the grid.

    `bound` adds a proven upper bound on the objective under `extras["bound"]` (outside
    the latency): "on" the Lagrangian one, "auto" that where it is cheap, "block" also
    the block-capacity relaxation (a MILP given `block_seconds`), "off" none.
    `refine_below` (fast, with a bound): a plan below this share of its bound is made
    again (allocator/policies/refine.py's candidates), the best one kept (`extras["refined"]`).
    """
    run = policies.get(policy)
    result, latency_ms, metrics = _run_checked(scenario, policy, run, options)
    extras: dict[str, Any] = {}
    if bound != "off":
        milp_bound = None if result.solve is None else result.solve.best_bound
        found = prove_bound(scenario, metrics.objective, bound, block_seconds, milp_bound)
        if found is not None:
            extras["bound"] = found
        if policy == "fast" and found is not None:
            result, metrics, refined, spent = _refined(scenario, run, options, result,
                                                       metrics, found, refine_below)
            if refined is not None:
                extras["refined"] = refined
                latency_ms += spent
                if refined["lifted"]:  # the same ceilings, judged against the plan kept
                    extras["bound"] = judged(found["candidates"], metrics.objective,
                                             found["seconds"])
    return Plan(scenario=scenario, policy=policy, grid=result.grid, metrics=metrics,
                latency_ms=latency_ms, extras=extras, solve=result.solve)


def _refined(scenario: Scenario, run: Any, options: dict[str, Any], result: PolicyResult,
             metrics: Metrics, found: dict[str, Any], below: float
             ) -> tuple[PolicyResult, Metrics, dict[str, Any] | None, float]:
    """fast's plan, or where it reads below `below` of its bound `found` the best of it and
    its refinements (allocator/policies/refine.py); their record (None: none ran) and
    milliseconds."""
    runs = (refine.candidates(scenario, options)
            if refine.wanting(metrics.objective, found.get("value"), below) else {})
    if not runs:
        return result, metrics, None, 0.0
    first, spent, lifted_by = metrics.objective, 0.0, None
    for name, more in runs.items():
        again, again_ms, again_metrics = _run_checked(scenario, "fast", run, more)
        spent += again_ms
        if again_metrics.objective > metrics.objective:
            result, metrics, lifted_by = again, again_metrics, name
    record = {"below": below, "first_objective": round(first, 6),
              "first_share": round(first / found["value"], 6),
              "objective": round(metrics.objective, 6), "tried": list(runs),
              "lifted": lifted_by is not None, "lifted_by": lifted_by, "ms": round(spent, 3)}
    return result, metrics, record, spent


def _run_checked(scenario: Scenario, policy: str, run: Any,
                 options: dict[str, Any]) -> tuple[PolicyResult, float, Metrics]:
    """One timed run of the policy, its grid validated and its metrics recomputed."""
    began = time.perf_counter()
    result = PolicyResult.of(run(scenario, **options))
    latency_ms = (time.perf_counter() - began) * 1000.0
    ids = gridlib.to_ids(scenario, result.grid)
    problems = violations(scenario, ids)
    if problems:
        raise IllegalPlanError(f"policy {policy!r} produced an illegal grid: {problems[0]}")
    return result, latency_ms, compute_metrics(scenario, ids)


def bound_is_cheap(scenario: Scenario) -> bool:
    return queued_work(scenario) <= AUTO_BOUND_WORK


def prove_bound(scenario: Scenario, objective: float, mode: str, block_seconds: float = 30.0,
                milp_bound: float | None = None) -> dict[str, Any] | None:
    """The smallest proven upper bound the mode affords, and the plan's distance to it.

    Every candidate is a ceiling on every legal plan (the Lagrangian and, on small clusters,
    the step-by-job decomposition by weak duality, the block-capacity MILP's dual bound, a
    MILP's own dual bound), so the least one is too.
    """
    if mode not in BOUND_MODES:
        raise ValueError(f"bound mode {mode!r}; choose from {', '.join(BOUND_MODES)}")
    if mode == "off" or (mode == "auto" and not bound_is_cheap(scenario)):
        return None
    from allocator.decomposition import quick_bound

    began = time.perf_counter()
    quick = quick_bound(scenario, lower=objective)
    found = {"lagrangian": quick.lagrangian}
    if quick.method != "lagrangian":  # the decomposition from the Lagrangian's prices
        found[quick.method] = quick.value
    if milp_bound is not None:  # the MILP's own best bound, when the policy was `full`
        found["milp"] = float(milp_bound)
    if mode == "block":
        from allocator.milp.bounds import block_capacity

        block = block_capacity(scenario, time_limit=block_seconds)
        if block.value is not None:
            found["block_capacity"] = block.value
    return judged(found, objective, time.perf_counter() - began)


def judged(found: dict[str, float], objective: float, seconds: float) -> dict[str, Any]:
    """The least of the proven ceilings `found`, and the plan's distance to it. A ceiling
    below a legal plan would be a bug in its proof: dropped and said so (float rounding
    aside, which clamps to the plan)."""
    from allocator.lagrange import ratio_line

    slack = 1e-6 * max(1.0, abs(objective))
    below = sorted(k for k, v in found.items() if v < objective - slack)
    kept = {k: max(v, objective) for k, v in found.items() if k not in below}
    if not kept:
        return {"value": None, "warnings": [f"{k} bound below the plan" for k in below]}
    method = min(kept, key=kept.__getitem__)
    value = kept[method]
    body = {"value": round(value, 6), "method": method,
            "gap": round(1 - objective / value, 6) if value > 0 and objective > 0 else None,
            "summary": ratio_line(objective, value),
            "candidates": {k: round(v, 6) for k, v in found.items()},
            "seconds": round(seconds, 4)}
    if below:
        body["warnings"] = [f"{k} bound below the plan: dropped" for k in below]
    return body
