"""`full`: MODEL.md's exact model as a PuLP MILP, warm-started from `fast`, never worse.

For periodic review, not the hot path. The MILP reads like the contract: one binary per
(batch job, aligned block, start), per-GPU binaries for realtime, and the five constraint
families under MODEL.md's numbers. The plan returned is the better of the solver's
incumbent (its objective recomputed from the grid, never taken from the solver) and the
fast grid, checked by the validator; a missing solver or an empty timeout yields fast.
"""

from __future__ import annotations

import math
import os
import re
import sys
import tempfile
import time
import warnings as pywarnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pulp

from allocator import grid as gridlib
from allocator import reservations
from allocator.model import BatchJob, RealtimeJob, Scenario
from allocator.policies.fast import fast
from allocator.validator import violations

SOLVERS = ("highs", "cbc")
# Objectives are compared with MODEL.md's tolerance for metrics.
REL_TOL = 1e-6


@dataclass(frozen=True)
class Start:
    """One batch placement the MILP can choose: job `job` on [first, first+gpus) from `start`."""

    job: int
    start: int
    first: int
    end: int  # exclusive, clipped to the horizon


@dataclass
class Model:
    """The PuLP problem and the maps from its variables back to grid cells."""

    prob: pulp.LpProblem
    starts: list[tuple[pulp.LpVariable, Start]] = field(default_factory=list)
    realtime: dict[tuple[int, int, int], pulp.LpVariable] = field(default_factory=dict)
    swaps: dict[tuple[int, int, int], pulp.LpVariable] = field(default_factory=dict)
    shortfall: dict[tuple[int, int], pulp.LpVariable] = field(default_factory=dict)
    fixed_value: float = 0.0  # running jobs' objective: pinned, so outside the MILP
    counts: dict[str, tuple[str, int, int]] = field(default_factory=dict)  # aggregate ints
    touched: list[tuple[pulp.LpVariable, int, int, int]] = field(default_factory=list)
    start_counts: dict[tuple[int, int], pulp.LpVariable] = field(default_factory=dict)

    def restrict_starts(self, starts: dict[int, int] | None) -> None:
        """Allow each batch job only the given start (or none); None lifts the restriction.

        Used to place the block-capacity relaxation's starts: the solver then only picks
        blocks, realtime GPUs and which of those jobs to drop, a far smaller search.
        """
        wanted = set(starts.items()) if starts is not None else set()
        for key, z in self.start_counts.items():
            z.upBound = 1 if starts is None or key in wanted else 0

    def start_values(self, scenario: Scenario, grid: np.ndarray) -> dict[str, float] | None:
        """Every variable's value in `grid` (a legal grid), for the warm start.

        None if the grid uses a placement the model has no variable for (a bug upstream).
        """
        values: dict[str, float] = {}
        chosen = set()
        for i, job in enumerate(scenario.jobs):
            if isinstance(job, BatchJob) and not job.running:
                rows, cols = np.nonzero(grid == i)
                if len(rows):
                    chosen.add((i, int(rows.min()), int(cols.min())))
        found = set()
        for var, st in self.starts:
            hit = (st.job, st.start, st.first) in chosen
            values[var.name] = 1.0 if hit else 0.0
            if hit:
                found.add((st.job, st.start, st.first))
        if found != chosen:
            return None
        held = {}
        for (i, g, t), var in self.realtime.items():
            values[var.name] = float(grid[t, g] == i)
            held[i, t] = held.get((i, t), 0) + int(grid[t, g] == i)
        for (i, g, t), var in self.swaps.items():
            now = grid[t, g] == i
            if t > 0:
                before = grid[t - 1, g] == i
            else:
                before = g in (scenario.jobs[i].current_gpus or ())
            values[var.name] = float(now != before)
        for name, (what, i, u) in self.counts.items():
            if what == "start":
                values[name] = float(any(c[0] == i and c[1] == u for c in chosen))
            else:
                values[name] = float(held.get((i, u), 0))
        for (i, t), var in self.shortfall.items():
            values[var.name] = float(max(0, scenario.jobs[i].demand[t] - held.get((i, t), 0)))
        # Batch jobs as their size, realtime as 0 (always small), pins and free cells as G+1.
        sizes = np.array([j.gpus if isinstance(j, BatchJob) else 0 for j in scenario.jobs]
                         + [scenario.G + 1])
        cell_size = sizes[np.where(grid >= 0, grid, len(scenario.jobs))]
        cell_size[pinned_cells(scenario)] = scenario.G + 1
        for var, k, t, outside in self.touched:
            small = int((cell_size[t] < k).sum())
            values[var.name] = float(max(0, -(-(small - outside) // k)))
        return values

    def grid(self, scenario: Scenario) -> np.ndarray:
        """The grid the solver's values describe (binaries read as > 0.5)."""
        out = gridlib.empty(scenario)
        gridlib.pin_running(scenario, out)
        for var, st in self.starts:
            if (var.varValue or 0.0) > 0.5:
                out[st.start : st.end, st.first : st.first + scenario.jobs[st.job].gpus] = st.job
        for (i, g, t), var in self.realtime.items():
            if (var.varValue or 0.0) > 0.5:
                out[t, g] = i
        return out


def pinned_cells(scenario: Scenario) -> np.ndarray:
    """(T, G) bool: cells held by running jobs (constraint 2, inherited work)."""
    grid = gridlib.empty(scenario)
    gridlib.pin_running(scenario, grid)
    return grid >= 0


def batch_starts(scenario: Scenario, pinned: np.ndarray) -> list[Start]:
    """Every (job, aligned block, start) that keeps constraints 2, 3 and 5 and avoids pins."""
    T, G = scenario.T, scenario.G
    out = []
    cum = np.zeros((T + 1, G), dtype=np.int32)
    np.cumsum(pinned, axis=0, out=cum[1:])
    for i, job in enumerate(scenario.jobs):
        if not isinstance(job, BatchJob) or job.running:
            continue
        k = job.gpus
        for s in range(job.arrival_step, T):  # never before arrival (constraint 2)
            end = min(s + job.duration_steps, T)  # the whole run, unbroken (constraint 5)
            hits = cum[end] - cum[s]
            for first in range(0, G - k + 1, k):  # aligned power-of-two blocks (constraint 3)
                if not hits[first : first + k].any():
                    out.append(Start(i, s, first, end))
    return out


def build_model(scenario: Scenario, strengthen: bool = True) -> Model:
    """MODEL.md's objective and five constraint families, numbered as there."""
    T, G = scenario.T, scenario.G
    decay = scenario.weights.decay ** np.arange(T)
    penalty = scenario.weights.realtime_penalty
    prob = pulp.LpProblem("gpuplan_full", pulp.LpMaximize)
    model = Model(prob)
    pinned = pinned_cells(scenario)
    for job in scenario.batch_jobs:
        if job.running:
            steps = min(job.running.remaining_steps, T)
            model.fixed_value += job.priority * job.gpus * float(decay[:steps].sum())

    objective: list[tuple[pulp.LpVariable, float]] = []
    cover: dict[tuple[int, int], list[pulp.LpVariable]] = {}
    per_job: dict[int, list[pulp.LpVariable]] = {}
    for st in batch_starts(scenario, pinned):
        job = scenario.jobs[st.job]
        var = prob.add_variable(f"run_j{st.job}_s{st.start}_g{st.first}", cat=pulp.LpBinary)
        model.starts.append((var, st))
        per_job.setdefault(st.job, []).append(var)
        objective.append((var, job.priority * job.gpus * float(decay[st.start : st.end].sum())))
        for t in range(st.start, st.end):
            for g in range(st.first, st.first + job.gpus):
                cover.setdefault((g, t), []).append(var)

    for i, job in enumerate(scenario.jobs):
        if not isinstance(job, RealtimeJob):
            continue
        for t in range(T):
            for g in range(G):
                if not pinned[t, g]:
                    x = prob.add_variable(f"rt_j{i}_g{g}_t{t}", cat=pulp.LpBinary)
                    model.realtime[i, g, t] = x
                    cover.setdefault((g, t), []).append(x)
            short = prob.add_variable(f"short_j{i}_t{t}", lowBound=0)
            model.shortfall[i, t] = short
            objective.append((short, -penalty * job.priority))

    prob += pulp.LpAffineExpression(objective), "objective"

    # 1. One job per GPU per step: every variable covering a free cell, at most one.
    for (g, t), vars_ in sorted(cover.items()):
        if len(vars_) > 1:
            prob += pulp.lpSum(vars_) <= 1, f"c1_one_job_g{g}_t{t}"

    # 2. Demand range, inherited work: a batch job runs on one block from one start, or
    #    not at all (running jobs are pinned: their cells have no variable at all).
    for i, vars_ in per_job.items():
        if len(vars_) > 1:
            prob += pulp.lpSum(vars_) <= 1, f"c2_at_most_once_j{i}"
    # 2. Demand range: a realtime job's shortfall is what it holds below demand.
    for (i, t), short in model.shortfall.items():
        held = [model.realtime[i, g, t] for g in range(G) if (i, g, t) in model.realtime]
        prob += short + pulp.lpSum(held) >= scenario.jobs[i].demand[t], f"c2_shortfall_j{i}_t{t}"

    # 3. Contiguous power-of-two blocks: only aligned blocks [b, b+k), b % k == 0, have a
    #    variable (see batch_starts), so the family needs no rows.

    # 4. Swap limit: y >= |x[t] - x[t-1]| per GPU, at most swap_limit changes per step.
    for i, job in enumerate(scenario.jobs):
        if isinstance(job, RealtimeJob):
            _swap_rows(model, scenario, i, job)

    # 5. No interruption: each variable is a whole run s..min(s+duration, T)-1 on one block
    #    (see batch_starts), so the family needs no rows.

    if strengthen:
        _strengthen(model, scenario, pinned, per_job)
    reservations.constrain_milp(model, scenario)  # the reserved runs, as variable bounds
    return model


def _strengthen(model: Model, scenario: Scenario, pinned: np.ndarray,
                per_job: dict[int, list[pulp.LpVariable]]) -> None:
    """Integer start and held counts, and buddy capacity rows on them (valid, not needed).

    The per-cell rows let the LP spread a job over blocks; branching on "job j starts at s"
    and checking block capacity per size closes most of that gap (docs/sources.md).
    """
    T = scenario.T
    prob = model.prob
    by_start: dict[tuple[int, int], list[pulp.LpVariable]] = {}
    ends: dict[tuple[int, int], int] = {}
    for var, st in model.starts:
        by_start.setdefault((st.job, st.start), []).append(var)
        ends[st.job, st.start] = st.end
    cells: list[list[tuple[int, Any]]] = [[] for _ in range(T)]
    for (i, s), vars_ in sorted(by_start.items()):
        z = prob.add_variable(f"starts_j{i}_s{s}", 0, 1, cat=pulp.LpInteger)
        model.counts[z.name] = ("start", i, s)
        model.start_counts[i, s] = z
        prob += z == pulp.lpSum(vars_), f"c2_start_count_j{i}_s{s}"
        for t in range(s, ends[i, s]):
            cells[t].append((scenario.jobs[i].gpus, z))
    held: list[list[Any]] = [[] for _ in range(T)]
    for i, job in enumerate(scenario.jobs):
        if not isinstance(job, RealtimeJob):
            continue
        for t in range(T):
            xs = [v for (j, _, u), v in model.realtime.items() if j == i and u == t]
            h = prob.add_variable(f"held_j{i}_t{t}", 0, len(xs), cat=pulp.LpInteger)
            model.counts[h.name] = ("held", i, t)
            prob += h == pulp.lpSum(xs), f"c2_held_count_j{i}_t{t}"
            held[t].append(h)
    model.touched = block_rows(prob, scenario, pinned, cells, held)


def _swap_rows(model: Model, scenario: Scenario, i: int, job: RealtimeJob) -> None:
    T, G = scenario.T, scenario.G
    if job.swap_limit >= G:  # |A xor A'| <= G always: the limit cannot bind
        return
    current = set(job.current_gpus) if job.current_gpus is not None else None
    prob = model.prob
    for t in range(T):
        if t == 0 and current is None:
            continue  # no previous set: step 0 is free
        changes = []
        for g in range(G):
            now = model.realtime.get((i, g, t))
            if t == 0:
                before: pulp.LpVariable | float = 1.0 if g in current else 0.0
            else:
                before = model.realtime.get((i, g, t - 1), 0.0)
            if now is None and isinstance(before, float):
                changes.append(before)  # a constant change (or none)
                continue
            y = prob.add_variable(f"swap_j{i}_g{g}_t{t}", lowBound=0, upBound=1)
            model.swaps[i, g, t] = y
            now_expr = now if now is not None else 0.0
            prob += y >= now_expr - before, f"c4_gain_j{i}_g{g}_t{t}"
            prob += y >= before - now_expr, f"c4_loss_j{i}_g{g}_t{t}"
            changes.append(y)
        prob += pulp.lpSum(changes) <= job.swap_limit, f"c4_swap_limit_j{i}_t{t}"


def free_blocks(pinned: np.ndarray, k: int) -> np.ndarray:
    """Per step, the aligned k-blocks [b, b+k) (b % k == 0, inside the cluster) with no pin."""
    T, G = pinned.shape
    n = G // k
    if n == 0:
        return np.zeros(T, dtype=np.int64)
    return (~pinned[:, : n * k].reshape(T, n, k).any(axis=2)).sum(axis=1)


def block_rows(prob: pulp.LpProblem, scenario: Scenario, pinned: np.ndarray,
               cells: list[list[tuple[int, Any]]], held: list[list[Any]],
               tag: str = "") -> list[tuple[pulp.LpVariable, int, int, int]]:
    """Constraints 1 and 3 counted per step and block size: buddy capacity.

    `cells[t]` lists (gpus, start count) for batch starts that run at step t, `held[t]` the
    realtime held counts. Jobs of >= k GPUs fill whole pin-free aligned k-blocks; smaller
    jobs and realtime GPUs spoil at least (their cells outside partly pinned k-blocks) / k
    of them, an integer (`touched`). Implied by any legal grid, so valid in the MILP too.
    """
    T, G = scenario.T, scenario.G
    free = (~pinned).sum(axis=1)
    out = []  # (touched, k, t, outside), so a warm start can give each its value
    for k in (1 << p for p in range(G.bit_length()) if (1 << p) <= G):
        blocks = free_blocks(pinned, k)
        for t in range(T):
            big = [(z, g) for g, z in cells[t] if g >= k]
            small = [(z, g) for g, z in cells[t] if g < k] + [(h, 1) for h in held[t]]
            if not small and not big:
                continue
            cap = k * int(blocks[t])
            if not small:
                prob += pulp.LpAffineExpression(big) <= cap, f"c1_blocks{tag}_k{k}_t{t}"
                continue
            touched = prob.add_variable(f"touched{tag}_k{k}_t{t}", 0, int(blocks[t]),
                                      cat=pulp.LpInteger)
            outside = int(free[t]) - cap  # free cells in partly pinned blocks
            prob += (k * touched >= pulp.LpAffineExpression(small) - outside,
                     f"c1_touched{tag}_k{k}_t{t}")
            prob += (pulp.LpAffineExpression(big) + k * touched <= cap,
                     f"c1_blocks{tag}_k{k}_t{t}")
            out.append((touched, k, t, outside))
    return out


# -- solving ----------------------------------------------------------------------------

@dataclass
class Solve:
    """What one solver call gave back, in the model's own (maximisation) terms."""

    status: str  # optimal | time_limit | target | infeasible | no_solution | error
    has_solution: bool
    objective: float | None  # as the solver reports it (the MILP part, no fixed value)
    bound: float | None  # a proven upper bound on the MILP part, when the solver gives one
    seconds: float


def solver_available(name: str) -> bool:
    if name == "highs":
        return bool(pulp.HiGHS(msg=False).available())
    if name == "cbc":
        return bool(_cbc(msg=False).available())
    return False


def _cbc(**kwargs: Any) -> pulp.LpSolver:
    """PuLP 3's bundled CBC (deprecated for PuLP 4, which pyproject excludes)."""
    with pywarnings.catch_warnings():
        pywarnings.simplefilter("ignore", DeprecationWarning)
        return pulp.PULP_CBC_CMD(**kwargs)


class _HiGHS(pulp.HiGHS):
    """pulp.HiGHS with a real warm start (setSolution), an objective target and the bound.

    PuLP 3.3's HiGHS interface ignores warmStart; highspy takes a start directly.
    """

    def __init__(self, start: dict[str, float] | None = None, target: float | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start = start
        self.target = target
        self.result: Solve | None = None

    def createAndConfigureSolver(self, lp: pulp.LpProblem) -> None:
        _quiet_banner()
        super().createAndConfigureSolver(lp)

    def actualSolve(self, lp: pulp.LpProblem) -> int:  # PuLP names it so
        import highspy

        began = time.perf_counter()
        self.createAndConfigureSolver(lp)
        self.buildSolverModel(lp)
        h = lp.solverModel
        variables = lp.variables()
        if self.start is not None:
            index = np.array([v.index for v in variables], dtype=np.int32)
            value = np.array([self.start.get(v.name, 0.0) for v in variables], dtype=np.float64)
            h.setSolution(len(index), index, value)
        if self.timeLimit is not None:  # the limit covers building the model too
            spent = time.perf_counter() - began
            h.setOptionValue("time_limit", max(float(self.timeLimit) - spent, 0.01))
        if self.target is not None:  # stop as soon as an incumbent reaches the target
            h.setOptionValue("objective_target", -self.target)  # HiGHS minimises -objective
        self.callSolver(lp)
        status = h.getModelStatus()
        info = h.getInfo()
        has_solution = info.primal_solution_status == 2  # kSolutionStatusFeasible
        if has_solution:
            col = h.getSolution().col_value
            for v in variables:
                v.varValue = col[v.index]
        names = {
            highspy.HighsModelStatus.kOptimal: "optimal",
            highspy.HighsModelStatus.kTimeLimit: "time_limit",
            highspy.HighsModelStatus.kObjectiveTarget: "target",
            highspy.HighsModelStatus.kInfeasible: "infeasible",
        }
        name = names.get(status, h.modelStatusToString(status))
        sense = -1.0 if lp.sense == pulp.LpMaximize else 1.0
        objective = sense * info.objective_function_value if has_solution else None
        if self.mip:
            bound = sense * info.mip_dual_bound
            bound = bound if math.isfinite(bound) else None
        else:
            bound = objective if name == "optimal" else None
        self.result = Solve(name, has_solution, objective, bound, time.perf_counter() - began)
        lp.assignStatus(pulp.LpStatusOptimal if has_solution else pulp.LpStatusNotSolved)
        return lp.status


_BANNER = {"quiet": False}


def _quiet_banner() -> None:
    """HiGHS prints a banner on stdout when a process makes its first solver, whatever
    output_flag says; swallow it once, so a CLI's stdout stays the CLI's."""
    if _BANNER["quiet"]:
        return
    _BANNER["quiet"] = True
    import highspy

    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError):  # no usable stdout: nothing to keep clean
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def solve_highs(prob: pulp.LpProblem, *, time_limit: float, mip_gap: float = 1e-4,
                start: dict[str, float] | None = None, target: float | None = None,
                mip: bool = True) -> Solve:
    solver = _HiGHS(start=start, target=target, mip=mip, msg=False,
                    timeLimit=max(time_limit, 0.0), gapRel=mip_gap)
    began = time.perf_counter()
    try:
        prob.solve(solver)
    except Exception as err:  # a solver failure must never crash a plan
        return Solve(f"error: {err}", False, None, None, time.perf_counter() - began)
    assert solver.result is not None
    return solver.result


_CBC_BOUND = re.compile(r"best possible (-?[\d.e+]+)")


def solve_cbc(prob: pulp.LpProblem, *, time_limit: float, mip_gap: float = 1e-4,
              start: dict[str, float] | None = None) -> Solve:
    """PuLP's bundled CBC; its bound is read from the log (PuLP does not expose it)."""
    if start is not None:
        for v in prob.variables():
            v.setInitialValue(start.get(v.name, 0.0))
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "cbc.log"
        solver = _cbc(msg=False, timeLimit=max(math.ceil(time_limit), 1),
                      gapRel=mip_gap, warmStart=start is not None,
                      logPath=str(log))
        try:
            prob.solve(solver)
        except Exception as err:  # a solver failure must never crash a plan
            return Solve(f"error: {err}", False, None, None, time.perf_counter() - began)
        text = log.read_text(errors="replace") if log.exists() else ""
    seconds = time.perf_counter() - began
    has_solution = prob.sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible)
    objective = pulp.value(prob.objective) if has_solution else None
    objective = float(objective) if objective is not None else 0.0 if has_solution else None
    if prob.status == pulp.LpStatusOptimal and prob.sol_status == pulp.LpSolutionOptimal:
        return Solve("optimal", True, objective, objective, seconds)
    if prob.status == pulp.LpStatusInfeasible:
        return Solve("infeasible", False, None, None, seconds)
    found = _CBC_BOUND.findall(text)
    # CBC minimises -objective for a maximisation, so its "best possible" is negated.
    bound = -float(found[-1]) if found else None
    return Solve("time_limit", has_solution, objective, bound, seconds)


def run_solver(name: str, prob: pulp.LpProblem, *, time_limit: float, mip_gap: float,
               start: dict[str, float] | None, target: float | None) -> Solve:
    if name == "highs":
        return solve_highs(prob, time_limit=time_limit, mip_gap=mip_gap, start=start,
                           target=target)
    return solve_cbc(prob, time_limit=time_limit, mip_gap=mip_gap, start=start)


def relative_gap(objective: float, bound: float | None) -> float | None:
    """(bound - objective) / max(|bound|, |objective|), 0 when they agree to 1e-6."""
    if bound is None:
        return None
    scale = max(abs(bound), abs(objective), 1.0)
    diff = bound - objective
    return 0.0 if diff <= REL_TOL * scale else diff / scale


# -- the policy -------------------------------------------------------------------------

@dataclass
class _Search:
    """The best legal grid so far and what the solver calls taught us."""

    scenario: Scenario
    model: Model
    solver: str
    mip_gap: float
    deadline: float
    grid: np.ndarray
    objective: float
    warnings: list[str]
    statuses: list[str] = field(default_factory=list)
    bounds: list[float] = field(default_factory=list)  # proven, from unrestricted solves

    def offer(self, grid: np.ndarray | None, objective: float) -> None:
        if grid is not None and objective > self.objective:
            self.grid, self.objective = grid, objective

    def attempt(self, seconds: float, start: np.ndarray | None, target: float | None,
                restricted: bool = False) -> Solve:
        """One solver call: recompute what it returns, keep it if legal and better."""
        fixed = self.model.fixed_value
        values = self.model.start_values(self.scenario, start) if start is not None else None
        milp_target = None if target is None else target - fixed
        seconds = min(seconds, self.deadline - time.perf_counter())
        result = run_solver(self.solver, self.model.prob, time_limit=seconds,
                            mip_gap=self.mip_gap, start=values, target=milp_target)
        self.statuses.append(result.status)
        if result.bound is not None and not restricted:
            self.bounds.append(result.bound + fixed)
        if not result.has_solution:
            return result
        grid, obj = _checked(self.scenario, self.model, self.warnings)
        self.offer(grid, obj)
        claimed = (result.objective or 0.0) + fixed
        if values is not None and claimed - obj > REL_TOL * max(1.0, abs(obj)):
            # HiGHS after a warm start may claim a better objective than the solution it
            # hands back (docs/sources.md): re-solve without the start and keep the better.
            self.warnings.append(f"solver claimed {claimed:.6g} but returned a solution worth "
                                 f"{obj:.6g}; re-solved without the warm start")
            return self.attempt(self.deadline - time.perf_counter(), None, target, restricted)
        return result


MAX_MILP_VARIABLES = 2_000_000


def model_size(scenario: Scenario) -> int:
    """An estimate of the MILP's variables: a start per (batch job, step, aligned block),
    and a hold and a change per (realtime job, GPU, step)."""
    G, T = scenario.G, scenario.T
    batch = sum(T * (G // job.gpus) for job in scenario.batch_jobs)
    return batch + 2 * G * T * len(scenario.realtime_jobs)


def full(scenario: Scenario, *, solver: str = "highs", time_limit: float = 30.0,
         lp_bound: bool = False, mip_gap: float = 1e-4, warm_start: bool = True,
         block_bound: bool = True) -> tuple[np.ndarray, dict[str, Any]]:
    """The better of the MILP's incumbent and fast's grid, with the solve's report.

    `time_limit` bounds the whole solve, bounds included. With `block_bound`, the
    block-capacity relaxation (allocator.bounds) runs first: its bound often proves fast
    optimal at once, its starts, placed by a restricted MILP, often reach it, and the full
    MILP stops as soon as an incumbent meets it.
    """
    from allocator import bounds  # bounds builds on this module's model

    began = time.perf_counter()
    deadline = began + time_limit
    warnings: list[str] = []
    fast_grid = fast(scenario)
    fast_obj = gridlib.objective(scenario, fast_grid)
    report: dict[str, Any] = {
        "solver": solver, "status": "not_run", "objective": fast_obj, "fast_objective": fast_obj,
        "best_bound": None, "gap": None, "solve_seconds": 0.0, "improved_fast": False,
        "milp_bound": None, "block_bound": None, "lp_bound": None, "time_limit": time_limit,
        "proof": None, "warnings": warnings, "phases": {},
    }
    mark = [time.perf_counter()]

    def phase(name: str) -> None:
        """Seconds spent since the last phase ended, so a slow solve shows where it went."""
        now = time.perf_counter()
        report["phases"][name] = round(now - mark[0], 3)
        mark[0] = now

    def left() -> float:
        return max(deadline - time.perf_counter(), 0.0)

    def done(grid: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        report["solve_seconds"] = round(time.perf_counter() - began, 3)
        return grid, {"solve": report}

    if solver not in SOLVERS:
        warnings.append(f"unknown solver {solver!r} (choose from {', '.join(SOLVERS)}); "
                        "returning the fast plan")
        report["status"] = "no_solver"
        return done(fast_grid)
    if not solver_available(solver):
        warnings.append(f"solver {solver!r} is not available here; returning the fast plan")
        report["status"] = "no_solver"
        return done(fast_grid)

    size = model_size(scenario)
    if size > MAX_MILP_VARIABLES:  # building it alone would take the machine's memory
        warnings.append(f"about {size:,} MILP variables, beyond the {MAX_MILP_VARIABLES:,} "
                        "this machine builds; returning the fast plan")
        report["status"] = "too_large"
        return done(fast_grid)

    proven: list[float] = []  # upper bounds on the whole objective
    if lp_bound:
        lp = bounds.lp_relaxation(scenario, time_limit=left())
        report["lp_bound"] = lp.value
        if lp.value is not None:
            proven.append(lp.value)
    target = None
    relaxed_starts = None
    blk_model = None

    def tighten(bound: float) -> float | None:
        """Record a proven bound; the MILP stops once an incumbent is within the gap of it."""
        proven.append(bound)
        best = min(proven)
        report["block_bound"] = best
        return best - mip_gap * max(abs(best), 1.0)

    if block_bound and solver_available("highs"):  # the relaxation is solved by HiGHS
        blk_model = bounds.build_block_model(scenario)
        blk = bounds.solve_block(blk_model, time_limit=max(min(left() / 2, 10.0), 0.1))
        if blk.value is not None:
            target = tighten(blk.value)
            relaxed_starts = blk.starts
    phase("bounds")
    if proven and relative_gap(fast_obj, min(proven)) == 0.0:
        report.update(status="optimal", best_bound=min(proven), gap=0.0,
                      proof="fast meets the relaxation bound")
        return done(fast_grid)

    model = build_model(scenario)
    phase("build")
    search = _Search(scenario, model, solver, mip_gap, deadline, fast_grid, fast_obj, warnings)
    # Cuts need exact restricted optima, from HiGHS; at 32+ GPUs one placement is all we get.
    cutting = solver == "highs" and scenario.G < LNS_MIN_GPUS and blk_model is not None
    cut_until = began + CUT_SHARE * time_limit
    cuts = 0
    excluded = -math.inf  # the best objective of any plan whose start set was cut off
    if scenario.G >= LNS_MIN_GPUS:
        relaxed_starts = None  # placing them whole stalls at this size: windows instead
    while relaxed_starts is not None and model.start_counts:
        # Place the relaxation's starts (dropping any that do not fit): often at its bound.
        model.restrict_starts(relaxed_starts)
        allowed = _keep_starts(scenario, search.grid, relaxed_starts) if warm_start else None
        placed = search.attempt(min(left() / 2, 10.0), allowed, target, restricted=True)
        model.restrict_starts(None)
        if (target is not None and search.objective >= target) or not cutting \
                or placed.status != "optimal" or placed.bound is None \
                or time.perf_counter() > cut_until:
            break
        # No plan with exactly these starts beats `placed.bound`: cut the set off and
        # re-solve; max(that, the cut relaxation) is again a proven bound.
        excluded = max(excluded, placed.bound + model.fixed_value)
        assert blk_model is not None
        blk_model.exclude(relaxed_starts)
        cuts += 1
        nxt = bounds.solve_block(blk_model, time_limit=max(min(left() / 2, 10.0), 0.1))
        if nxt.value is None:
            break
        target = tighten(max(excluded, nxt.value))
        relaxed_starts = nxt.starts if nxt.value > excluded else None
    report["phases"]["cuts"] = cuts
    phase("place_relaxed_starts")
    reached = target is not None and search.objective >= target
    whole_milp = not reached
    if not reached and scenario.G >= LNS_MIN_GPUS and left() > 0:
        # Too big to solve whole in time: improve the incumbent one GPU window at a time.
        # The whole MILP's own bound is useless at this size (docs/sources.md): all time to windows.
        report["phases"]["windows_solved"] = _neighbourhoods(search, left(), target)
        reached = target is not None and search.objective >= target
        whole_milp = False
        phase("windows")
    if whole_milp and left() > 0:
        result = search.attempt(left(), search.grid if warm_start else None, target)
        if not result.has_solution and search.objective <= fast_obj:
            warnings.append(f"the solver stopped ({result.status}) with no solution; "
                            "returning the fast plan")
        if result.status == "infeasible":
            warnings.append("the solver called the model infeasible (a modelling bug)")
        phase("milp")

    if search.bounds:
        report["milp_bound"] = min(search.bounds)
        proven.append(min(search.bounds))
    best_bound = min(proven) if proven else None
    gap = relative_gap(search.objective, best_bound)
    if gap is not None and gap <= mip_gap:
        status = "optimal"
        report["proof"] = (f"the plan meets the block-capacity bound ({cuts} no-good cuts)"
                           if reached else "the MILP's own bound")
    else:
        status = "time_limit" if left() <= 0.5 else "feasible"
        shown = "unknown" if gap is None else f"{100 * gap:.2f}%"
        last = search.statuses[-1] if search.statuses else "not run"
        warnings.append(f"not proven optimal (solver: {last}): gap {shown} to the best bound")
    report.update(status=status, objective=search.objective, best_bound=best_bound, gap=gap,
                  improved_fast=search.objective > fast_obj + REL_TOL * max(1.0, abs(fast_obj)))
    return done(search.grid)


# From this many GPUs the whole MILP rarely closes in a minute (docs/sources.md), so most of the
# time goes to solving windows of the cluster with everything outside held fixed.
LNS_MIN_GPUS = 32
WINDOW_SECONDS = 8.0  # one window's cap: a stuck window must not eat the whole limit
STEP_WINDOW = 8  # time windows: every GPU, 8 steps, so realtime can be laid out anew
# The share of the time limit that relaxation, placement and no-good cuts may use before
# the whole MILP gets the rest.
CUT_SHARE = 0.6


def windows(G: int, size: int = 16) -> list[tuple[int, int]]:
    """GPU ranges to re-solve, `size` wide, overlapping by half, top (realtime side) first.

    Measured on `scale` (64 GPUs): a 16-wide window solves in about 1-8 s and rounds of
    them keep finding gains; 32-wide windows mostly hit their time cap unimproved.
    """
    if size >= G:
        return []
    return [(lo, lo + size) for lo in range(G - size, -1, -(size // 2))]


def _neighbourhoods(search: _Search, seconds: float, target: float | None) -> int:
    """Large neighbourhood search: free one GPU window, fix the rest to the incumbent.

    Each sub-MILP keeps every constraint, so its solutions are legal plans; the warm start
    (the incumbent) is feasible in it, so no window can make the plan worse.
    """
    model, scenario = search.model, search.scenario
    end = time.perf_counter() + seconds
    saved = {v.name: (v.lowBound, v.upBound) for v in model.prob.variables()}
    solved = 0
    size, cap = 16, WINDOW_SECONDS
    try:
        while time.perf_counter() < end - 0.5 and size < scenario.G:
            before = search.objective
            settled = True  # every window solved to optimality: a local optimum at this size
            spans = [("gpus", lo, hi) for lo, hi in windows(scenario.G, size)]
            spans += [("steps", lo, hi) for lo, hi in windows(scenario.T, STEP_WINDOW)]
            for axis, lo, hi in spans:
                left = end - time.perf_counter()
                if left <= 0.5 or (target is not None and search.objective >= target):
                    return solved
                _free_window(model, scenario, search.grid, lo, hi, axis)
                result = search.attempt(min(left, cap), search.grid, None, restricted=True)
                settled = settled and result.status == "optimal"
                solved += 1
            if search.objective > before:
                continue  # another round at this size
            if settled:
                size *= 2  # nothing left to find in windows this wide: widen them
            else:
                cap *= 2  # windows ran out of time: give them more
    finally:
        for v in model.prob.variables():
            v.lowBound, v.upBound = saved[v.name]
    return solved


def _free_window(model: Model, scenario: Scenario, grid: np.ndarray, lo: int, hi: int,
                 axis: str = "gpus") -> None:
    """Bounds for one neighbourhood: GPUs (or steps) [lo, hi) free, the rest as in `grid`."""
    by_steps = axis == "steps"
    for var, st in model.starts:
        k = scenario.jobs[st.job].gpus
        inside = (lo <= st.start and st.end <= hi) if by_steps else \
            (lo <= st.first and st.first + k <= hi)
        if inside:
            var.lowBound, var.upBound = 0, 1
        else:
            on = bool(grid[st.start, st.first] == st.job and
                      (st.start == 0 or grid[st.start - 1, st.first] != st.job))
            var.lowBound = var.upBound = int(on)
    for (i, g, t), x in model.realtime.items():
        if lo <= (t if by_steps else g) < hi:
            x.lowBound, x.upBound = 0, 1
        else:
            x.lowBound = x.upBound = int(grid[t, g] == i)
    reservations.constrain_milp(model, scenario)


def _keep_starts(scenario: Scenario, grid: np.ndarray, starts: dict[int, int]) -> np.ndarray:
    """`grid` without the batch jobs whose start is not the allowed one (still legal)."""
    out = grid.copy()
    for i, job in enumerate(scenario.jobs):
        if isinstance(job, BatchJob) and not job.running:
            rows = np.flatnonzero((grid == i).any(axis=1))
            if len(rows) and starts.get(i) != int(rows[0]):
                out[out == i] = gridlib.FREE
    return out


def _checked(scenario: Scenario, model: Model,
             warnings: list[str]) -> tuple[np.ndarray | None, float]:
    """The solver's grid and its recomputed objective, or None if the validator refuses it."""
    grid = model.grid(scenario)
    problems = violations(scenario, gridlib.to_ids(scenario, grid))
    if problems:
        warnings.append(f"the solver's grid is illegal ({problems[0]}); discarded")
        return None, -math.inf
    return grid, gridlib.objective(scenario, grid)
