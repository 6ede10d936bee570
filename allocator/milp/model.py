"""MODEL.md's exact model as a PuLP MILP: its variables, its five constraint families, and
the maps from a grid to the variables (a warm start) and back (the solver's plan).

One binary per (batch job, aligned block, start), per-GPU binaries for realtime, and the
constraint families under MODEL.md's numbers; `block_rows` adds the buddy-capacity rows
that the block-capacity relaxation (allocator.milp.bounds) shares.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pulp

from allocator import grid as gridlib
from allocator import reservations
from allocator.model import BatchJob, RealtimeJob, Scenario

# Symmetry breaking between identical queued jobs (order_twins) in the MILP, below this
# many GPUs; the relaxations have their own switches (bounds.BLOCK_TWINS, ZONE_TWINS),
# off. At 64 GPUs the rows cost a test scenario its proof (s2001: proven in 6 s without
# them, a 0.42% gap after 60 s with them; BENCHMARKS.md), and the cluster-scale path
# searches windows, where the symmetry matters less.
TWINS = True
TWINS_BELOW_GPUS = 32

# A `touched` count of block_rows: (variable, block size k, step, free cells outside
# pin-free k-blocks, first GPU, end GPU) of the GPU range the rows cover.
Touched = tuple[pulp.LpVariable, int, int, int, int, int]


@dataclass(frozen=True)
class Start:
    """One batch placement the MILP can choose: job `job` on [first, first+gpus) from `start`."""

    job: int
    start: int
    first: int
    end: int  # exclusive, clipped to the horizon


@dataclass
class MilpModel:
    """The PuLP problem and the maps from its variables back to grid cells."""

    prob: pulp.LpProblem
    starts: list[tuple[pulp.LpVariable, Start]] = field(default_factory=list)
    realtime: dict[tuple[int, int, int], pulp.LpVariable] = field(default_factory=dict)
    swaps: dict[tuple[int, int, int], pulp.LpVariable] = field(default_factory=dict)
    shortfall: dict[tuple[int, int], pulp.LpVariable] = field(default_factory=dict)
    fixed_value: float = 0.0  # running jobs' objective: pinned, so outside the MILP
    counts: dict[str, tuple[str, int, int]] = field(default_factory=dict)  # aggregate ints
    touched: list[Touched] = field(default_factory=list)
    start_counts: dict[tuple[int, int], pulp.LpVariable] = field(default_factory=dict)
    twins: bool = False  # order_twins rows: a warm start must be `canonical`

    def restrict_starts(self, starts: dict[int, int] | set[tuple[int, int]] | None) -> None:
        """Allow each batch job only the given start (or none); None lifts the restriction.
        `starts` is job -> start, or a set of (job, start) pairs (a job may have several).

        Used to place the block-capacity relaxation's starts: the solver then only picks
        blocks, realtime GPUs and which of those jobs to drop, a far smaller search.
        """
        wanted = set() if starts is None else \
            set(starts.items()) if isinstance(starts, dict) else set(starts)
        for key, z in self.start_counts.items():
            z.upBound = 1 if starts is None or key in wanted else 0

    def start_values(self, scenario: Scenario, grid: np.ndarray) -> dict[str, float] | None:
        """Every variable's value in `grid` (a legal grid), for the warm start.

        None if the grid uses a placement the model has no variable for (a bug upstream).
        """
        values: dict[str, float] = {}
        if self.twins:
            grid = canonical(scenario, grid)
        chosen = {(i, p.start, p.first_gpu)
                  for i, p in gridlib.placements(scenario, grid, queued_only=True).items()}
        found = set()
        for var, st in self.starts:
            hit = (st.job, st.start, st.first) in chosen
            values[var.name] = 1.0 if hit else 0.0
            if hit:
                found.add((st.job, st.start, st.first))
        if found != chosen:
            return None
        held: dict[tuple[int, int], int] = {}
        for (i, g, t), var in self.realtime.items():
            values[var.name] = float(grid[t, g] == i)
            held[i, t] = held.get((i, t), 0) + int(grid[t, g] == i)
        for (i, g, t), var in self.swaps.items():
            now = grid[t, g] == i
            if t > 0:
                before = grid[t - 1, g] == i
            else:
                before = g in (scenario.realtime_job_at(i).current_gpus or ())
            values[var.name] = float(now != before)
        for name, (what, i, u) in self.counts.items():
            if what == "start":
                values[name] = float(any(c[0] == i and c[1] == u for c in chosen))
            else:
                values[name] = float(held.get((i, u), 0))
        for (i, t), var in self.shortfall.items():
            values[var.name] = float(max(0, scenario.realtime_job_at(i).demand[t]
                                         - held.get((i, t), 0)))
        values.update(touched_values(scenario, grid, self.touched))
        return values

    def grid(self, scenario: Scenario) -> np.ndarray:
        """The grid the solver's values describe (binaries read as > 0.5)."""
        out = gridlib.empty(scenario)
        gridlib.pin_running(scenario, out)
        for var, st in self.starts:
            if (var.varValue or 0.0) > 0.5:
                out[st.start : st.end,
                    st.first : st.first + scenario.batch_job_at(st.job).gpus] = st.job
        for (i, g, t), var in self.realtime.items():
            if (var.varValue or 0.0) > 0.5:
                out[t, g] = i
        return out


def touched_values(scenario: Scenario, grid: np.ndarray,
                   touched: list[Touched]) -> dict[str, float]:
    """The `touched` counts of block_rows for a legal grid: k-blocks its small cells spoil."""
    # Batch jobs as their size, realtime as 0 (always small), pins and free cells as G+1.
    sizes = np.array([j.gpus if isinstance(j, BatchJob) else 0 for j in scenario.jobs]
                     + [scenario.G + 1])
    cell_size = sizes[np.where(grid >= 0, grid, len(scenario.jobs))]
    cell_size[pinned_cells(scenario)] = scenario.G + 1
    values = {}
    for var, k, t, outside, lo, hi in touched:
        small = int((cell_size[t, lo:hi] < k).sum())
        values[var.name] = float(max(0, -(-(small - outside) // k)))
    return values


def twins(scenario: Scenario) -> list[list[int]]:
    """Groups (two or more, indices ascending) of queued batch jobs alike in everything the
    objective and the constraints see: any plan stays legal and worth the same with their
    runs swapped, so only plans in `canonical` order need searching. Reserved jobs are left
    out (their run is fixed)."""
    reserved = {r.id for r in scenario.reservations}
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, job in enumerate(scenario.jobs):
        if isinstance(job, BatchJob) and not job.running and job.id not in reserved:
            key = (job.kind, job.priority, job.gpus, job.duration_steps, job.arrival_step)
            groups.setdefault(key, []).append(i)
    return [g for g in groups.values() if len(g) > 1]


def canonical(scenario: Scenario, grid: np.ndarray) -> np.ndarray:
    """`grid` with each group of `twins` relabelled so that the lower index starts no later
    (and runs if a higher one does): the same plan for the objective and the validator."""
    groups = twins(scenario)
    if not groups:
        return grid
    placed = gridlib.placements(scenario, grid, queued_only=True)
    out: np.ndarray = grid.copy()
    for group in groups:
        runs = sorted((placed[i].start, i) for i in group if i in placed)
        for new, (_, old) in zip(group, runs, strict=False):
            if new != old:
                out[grid == old] = new
    return out


def order_twins(prob: pulp.LpProblem, scenario: Scenario,
                starts: dict[tuple[int, int], list[Any]]) -> None:
    """Symmetry breaking for `twins`: by every step u, a job has started if the next of its
    group has (so it runs if that one runs), which every `canonical` plan keeps."""
    T = scenario.T
    for group in twins(scenario):
        for a, b in itertools.pairwise(group):
            for u in range(T):
                late = [v for s in range(u + 1) for v in starts.get((b, s), ())]
                if not late:
                    continue
                early = [v for s in range(u + 1) for v in starts.get((a, s), ())]
                prob += (pulp.lpSum(early) >= pulp.lpSum(late),
                         f"c2_twins_j{a}_j{b}_u{u}")


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


def running_value(scenario: Scenario, decay: np.ndarray) -> float:
    """The objective running jobs earn whatever is decided: their pinned cells, decayed."""
    T = scenario.T
    return sum(job.priority * job.gpus * float(decay[: min(job.running.remaining_steps, T)].sum())
               for job in scenario.batch_jobs if job.running)


def build_model(scenario: Scenario, strengthen: bool = True) -> MilpModel:
    """MODEL.md's objective and five constraint families, numbered as there."""
    T, G = scenario.T, scenario.G
    decay = scenario.weights.decay ** np.arange(T)
    penalty = scenario.weights.realtime_penalty
    prob = pulp.LpProblem("gpuplan_full", pulp.LpMaximize)
    model = MilpModel(prob)
    pinned = pinned_cells(scenario)
    job: BatchJob | RealtimeJob
    model.fixed_value += running_value(scenario, decay)

    objective: list[tuple[pulp.LpVariable, float]] = []
    cover: dict[tuple[int, int], list[pulp.LpVariable]] = {}
    per_job: dict[int, list[pulp.LpVariable]] = {}
    for st in batch_starts(scenario, pinned):
        job = scenario.batch_job_at(st.job)
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
        prob += (short + pulp.lpSum(held) >= scenario.realtime_job_at(i).demand[t],
                 f"c2_shortfall_j{i}_t{t}")

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
    hold_reservations(model, scenario)  # the reserved runs, as variable bounds
    return model


def _strengthen(model: MilpModel, scenario: Scenario, pinned: np.ndarray,
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
            cells[t].append((scenario.batch_job_at(i).gpus, z))
    if TWINS and scenario.G < TWINS_BELOW_GPUS:
        order_twins(prob, scenario, {key: [z] for key, z in model.start_counts.items()})
        model.twins = True
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
    model.touched = block_rows(prob, pinned, cells, held)


def _swap_rows(model: MilpModel, scenario: Scenario, i: int, job: RealtimeJob) -> None:
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
                before: pulp.LpVariable | float = 1.0 if g in (current or ()) else 0.0
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
    free: np.ndarray = (~pinned[:, : n * k].reshape(T, n, k).any(axis=2)).sum(axis=1)
    return free


def block_rows(prob: pulp.LpProblem, pinned: np.ndarray,
               cells: list[list[tuple[int, Any]]], held: list[list[Any]],
               tag: str = "", offset: int = 0) -> list[Touched]:
    """Constraints 1 and 3 counted per step and block size: buddy capacity.

    `cells[t]` lists (gpus, start count) for batch starts that run at step t, `held[t]` the
    realtime held counts. Jobs of >= k GPUs fill whole pin-free aligned k-blocks; smaller
    jobs and realtime GPUs spoil at least (their cells outside partly pinned k-blocks) / k
    of them, an integer (`touched`). Implied by any legal grid, so valid in the MILP too.
    `pinned` may be a slice of the cluster, GPUs `offset` onwards (an aligned block).
    """
    T, G = pinned.shape
    free = (~pinned).sum(axis=1)
    out = []  # so that a warm start can give each `touched` its value
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
            out.append((touched, k, t, outside, offset, offset + G))
    return out


def hold_reservations(model: MilpModel, scenario: Scenario) -> None:
    """allocator.reservations' rule as bounds on the variables: the reserved run fixed,
    nothing else on the block past the start, no realtime on the block. Called when the
    model is built and after every bound reset."""
    if not scenario.reservations:
        return
    by_id = {j.id: (i, j) for i, j in enumerate(scenario.jobs)}
    rules = []
    for r in scenario.reservations:
        i, _ = by_id[r.id]
        rules.append((i, r, range(r.first_gpu, r.first_gpu + r.gpus),
                      range(reservations.realtime_off_from(scenario, r),
                            reservations.realtime_off_until(scenario, r))))
    for var, st in model.starts:
        job = scenario.batch_job_at(st.job)
        for i, r, block, _ in rules:
            if st.job == i:
                on = st.start == r.start and st.first == r.first_gpu
                var.lowBound = var.upBound = int(on)
            elif st.first < block.stop and block.start < st.first + job.gpus and \
                    st.start < r.start < st.start + job.duration_steps:
                var.lowBound = var.upBound = 0
    for (_, g, t), x in model.realtime.items():
        if any(g in block and t in off for _, _, block, off in rules):
            x.lowBound = x.upBound = 0


# Beyond this many variables, building the model alone would take the machine's memory.
MAX_MILP_VARIABLES = 2_000_000


def model_size(scenario: Scenario) -> int:
    """An estimate of the MILP's variables: a start per (batch job, step, aligned block),
    and a hold and a change per (realtime job, GPU, step)."""
    G, T = scenario.G, scenario.T
    batch = sum(T * (G // job.gpus) for job in scenario.batch_jobs)
    return batch + 2 * G * T * len(scenario.realtime_jobs)
