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
from allocator.model import BatchJob, Scenario
from allocator.reservations import as_dicts
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
    extras: dict[str, Any] = field(default_factory=dict)

    def id_grid(self) -> list[list[str | None]]:
        return gridlib.to_ids(self.scenario, self.grid)

    def starts(self) -> dict[str, dict[str, int]]:
        out = {}
        for i, job in enumerate(self.scenario.jobs):
            if not isinstance(job, BatchJob):
                continue
            rows, cols = np.nonzero(self.grid == i)
            if len(rows):
                out[job.id] = {"start": int(rows.min()), "first_gpu": int(cols.min()),
                               "end": int(rows.max()) + 1}
        return out

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
        body.update(self.extras)
        return body

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, allow_nan=False)


def make_plan(scenario: Scenario, policy: str, **options: Any) -> Plan:
    """Run a policy, time it, validate its grid and recompute its metrics from the grid."""
    run = policies.get(policy)
    began = time.perf_counter()
    result = run(scenario, **options)
    latency_ms = (time.perf_counter() - began) * 1000.0
    extras: dict[str, Any] = {}
    if isinstance(result, tuple):  # a policy may return (grid, extras), e.g. the MILP's gap
        result, extras = result
    ids = gridlib.to_ids(scenario, result)
    problems = violations(scenario, ids)
    if problems:
        raise IllegalPlanError(f"policy {policy!r} produced an illegal grid: {problems[0]}")
    return Plan(scenario=scenario, policy=policy, grid=result,
                metrics=compute_metrics(scenario, ids), latency_ms=latency_ms, extras=extras)
