"""What a policy returns: its grid, and for `full` the report of the MILP's solve.

A policy may return a bare grid (fast, fifo, priority, backfill) or a `PolicyResult`;
`PolicyResult.of` makes one of either, so `make_plan` reads every policy alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from allocator.grid import Grid


@dataclass(frozen=True)
class SolveReport:
    """How `full`'s solve went, in plan JSON's order (`as_dict` is the "solve" key).

    Objectives and bounds are the whole plan's (running jobs included); a bound is a proven
    ceiling on every legal plan. `phases` holds the seconds each step took (and the counts
    `cuts`, `windows_solved`).
    """

    solver: str
    status: str  # not_run | no_solver | too_large | optimal | feasible | time_limit
    objective: float
    fast_objective: float
    best_bound: float | None
    gap: float | None  # relative, to best_bound
    solve_seconds: float
    improved_fast: bool
    milp_bound: float | None  # the MILP's own dual bound
    block_bound: float | None  # the block-capacity relaxation's (after no-good cuts)
    lp_bound: float | None  # the LP relaxation's, when asked for
    time_limit: float
    proof: str | None  # why the plan is optimal, when it is
    warnings: tuple[str, ...] = ()
    phases: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        body = {f.name: getattr(self, f.name) for f in fields(self)}
        body["warnings"] = list(self.warnings)
        body["phases"] = dict(self.phases)
        return body


@dataclass(frozen=True)
class PolicyResult:
    """A policy's grid, and the solve's report when the policy is the MILP."""

    grid: Grid
    solve: SolveReport | None = None

    @classmethod
    def of(cls, result: Grid | PolicyResult) -> PolicyResult:
        return result if isinstance(result, PolicyResult) else cls(result)

    def extras(self) -> dict[str, Any]:
        """What the plan's JSON adds for this result: {"solve": ...} for the MILP."""
        return {} if self.solve is None else {"solve": self.solve.as_dict()}
