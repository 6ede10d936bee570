"""Upper bounds on MODEL.md's objective: how far any plan is from the ceiling.

Two relaxations, both solved with HiGHS:
- `lp_relaxation`: the full MILP with integrality dropped. Cheap to explain, but weak: it
  ignores where jobs sit and behaves like a capacity-only bound.
- `block_capacity`: integer starts kept, placement dropped; per step it only checks that
  the jobs fit the free aligned blocks of each power-of-two size (buddy capacity), and a
  realtime job's held count moves by at most its swap limit. Far tighter, and small
  enough to bound 256-GPU scenarios in seconds (docs/sources.md, "Solving the exact model").
Every feasible plan is feasible in both, so each value is a proven ceiling.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pulp

from allocator.grid import placements
from allocator.milp.model import block_rows, build_model, pinned_cells, touched_values
from allocator.milp.solvers import solve_highs
from allocator.model import BatchJob, RealtimeJob, Scenario


@dataclass(frozen=True)
class Bound:
    """A proven upper bound (None if the solver found none in time) and how it was got."""

    value: float | None
    status: str  # optimal: the relaxation was solved exactly; otherwise its best bound
    seconds: float
    starts: dict[int, int] = field(default_factory=dict)  # block_capacity: job -> start
    nodes: int = 0  # HiGHS branch-and-bound nodes and simplex iterations spent
    iterations: int = 0


def lp_relaxation(scenario: Scenario, time_limit: float = 60.0) -> Bound:
    """The MILP of `full` with every binary relaxed to [0, 1]."""
    began = time.perf_counter()
    model = build_model(scenario)
    result = solve_highs(model.prob, time_limit=time_limit, mip=False)
    value = None if result.bound is None else result.bound + model.fixed_value
    return Bound(value, result.status, time.perf_counter() - began)


@dataclass
class BlockModel:
    """The block-capacity relaxation as a PuLP problem, kept so that cuts can be added."""

    prob: pulp.LpProblem
    chosen: list[tuple[pulp.LpVariable, int, int]]  # (z, job, start)
    fixed: float  # running jobs' objective
    empty: bool  # nothing to decide: the bound is `fixed`
    held: dict[tuple[int, int], pulp.LpVariable] = field(default_factory=dict)  # (job, t)
    short: dict[tuple[int, int], pulp.LpVariable] = field(default_factory=dict)  # (job, t)
    touched: list[tuple[pulp.LpVariable, int, int, int]] = field(default_factory=list)
    cuts: int = 0

    def start_values(self, scenario: Scenario, grid: np.ndarray) -> dict[str, float] | None:
        """Every variable's value for a legal grid (a warm start), or None if the grid has a
        start the relaxation has no variable for (it cannot: every legal start has one)."""
        chosen = {(i, p.start) for i, p in placements(scenario, grid, queued_only=True).items()}
        values = {z.name: float((i, s) in chosen) for z, i, s in self.chosen}
        if sum(values.values()) != len(chosen):
            return None
        for (i, t), h in self.held.items():
            held = int((grid[t] == i).sum())
            values[h.name] = float(held)
            values[self.short[i, t].name] = float(
                max(0, scenario.realtime_job_at(i).demand[t] - held))
        values.update(touched_values(scenario, grid, self.touched))
        return values

    def exclude(self, starts: dict[int, int]) -> None:
        """A no-good cut: the relaxation may no longer pick exactly this set of starts."""
        wanted = set(starts.items())
        terms = [(z, -1 if (i, s) in wanted else 1) for z, i, s in self.chosen]
        self.cuts += 1
        self.prob += (pulp.LpAffineExpression(terms) >= 1 - len(wanted),
                      f"no_good_{self.cuts}")


def block_capacity(scenario: Scenario, time_limit: float = 10.0, mip_gap: float = 1e-6) -> Bound:
    """Integer starts, capacity checked per aligned block size and step, swap on counts."""
    return solve_block(build_block_model(scenario), time_limit, mip_gap)


# HiGHS restarts its search whenever root fixings leave part of the model inactive; on this
# small model a restart throws away the root's cuts and re-deriving them costs more time.
BLOCK_OPTIONS = {"mip_allow_restart": False}


def solve_block(model: BlockModel, time_limit: float = 10.0, mip_gap: float = 1e-6,
                start: dict[str, float] | None = None) -> Bound:
    """The relaxation's proven bound (its dual bound) and the starts of its best solution.

    `start` (BlockModel.start_values of a legal grid) gives HiGHS an incumbent to prune by.
    """
    began = time.perf_counter()
    if model.empty:
        return Bound(model.fixed, "optimal", 0.0)
    result = solve_highs(model.prob, time_limit=max(time_limit, 0.1), mip_gap=mip_gap,
                         start=start, options=BLOCK_OPTIONS)
    # The dual bound, not the incumbent: the relaxation's optimum may sit up to a gap above.
    value = None if result.bound is None else result.bound + model.fixed
    starts = {i: s for z, i, s in model.chosen
              if result.has_solution and (z.varValue or 0) > 0.5}
    return Bound(value, result.status, time.perf_counter() - began, starts,
                 result.nodes, result.iterations)


def build_block_model(scenario: Scenario) -> BlockModel:
    """The relaxation: every legal plan maps onto a solution of it with the same objective."""
    T, G = scenario.T, scenario.G
    decay = scenario.weights.decay ** np.arange(T)
    penalty = scenario.weights.realtime_penalty
    pinned = pinned_cells(scenario)
    free = (~pinned).sum(axis=1)
    cum = np.zeros((T + 1, G), dtype=np.int32)
    np.cumsum(pinned, axis=0, out=cum[1:])

    prob = pulp.LpProblem("gpuplan_block_capacity", pulp.LpMaximize)
    objective: list[tuple[pulp.LpVariable, float]] = []
    fixed = 0.0
    # cells[t] = [(gpus, var)]: batch cells a start would fill at step t
    cells: list[list[tuple[int, pulp.LpVariable]]] = [[] for _ in range(T)]
    chosen: list[tuple[pulp.LpVariable, int, int]] = []
    for i, job in enumerate(scenario.jobs):
        if not isinstance(job, BatchJob):
            continue
        if job.running:
            fixed += job.priority * job.gpus * float(decay[: min(job.running.remaining_steps,
                                                                 T)].sum())
            continue
        k = job.gpus
        n = G // k
        if n == 0:
            continue
        starts = []
        for s in range(job.arrival_step, T):
            end = min(s + job.duration_steps, T)
            hits = (cum[end] - cum[s])[: n * k].reshape(n, k).any(axis=1)
            if hits.all():
                continue  # no aligned block is free of running jobs for the whole run
            z = prob.add_variable(f"start_j{i}_s{s}", cat=pulp.LpBinary)
            starts.append(z)
            chosen.append((z, i, s))
            objective.append((z, job.priority * k * float(decay[s:end].sum())))
            for t in range(s, end):
                cells[t].append((k, z))
        if len(starts) > 1:
            prob += pulp.lpSum(starts) <= 1, f"c2_at_most_once_j{i}"

    held: list[list[pulp.LpVariable]] = [[] for _ in range(T)]
    held_by: dict[tuple[int, int], pulp.LpVariable] = {}
    short_by: dict[tuple[int, int], pulp.LpVariable] = {}
    for i, job in enumerate(scenario.jobs):
        if not isinstance(job, RealtimeJob):
            continue
        h = [prob.add_variable(f"held_j{i}_t{t}", 0, int(free[t]), cat=pulp.LpInteger)
             for t in range(T)]
        for t in range(T):
            held[t].append(h[t])
            short = prob.add_variable(f"short_j{i}_t{t}", lowBound=0)
            held_by[i, t], short_by[i, t] = h[t], short
            objective.append((short, -penalty * job.priority))
            prob += short + h[t] >= job.demand[t], f"c2_shortfall_j{i}_t{t}"
        # 4. Swap limit, on counts: |A xor A'| >= | |A| - |A'| |.
        if job.swap_limit < G:
            for t in range(1, T):
                prob += h[t] - h[t - 1] <= job.swap_limit, f"c4_rise_j{i}_t{t}"
                prob += h[t - 1] - h[t] <= job.swap_limit, f"c4_fall_j{i}_t{t}"
            if job.current_gpus is not None:
                now = len(job.current_gpus)
                prob += h[0] <= now + job.swap_limit, f"c4_rise_j{i}_t0"
                prob += h[0] >= now - job.swap_limit, f"c4_fall_j{i}_t0"

    prob += pulp.LpAffineExpression(objective), "objective"
    touched = block_rows(prob, scenario, pinned, cells, held)
    return BlockModel(prob, chosen, fixed, empty=not objective, held=held_by, short=short_by,
                      touched=touched)
