"""Upper bounds on MODEL.md's objective: how far any plan is from the ceiling.

Three relaxations, all solved with HiGHS:
- `lp_relaxation`: the full MILP with integrality dropped. Cheap to explain, but weak: it
  ignores where jobs sit and behaves like a capacity-only bound.
- `block_capacity`: integer starts kept, placement dropped; per step it only checks that
  the jobs fit the free aligned blocks of each power-of-two size (buddy capacity), and a
  realtime job's held count moves by at most its swap limit. Far tighter, and small
  enough to bound 256-GPU scenarios in seconds (docs/sources.md, "Solving the exact model").
- `build_zone_model`: the block relaxation with each small job kept in one aligned zone
  for its whole run (realtime counted per zone): tighter, slower; `full` uses it below
  32 GPUs when the block relaxation's starts cannot be placed.
Every feasible plan is feasible in each, so each value is a proven ceiling.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pulp

from allocator.grid import placements
from allocator.milp.model import (
    Touched,
    block_rows,
    build_model,
    canonical,
    order_twins,
    pinned_cells,
    running_value,
    touched_values,
)
from allocator.milp.solvers import Interrupt, solve_highs
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
    touched: list[Touched] = field(default_factory=list)
    cuts: int = 0
    twins: bool = False  # order_twins rows: a warm start must be `canonical`
    # The zone relaxation only (build_zone_model): a start's zone or whole block, as
    # (variable, job, start, first GPU, end GPU); realtime counts and their changes per zone.
    places: list[tuple[pulp.LpVariable, int, int, int, int]] = field(default_factory=list)
    zone_held: dict[tuple[int, int, int, int], pulp.LpVariable] = field(default_factory=dict)
    zone_swaps: dict[tuple[int, int, int, int], pulp.LpVariable] = field(default_factory=dict)
    # `freed_rows`: (realtime job, t) -> the GPUs it holds at both t - 1 and t, at least.
    kept: dict[tuple[int, int], pulp.LpVariable] = field(default_factory=dict)

    def start_values(self, scenario: Scenario, grid: np.ndarray) -> dict[str, float] | None:
        """Every variable's value for a legal grid (a warm start), or None if the grid has a
        start the relaxation has no variable for (it cannot: every legal start has one)."""
        if self.twins:
            grid = canonical(scenario, grid)
        chosen = {(i, p.start) for i, p in placements(scenario, grid, queued_only=True).items()}
        values = {z.name: float((i, s) in chosen) for z, i, s in self.chosen}
        if sum(values.values()) != len(chosen):
            return None
        for (i, t), h in self.held.items():
            held = int((grid[t] == i).sum())
            values[h.name] = float(held)
            values[self.short[i, t].name] = float(
                max(0, scenario.realtime_job_at(i).demand[t] - held))
        placed = placements(scenario, grid, queued_only=True)
        for var, i, s, lo, hi in self.places:
            p = placed.get(i)
            values[var.name] = float(p is not None and p.start == s and lo <= p.first_gpu < hi)
        for (i, lo, hi, t), h in self.zone_held.items():
            values[h.name] = float((grid[t, lo:hi] == i).sum())
        for (i, lo, hi, t), d in self.zone_swaps.items():
            now = int((grid[t, lo:hi] == i).sum())
            if t > 0:
                before = int((grid[t - 1, lo:hi] == i).sum())
            else:
                before = sum(lo <= g < hi for g in scenario.realtime_job_at(i).current_gpus or ())
            values[d.name] = float(abs(now - before))
        for (i, t), kept in self.kept.items():
            job = scenario.realtime_job_at(i)
            limit = job.swap_limit
            held_before = values[self.held[i, t - 1].name] if t > 0 \
                else float(len(job.current_gpus or ()))
            both = values[self.held[i, t].name] + held_before
            values[kept.name] = max(0.0, (both - limit) / 2)
        values.update(touched_values(scenario, grid, self.touched))
        return values

    def restrict(self, starts: dict[int, int] | None) -> None:
        """Allow each job only the given start (or none); None lifts the restriction."""
        for z, i, s in self.chosen:
            z.upBound = 1 if starts is None or starts.get(i) == s else 0

    def exclude(self, starts: dict[int, int] | set[tuple[int, int]]) -> None:
        """A no-good cut: the relaxation may no longer pick this set of starts or any subset
        of it (at least one start outside it). Valid where every plan whose starts are a
        subset is accounted for: placing a start set may drop any of its jobs. `starts` is
        job -> start, or a set of (job, start) pairs where a job may have several."""
        wanted = set(starts.items()) if isinstance(starts, dict) else set(starts)
        terms = [(z, 1) for z, i, s in self.chosen if (i, s) not in wanted]
        self.cuts += 1
        self.prob += (pulp.LpAffineExpression(terms) >= 1,
                      f"no_good_{self.cuts}")


def swap_closure(scenario: Scenario, starts: dict[int, int]) -> set[tuple[int, int]]:
    """`starts` as (job, start) pairs, plus, for each queued batch job, the starts in
    `starts` of the other jobs alike in priority, size and duration, no earlier than its
    own arrival (not for running or reserved jobs).

    Such jobs earn the same from the same start, so the relaxation, whose solutions are
    full of ties, proposes one start set after another that only trades their starts
    (tuning seed 1001: two 1-GPU jobs at steps 13 and 21, then at 21 and 13; 1052: two
    2-GPU jobs alike but for arrival, at 7 and 20, then at 20 and 7). Placing the closure
    (each job at one of its pairs, or absent) weighs all those trades at once, and the cut
    that follows removes them all. Any superset of `starts` keeps the cut valid: every
    plan whose starts lie in it was weighed by the placement.
    """
    reserved = {r.id for r in scenario.reservations}
    kinds: dict[tuple[float, int, int], list[int]] = {}
    for i, job in enumerate(scenario.jobs):
        if isinstance(job, BatchJob) and not job.running and job.id not in reserved:
            kinds.setdefault((job.priority, job.gpus, job.duration_steps), []).append(i)
    out = set(starts.items())
    for group in kinds.values():
        taken = {starts[i] for i in group if i in starts}
        for i in group:
            arrival = scenario.batch_job_at(i).arrival_step
            out.update((i, s) for s in taken if s >= arrival)
    return out


def block_capacity(scenario: Scenario, time_limit: float = 10.0, mip_gap: float = 1e-6) -> Bound:
    """Integer starts, capacity checked per aligned block size and step, swap on counts."""
    return solve_block(build_block_model(scenario), time_limit, mip_gap)


# HiGHS restarts its search whenever root fixings leave part of the model inactive; on this
# small model a restart throws away the root's cuts and re-deriving them costs more time.
BLOCK_OPTIONS = {"mip_allow_restart": False}


def solve_block(model: BlockModel, time_limit: float = 10.0, mip_gap: float = 1e-6,
                start: dict[str, float] | None = None, cutoff: float | None = None,
                interrupt: Interrupt | None = None) -> Bound:
    """The relaxation's proven bound (its dual bound) and the starts of its best solution.

    `start` (BlockModel.start_values of a legal grid) gives HiGHS an incumbent to prune by;
    `cutoff` (a plan's objective, when the model has cuts that start no longer fits) prunes
    the same way: the bound is then at least the cutoff ("infeasible": nothing above it).
    `interrupt` (seconds, the dual bound with `model.fixed` included) may stop it early.
    """
    began = time.perf_counter()
    if model.empty:
        return Bound(model.fixed, "optimal", 0.0)
    result = solve_highs(model.prob, time_limit=max(time_limit, 0.1), mip_gap=mip_gap,
                         start=start, options=BLOCK_OPTIONS,
                         cutoff=None if cutoff is None else cutoff - model.fixed,
                         interrupt=None if interrupt is None else
                         lambda seconds, bound: interrupt(seconds, bound + model.fixed))
    # The dual bound, not the incumbent: the relaxation's optimum may sit up to a gap above.
    value = None if result.bound is None else result.bound + model.fixed
    if cutoff is not None and (result.status == "infeasible" or value is not None):
        value = cutoff if value is None else max(value, cutoff)
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
    fixed = running_value(scenario, decay)
    # cells[t] = [(gpus, var)]: batch cells a start would fill at step t
    cells: list[list[tuple[int, pulp.LpVariable]]] = [[] for _ in range(T)]
    chosen: list[tuple[pulp.LpVariable, int, int]] = []
    for i, job in enumerate(scenario.jobs):
        if not isinstance(job, BatchJob):
            continue
        if job.running:
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
    touched = block_rows(prob, pinned, cells, held)
    kept = freed_rows(prob, scenario, pinned, chosen, held_by) if FREED_ROWS else {}
    if BLOCK_TWINS:
        order_twins(prob, scenario, _by_start(chosen))
    return BlockModel(prob, chosen, fixed, empty=not objective, held=held_by, short=short_by,
                      touched=touched, twins=BLOCK_TWINS, kept=kept)


# The rows of `freed_rows` in the block relaxation. Tuning seed 1084 (10 GPUs): without
# them the first start set needs three services to move in one step, which their swap
# limit of 1 forbids; with them its bound falls 641.02 -> 617.80 and full proves a plan of
# 617.80 in 5 s (open at 4.7% above 605.74 before). Not in the zone relaxation: there they
# slowed the zone solve on seed 1122 (9 s -> 26 s) and ended it on a wider gap.
FREED_ROWS = True
# The same rows at step 0, against the GPUs services hold now (`current_rows`).
CURRENT_ROWS = True


def freed_rows(prob: pulp.LpProblem, scenario: Scenario, pinned: np.ndarray,
               chosen: list[tuple[pulp.LpVariable, int, int]],
               held_by: dict[tuple[int, int], pulp.LpVariable]
               ) -> dict[tuple[int, int], pulp.LpVariable]:
    """Where running jobs end at step t, what must stay on the GPUs free at t - 1 too.

    A batch run covering t - 1 and t keeps its GPUs; a service keeps at least (its count at
    t - 1 + at t - its swap limit) / 2 of its GPUs (|A xor A'| = |A| + |A'| - 2|A & A'|);
    both sit on S, the GPUs unpinned at t - 1. A job of >= k GPUs starting at t fills whole
    aligned k-blocks free at t, and nothing that stays may sit on them: the n blocks such
    starts fill take at least f(n) GPUs of S away from what stays, f(n) the n cheapest
    blocks' GPUs in S (`block_costs`). So, per k: what stays + f(blocks started) <= |S|,
    which the block rows, seeing one step at a time, leave free (tuning seed 1084: three
    services with swap limit 1 around a 4-GPU start; 1075: a 4-GPU start on a block two
    of whose GPUs were busy the step before). Valid for every legal plan.
    Returns the kept-count variables (for a warm start's values)."""
    T, G = pinned.shape
    kept_by: dict[tuple[int, int], pulp.LpVariable] = {}
    realtime = sorted({i for i, _ in held_by})
    runs = [(z, s, scenario.batch_job_at(i).gpus, scenario.batch_job_at(i).duration_steps)
            for z, i, s in chosen]
    for t in range(1, T):
        freed = pinned[t - 1] & ~pinned[t]
        if not freed.any():
            continue
        stay: list[tuple[pulp.LpVariable, float]] = [(z, gpus) for z, s, gpus, length in runs
                                                     if s <= t - 1 and t < s + length]
        starts_here = [(z, gpus) for z, s, gpus, _ in runs if s == t]
        for i in realtime:
            limit = scenario.realtime_job_at(i).swap_limit
            if limit >= 2 * G:
                continue  # it may move every GPU it holds
            stay.append((_kept(prob, kept_by, i, t, held_by[i, t], held_by[i, t - 1], limit), 1))
        _charge_blocks(prob, stay, starts_here, pinned[t - 1], pinned[t], f"freed_t{t}")
    if CURRENT_ROWS:
        current_rows(prob, scenario, pinned, runs, held_by, kept_by)
    return kept_by


def current_rows(prob: pulp.LpProblem, scenario: Scenario, pinned: np.ndarray,
                 runs: list[tuple[pulp.LpVariable, int, int, int]],
                 held_by: dict[tuple[int, int], pulp.LpVariable],
                 kept_by: dict[tuple[int, int], pulp.LpVariable]) -> None:
    """The freed rows at step 0 for services that say where they run now (`current_gpus`):
    each keeps at least (its count now + at step 0 - its swap limit) / 2 of those GPUs, and
    a job of >= k GPUs starting at step 0 fills whole k-blocks none of them keeps. In a
    replan the services hold their GPUs from the hour before, as running jobs do."""
    G = pinned.shape[1]
    now = np.zeros(G, dtype=bool)
    stay: list[tuple[pulp.LpVariable, float]] = []
    for i in sorted({i for i, _ in held_by}):
        job = scenario.realtime_job_at(i)
        current = job.current_gpus
        if current is None or job.swap_limit >= len(current) + G:
            continue  # no GPUs to keep, or free to leave them all
        now[list(current)] = True
        stay.append((_kept(prob, kept_by, i, 0, held_by[i, 0], len(current), job.swap_limit), 1))
    now &= ~pinned[0]  # a service never holds a pinned GPU at step 0, so keeps none of these
    if stay:
        starts_here = [(z, gpus) for z, s, gpus, _ in runs if s == 0]
        _charge_blocks(prob, stay, starts_here, ~now, pinned[0], "current")


def _kept(prob: pulp.LpProblem, kept_by: dict[tuple[int, int], pulp.LpVariable], i: int,
          t: int, held: pulp.LpVariable, before: pulp.LpVariable | int, limit: int
          ) -> pulp.LpVariable:
    """At least (count before + count at t - swap limit) / 2 GPUs service i keeps at t."""
    kept = prob.add_variable(f"kept_j{i}_t{t}", lowBound=0)
    kept_by[i, t] = kept
    prob += (2 * kept >= held + before - limit, f"c4_kept_j{i}_t{t}")
    return kept


def _charge_blocks(prob: pulp.LpProblem, stay: list[tuple[pulp.LpVariable, float]],
                   starts_here: list[tuple[pulp.LpVariable, int]], before: np.ndarray,
                   after: np.ndarray, tag: str) -> None:
    """Per block size k: what stays + f(k-blocks the starts fill) <= the GPUs free in
    `before`, f the lines of `block_costs` (`before`, `after`: busy per GPU, free at t)."""
    G = before.size
    room = int((~before).sum())
    for k in (1 << p for p in range(1, G.bit_length())):
        starting = [(z, gpus // k) for z, gpus in starts_here if gpus >= k]
        if not starting:
            continue
        for j, (slope, offset) in enumerate(block_costs(before, after, k)):
            # stay + f(blocks started) <= room, f(n) >= slope * n + offset
            prob += (pulp.LpAffineExpression(stay + [(z, slope * b) for z, b in starting])
                     <= room - offset, f"c5_{tag}_k{k}_{j}")


def block_costs(before: np.ndarray, after: np.ndarray, k: int) -> list[tuple[int, int]]:
    """Lines (slope, offset) under f(n), the fewest GPUs unpinned at t - 1 that n aligned
    k-blocks pin-free at t hold (`before`, `after`: pinned per GPU at t - 1 and t).

    A job starting at t fills its blocks whole, so nothing that stays from t - 1 may sit on
    them: it costs the stayers those blocks' GPUs unpinned at t - 1. f is convex (the
    cheapest blocks first), so it is the maximum of these lines, one per distinct cost."""
    n = before.size // k
    free = ~after[: n * k].reshape(n, k).any(axis=1)
    costs = np.sort((~before[: n * k].reshape(n, k)).sum(axis=1)[free])
    lines, total = [], 0
    for j, cost in enumerate(costs.tolist()):
        if cost > 0 and (j == 0 or cost > costs[j - 1]):
            lines.append((cost, total - cost * j))
        total += cost
    return lines


def _by_start(chosen: list[tuple[pulp.LpVariable, int, int]]
              ) -> dict[tuple[int, int], list[pulp.LpVariable]]:
    return {(i, s): [z] for z, i, s in chosen}


# Not in the relaxations: there the order rows slowed HiGHS on degenerate optima (tuning
# seed 1062: the zone solve went past its 8 s cap; seed 1020: the block one 1.4 s -> 20 s).
BLOCK_TWINS = ZONE_TWINS = False


def zones(G: int, size: int) -> list[tuple[int, int]]:
    """[0, G) cut into aligned power-of-two blocks of at most `size` GPUs, lowest first."""
    out, first = [], 0
    while first < G:
        k = size
        while k > 1 and (first % k or first + k > G):
            k //= 2
        out.append((first, first + k))
        first += k
    return out


def build_zone_model(scenario: Scenario, size: int) -> BlockModel:
    """The block relaxation with each job kept in one zone for its whole run: tighter.

    The cluster is cut into aligned zones of `size` GPUs (`zones`). A job of fewer GPUs than
    its zone stays in that zone from its start to its end, and only inside the zone is
    capacity counted per step and block size (block_rows), so it cannot change zones
    between steps as it can in `build_block_model`; a job of a zone's size or more takes
    its exact aligned block. Realtime holds a count per zone, and the counts' changes,
    summed over zones, stay within the swap limit (|A xor A'| >= sum over zones of
    ||A & Z| - |A' & Z||). Every legal plan maps onto a solution with the same objective,
    so its dual bound is a proven ceiling.
    """
    T, G = scenario.T, scenario.G
    decay = scenario.weights.decay ** np.arange(T)
    penalty = scenario.weights.realtime_penalty
    pinned = pinned_cells(scenario)
    cum = np.zeros((T + 1, G), dtype=np.int32)
    np.cumsum(pinned, axis=0, out=cum[1:])
    parts = zones(G, size)
    zone_of = np.zeros(G, dtype=np.int64)
    for n, (lo, hi) in enumerate(parts):
        zone_of[lo:hi] = n

    prob = pulp.LpProblem("gpuplan_zone_capacity", pulp.LpMaximize)
    objective: list[tuple[pulp.LpVariable, float]] = []
    fixed = running_value(scenario, decay)
    # cells[n][t] = [(gpus inside zone n, var)]: what a placement fills of zone n at step t
    cells: list[list[list[tuple[int, pulp.LpVariable]]]] = [[[] for _ in range(T)]
                                                             for _ in parts]
    chosen: list[tuple[pulp.LpVariable, int, int]] = []
    places: list[tuple[pulp.LpVariable, int, int, int, int]] = []
    for i, job in enumerate(scenario.jobs):
        if not isinstance(job, BatchJob):
            continue
        if job.running:
            continue
        k = job.gpus
        starts = []
        for s in range(job.arrival_step, T):
            end = min(s + job.duration_steps, T)
            hits = cum[end] - cum[s]
            spans: dict[tuple[int, int], None] = {}  # zone (k < its size) or exact block
            for first in range(0, G - k + 1, k):
                if hits[first : first + k].any():
                    continue
                lo, hi = parts[zone_of[first]]
                spans[(lo, hi) if k < hi - lo else (first, first + k)] = None
            if not spans:
                continue
            z = prob.add_variable(f"start_j{i}_s{s}", cat=pulp.LpBinary)
            starts.append(z)
            chosen.append((z, i, s))
            objective.append((z, job.priority * k * float(decay[s:end].sum())))
            where = []
            for lo, hi in spans:
                v = z if len(spans) == 1 else \
                    prob.add_variable(f"place_j{i}_s{s}_g{lo}", cat=pulp.LpBinary)
                where.append(v)
                places.append((v, i, s, lo, hi))
                for n in range(zone_of[lo], zone_of[hi - 1] + 1):
                    width = min(k, parts[n][1] - parts[n][0])
                    for t in range(s, end):
                        cells[n][t].append((width, v))
            if len(where) > 1:
                prob += z == pulp.lpSum(where), f"c3_one_place_j{i}_s{s}"
        if len(starts) > 1:
            prob += pulp.lpSum(starts) <= 1, f"c2_at_most_once_j{i}"

    held: list[list[list[pulp.LpVariable]]] = [[[] for _ in range(T)] for _ in parts]
    held_by: dict[tuple[int, int], pulp.LpVariable] = {}
    short_by: dict[tuple[int, int], pulp.LpVariable] = {}
    zone_held: dict[tuple[int, int, int, int], pulp.LpVariable] = {}
    zone_swaps: dict[tuple[int, int, int, int], pulp.LpVariable] = {}
    for i, job in enumerate(scenario.jobs):
        if not isinstance(job, RealtimeJob):
            continue
        for t in range(T):
            per_zone = []
            for n, (lo, hi) in enumerate(parts):
                room = int((~pinned[t, lo:hi]).sum())
                h = prob.add_variable(f"held_j{i}_g{lo}_t{t}", 0, room, cat=pulp.LpInteger)
                zone_held[i, lo, hi, t] = h
                held[n][t].append(h)
                per_zone.append(h)
            total = prob.add_variable(f"held_j{i}_t{t}", 0, int((~pinned[t]).sum()),
                                      cat=pulp.LpInteger)
            prob += total == pulp.lpSum(per_zone), f"c2_held_count_j{i}_t{t}"
            short = prob.add_variable(f"short_j{i}_t{t}", lowBound=0)
            held_by[i, t], short_by[i, t] = total, short
            objective.append((short, -penalty * job.priority))
            prob += short + total >= job.demand[t], f"c2_shortfall_j{i}_t{t}"
        # 4. Swap limit, on zone counts: |A xor A'| >= sum over zones of ||A & Z| - |A' & Z||.
        if job.swap_limit >= G:
            continue
        current = job.current_gpus
        for t in range(T):
            if t == 0 and current is None:
                continue
            changes = []
            for lo, hi in parts:
                now = zone_held[i, lo, hi, t]
                before: pulp.LpVariable | int = zone_held[i, lo, hi, t - 1] if t > 0 else \
                    sum(lo <= g < hi for g in current or ())
                d = prob.add_variable(f"swap_j{i}_g{lo}_t{t}", 0, hi - lo)
                zone_swaps[i, lo, hi, t] = d
                prob += d >= now - before, f"c4_gain_j{i}_g{lo}_t{t}"
                prob += d >= before - now, f"c4_loss_j{i}_g{lo}_t{t}"
                changes.append(d)
            prob += pulp.lpSum(changes) <= job.swap_limit, f"c4_swap_limit_j{i}_t{t}"

    prob += pulp.LpAffineExpression(objective), "objective"
    touched = []
    for n, (lo, hi) in enumerate(parts):
        touched += block_rows(prob, pinned[:, lo:hi], cells[n], held[n], tag=f"_z{lo}",
                              offset=lo)
    if ZONE_TWINS:
        order_twins(prob, scenario, _by_start(chosen))
    return BlockModel(prob, chosen, fixed, empty=not objective, held=held_by, short=short_by,
                      touched=touched, places=places, zone_held=zone_held,
                      zone_swaps=zone_swaps, twins=ZONE_TWINS)
