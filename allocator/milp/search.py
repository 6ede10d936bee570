"""The search for a better plan than the warm start: the incumbent (`Search`), the block
relaxation's starts placed by a restricted MILP with no-good cuts, large neighbourhood
search over GPU and step windows, and the whole MILP; `FullSolve` runs them in turn under
one clock and writes the solve's report. `allocator.policies.full` lists the steps.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from allocator import grid as gridlib
from allocator.milp import bounds
from allocator.milp.model import (
    MAX_MILP_VARIABLES,
    MilpModel,
    build_model,
    canonical,
    hold_reservations,
    model_size,
)
from allocator.milp.solvers import (
    REL_TOL,
    SOLVERS,
    Interrupt,
    Solve,
    relative_gap,
    run_solver,
    solver_available,
)
from allocator.model import Scenario
from allocator.result import PolicyResult, SolveReport
from allocator.validator import violations

# From this many GPUs the whole MILP rarely closes in a minute (docs/sources.md), so after one
# placement of the relaxation's starts the time goes to windows of the cluster, the rest fixed.
LNS_MIN_GPUS = 32
WINDOW_SECONDS = 8.0  # one window's cap: a stuck window must not eat the whole limit
STEP_WINDOW = 8  # time windows: every GPU, 8 steps, so realtime can be laid out anew
# The share of the time limit that relaxation, placement and no-good cuts may use before
# the whole MILP gets the rest.
CUT_SHARE = 0.85
# At 32+ GPUs the relaxation's starts, placed whole, often meet its bound (a proof) well
# within a minute at 64 GPUs; this share of what is left is the cap, windows get the rest.
LARGE_PLACE_SHARE = 0.5
# Below LNS_MIN_GPUS, when the block relaxation's first starts fall short, a tighter
# relaxation keeps each job smaller than a zone of this many GPUs in one zone for its whole
# run (bounds.build_zone_model); on a cluster of at most this many GPUs (where one zone
# would be the block relaxation itself), zones of half as many (`zone_gpus`).
ZONE_GPUS = 8
ZONE_CHECK_SECONDS = 3.0  # the quick check that the zones cannot lower the bound
ZONE_SECONDS = 8.0  # the zone relaxation's cap (at 16 GPUs it can take far longer)
# ... unless by then its bound is still no lower than the block relaxation's: it then runs
# on, up to this share of the time left and this many seconds, since a zone solve cut off
# before it is below the block bound is worth nothing (tuning seeds 1061, 1079, 1107,
# 1162: their zone solves take 10-14 s and each proves the plan optimal).
ZONE_SHARE, ZONE_LONG_SECONDS = 0.8, 20.0
# The first placement of the zone bound's starts may take this share of the time left (at
# most 10 s): after a long zone solve little is left, and the cuts that would follow seldom
# fit (tuning seed 1061 at a 25 s limit: its zone bound met, but not placed in half of it).
ZONE_PLACE_SHARE = 0.9
# The zone relaxation (its quick check, then its solve) starts on a second thread as soon as
# the block relaxation's bound is known, beside the first placement rather than after it:
# HiGHS's MIP search runs on one core and lets go of the GIL while it runs, and the
# machines this runs on have two. The placement, when it meets the bound, stops it.
# None: so only where the process may run on two cores or more (`usable_cores`). Pinned
# to one core, the zone thread takes half of the cuts' core: over the 14 tuning seeds
# where the zones run, 6 proven at 30 s with them beside, 7 in the old order (the zones
# after the first placement), which wins where the zone solve is long (1061, 1149, 1162)
# and loses where one cut was enough (1135, 1208; docs/full_mode.md).
PARALLEL_ZONES: bool | None = None
# Beside the cuts, the zone solve blocks nothing, so it may run on longer: up to this share
# of the time left and this many seconds (tuning seeds 1018, 1080 and 1149, open at 30 s
# with the caps above, are proven in 26-28 s; their zone solves take 23-25 s there).
BESIDE_ZONE_SHARE, BESIDE_ZONE_SECONDS = 0.9, 25.0
# Once the zone relaxation is done (or where it does not run), the second core sits idle
# through the cuts. Once they stall (MILP_BESIDE_CUTS cuts made), the whole MILP runs
# there, warm-started from the incumbent, until the deadline or a proof, and the cuts may
# then run to the deadline too: whichever proves first ends both, and the MILP's bound and
# plan join the cuts'. (Replan tuning seed 1275 at a 120 s limit: 123 cuts in 102 s do not
# close it, and the whole MILP after them proves the plan optimal at 108 s; beside them,
# at 8.3 s.) None: only where the process may run on two cores (`usable_cores`).
MILP_BESIDE: bool | None = None
# The two solves share the machine: begun at the first cut, the MILP beside slowed the
# proofs the cuts make alone by a median 13% over 22 tuning scenarios (up to 55%: tuning
# seed 1028, 12.7 -> 19.6 s). Of the 330 tuning scenarios' proofs by cuts, all but one took
# at most 9 cuts (one 16).
MILP_BESIDE_CUTS = 10
# HiGHS asks its interrupt callback only once its root node is done (8-9 s on a 14-GPU
# tuning seed), so when the cuts prove first the MILP beside may not stop for seconds.
# full waits this long for it, then leaves it to stop on its own at its first interrupt
# point (or its time limit, the deadline), its answer unread. (Waiting for it doubled the
# time of proofs by one cut: tuning seed 1094, 6.4 -> 12.2 s.)
MILP_BESIDE_WAIT_SECONDS = 0.2
SOLVE_CAP_SECONDS = 10.0  # a relaxation re-solve's cap: half the time left, at most this
CUTOFF = True  # placements after a no-good cut look only at plans above the incumbent
RELAX_CUTOFF = True  # and so do the relaxation's re-solves
# Placements and cuts take the start set's swap closure (bounds.swap_closure), when cutting.
SWAP_CLOSURE = True
# The floor (fast's best plan, `floor_plan`) counts as the incumbent mid-search: the search
# stops once it meets a target the cuts lowered, and placements and re-solves after a cut
# look only above it. The placements' warm starts stay the search's own plan.
FLOOR_INCUMBENT = True
# HiGHS options for the placements of a start set below LNS_MIN_GPUS. Most of a
# restricted model is fixed at the root, and HiGHS then restarts its search, throwing the
# root's work away, as on the block relaxation (bounds.BLOCK_OPTIONS). Without restarts,
# paired over the tuning sets at 30 s: tuning2 58 of 60 proven (57), tuning3 and tuning4
# 58 (58), the proven seeds' total time 221 / 160 / 169 s (223 / 180 / 189). Not tried on
# the one placement and the windows of 32+ GPUs, which keep HiGHS's defaults.
PLACE_OPTIONS: dict[str, Any] = {"mip_allow_restart": False}
# Below LNS_MIN_GPUS a placement may take this share of the time left, at most this long.
# A placement cut off proves nothing, and the whole MILP that then gets the time seldom
# closes a 16-GPU gap: tuning seed 1172's start set places at its bound in 12-20 s, so at
# the old cap (half, 10 s) it stayed open at 1.05%; with these it is proven in 18.4 s.
PLACE_SHARE, PLACE_SECONDS = 0.8, 20.0
# The first block-capacity solve's cap: a share of the limit, at most this many seconds.
BLOCK_SHARE, BLOCK_SECONDS = 0.7, 20.0


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def on_second_core(setting: bool | None) -> bool:
    """A solve beside on a second thread: as `setting` says, or (None) where the process
    may run on two cores or more."""
    return usable_cores() >= 2 if setting is None else setting


def zone_gpus(G: int) -> int:
    """The zone size for a cluster of G GPUs: ZONE_GPUS, or half of it up to ZONE_GPUS GPUs
    (tuning seed 1079, 8 GPUs: proven in 17 s with zones of 4, open at 30 s without)."""
    return ZONE_GPUS if G > ZONE_GPUS else max(1, ZONE_GPUS // 2)


@dataclass
class Search:
    """The best legal grid so far and what the solver calls taught us."""

    scenario: Scenario
    model: MilpModel
    solver: str
    mip_gap: float
    deadline: float
    grid: np.ndarray
    objective: float
    warnings: list[str]
    statuses: list[str] = field(default_factory=list)
    bounds: list[float] = field(default_factory=list)  # proven, from unrestricted solves
    effort: dict[str, int] = field(default_factory=lambda: {"nodes": 0, "iterations": 0})

    def offer(self, grid: np.ndarray | None, objective: float) -> None:
        if grid is not None and objective > self.objective:
            self.grid, self.objective = grid, objective

    def attempt(self, seconds: float, start: np.ndarray | None, target: float | None,
                restricted: bool = False, cutoff: float | None = None,
                options: dict[str, Any] | None = None,
                interrupt: Interrupt | None = None) -> Solve:
        """One solver call: recompute what it returns, keep it if legal and better.

        With `cutoff` (HiGHS), only plans worth at least it are sought: "infeasible" then
        means every plan of this (restricted) model is worth less. `options`: HiGHS's;
        `interrupt`: asked at HiGHS's interrupt points, stops the call when it says so.
        """
        fixed = self.model.fixed_value
        values = self.model.start_values(self.scenario, start) if start is not None else None
        milp_target = None if target is None else target - fixed
        milp_cutoff = None if cutoff is None else cutoff - fixed
        seconds = min(seconds, self.deadline - time.perf_counter())
        result = run_solver(self.solver, self.model.prob, time_limit=seconds,
                            mip_gap=self.mip_gap, start=values, target=milp_target,
                            cutoff=milp_cutoff, options=options, interrupt=interrupt)
        self.statuses.append(result.status)
        self.effort["nodes"] += result.nodes
        self.effort["iterations"] += result.iterations
        if result.bound is not None and not restricted:
            self.bounds.append(result.bound + fixed)
        if not result.has_solution:
            return result
        grid, obj = checked(self.scenario, self.model, self.warnings)
        self.offer(grid, obj)
        claimed = (result.objective or 0.0) + fixed
        if values is not None and claimed - obj > REL_TOL * max(1.0, abs(obj)):
            # HiGHS after a warm start may claim a better objective than the solution it
            # hands back (docs/sources.md): re-solve without the start and keep the better.
            self.warnings.append(f"solver claimed {claimed:.6g} but returned a solution worth "
                                 f"{obj:.6g}; re-solved without the warm start")
            return self.attempt(self.deadline - time.perf_counter(), None, target, restricted,
                                cutoff, options, interrupt)
        return result


def windows(G: int, size: int = 16) -> list[tuple[int, int]]:
    """GPU ranges to re-solve, `size` wide, overlapping by half, top (realtime side) first.

    Measured on `scale` (64 GPUs): a 16-wide window solves in about 1-8 s and rounds of
    them keep finding gains; 32-wide windows mostly hit their time cap unimproved.
    """
    if size >= G:
        return []
    return [(lo, lo + size) for lo in range(G - size, -1, -(size // 2))]


def neighbourhoods(search: Search, seconds: float, target: float | None) -> int:
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
                free_window(model, scenario, search.grid, lo, hi, axis)
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


def free_window(model: MilpModel, scenario: Scenario, grid: np.ndarray, lo: int, hi: int,
                 axis: str = "gpus") -> None:
    """Bounds for one neighbourhood: GPUs (or steps) [lo, hi) free, the rest as in `grid`."""
    by_steps = axis == "steps"
    for var, st in model.starts:
        k = scenario.batch_job_at(st.job).gpus
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
    hold_reservations(model, scenario)


def keep_starts(scenario: Scenario, grid: np.ndarray,
                starts: dict[int, int] | set[tuple[int, int]]) -> np.ndarray:
    """`grid` without the batch jobs whose start is not an allowed one (still legal)."""
    pairs = set(starts.items()) if isinstance(starts, dict) else starts
    out: np.ndarray = grid.copy()
    for i, p in gridlib.placements(scenario, grid, queued_only=True).items():
        if (i, p.start) not in pairs:
            out[out == i] = gridlib.FREE
    return out


def checked(scenario: Scenario, model: MilpModel,
             warnings: list[str]) -> tuple[np.ndarray | None, float]:
    """The solver's grid and its recomputed objective, or None if the validator refuses it."""
    grid = model.grid(scenario)
    problems = violations(scenario, gridlib.to_ids(scenario, grid))
    if problems:
        warnings.append(f"the solver's grid is illegal ({problems[0]}); discarded")
        return None, -math.inf
    return grid, gridlib.objective(scenario, grid)


class Beside:
    """One solve on a thread of its own (HiGHS lets go of the GIL while it runs); `stop`
    ends it at HiGHS's next interrupt point, and `answer` hands back what it returned or
    raises what it raised."""

    def __init__(self, solve: Callable[[threading.Event], Any], name: str) -> None:
        self.stop = threading.Event()
        self._out: list[Any] = []
        self._failed: list[BaseException] = []

        def run() -> None:
            try:
                self._out.append(solve(self.stop))
            except BaseException as err:  # handed to the caller of `answer`
                self._failed.append(err)

        self.thread = threading.Thread(target=run, name=name, daemon=True)
        self.thread.start()

    def running(self) -> bool:
        return self.thread.is_alive()

    def answer(self) -> Any:
        self.thread.join()
        if self._failed:
            raise self._failed[0]
        return self._out[0]

    def cancel(self, wait: float | None = None) -> bool:
        """Stop it and wait for it (at most `wait` seconds): True if it has ended."""
        self.stop.set()
        self.thread.join(wait)
        return not self.thread.is_alive()


class FullSolve:
    """One run of `full` under one clock: the warm start, the proven bounds, the incumbent
    and the report. Each method is one step of `allocator.policies.full.full`; a step that
    spends time records it under `report["phases"]`, so a slow solve shows where it went.
    """

    def __init__(self, scenario: Scenario, warm_start_plan: Callable[[Scenario], np.ndarray],
                 *, solver: str, time_limit: float, mip_gap: float, warm_start: bool,
                 floor_plan: Callable[[Scenario], np.ndarray] | None = None) -> None:
        self.scenario, self.solver, self.mip_gap = scenario, solver, mip_gap
        self.time_limit, self.warm_start = time_limit, warm_start
        self.began = time.perf_counter()
        self.deadline = self.began + time_limit
        self.warnings: list[str] = []
        self.fast_grid = warm_start_plan(scenario)
        self.fast_obj = gridlib.objective(scenario, self.fast_grid)
        # fast's best plan, which the result never falls below; not the search's warm start
        # (a different incumbent sends the placements and cuts down other paths)
        self.floor_grid, self.floor_obj = self.fast_grid, self.fast_obj
        if floor_plan is not None:
            grid = floor_plan(scenario)
            if (value := gridlib.objective(scenario, grid)) > self.fast_obj:
                self.floor_grid, self.floor_obj = grid, value
        self.report: dict[str, Any] = {
            "solver": solver, "status": "not_run", "objective": self.floor_obj,
            "fast_objective": self.floor_obj, "best_bound": None, "gap": None,
            "solve_seconds": 0.0, "improved_fast": False, "milp_bound": None,
            "block_bound": None, "lp_bound": None, "time_limit": time_limit, "proof": None,
            "warnings": self.warnings,
            "phases": {"warm_start": round(time.perf_counter() - self.began, 3)},
        }
        self.mark = time.perf_counter()
        self.proven: list[float] = []  # upper bounds on the whole objective
        self.target: float | None = None  # stop the MILP once an incumbent reaches it
        self.relaxed_starts: dict[int, int] | None = None
        self.block_model: bounds.BlockModel | None = None
        self.model: MilpModel | None = None
        self.search: Search | None = None
        self.canonical_fast = self.fast_grid
        self.cuts = 0
        self.zoned = False  # the zone relaxation has run (it runs at most once)
        self.zone_bound = False  # and lowered the bound: its model took the block one's place
        self.zone_placed = False  # its first starts have been placed
        self.zones_beside: Beside | None = None  # the zone relaxation on its own thread
        self.zone_taken = False  # and `_bound_by_zones` has taken its answer
        self.excluded = -math.inf  # the best objective of any plan whose start set was cut off
        self.cut_sets: list[set[tuple[int, int]]] = []  # the start sets cut off so far
        self.met_relaxation = False  # the incumbent reached the relaxation's bound
        self.milp_beside: Beside | None = None  # the whole MILP on its own thread
        self.milp_done = threading.Event()  # which has proven its plan optimal
        self.milp_taken = False  # and `_take_milp_beside` has taken its answer
        self.milp_target: float | None = None  # its bound, less the gap
        self.block_effort = {"nodes": 0, "iterations": 0}  # the relaxation's solves

    def left(self) -> float:
        return max(self.deadline - time.perf_counter(), 0.0)

    def phase(self, name: str) -> None:
        """Seconds spent since the last phase ended."""
        now = time.perf_counter()
        self.report["phases"][name] = round(now - self.mark, 3)
        self.mark = now

    def _count(self, blk: bounds.Bound) -> bounds.Bound:
        self.block_effort["nodes"] += blk.nodes
        self.block_effort["iterations"] += blk.iterations
        return blk

    def result(self, grid: np.ndarray) -> PolicyResult:
        self._stop_zones()
        if self.milp_beside is not None:
            self.milp_beside.cancel(MILP_BESIDE_WAIT_SECONDS)
        self.report["solve_seconds"] = round(time.perf_counter() - self.began, 3)
        # Solver effort, beside the seconds: nodes and iterations do not grow with load.
        milp = self.search.effort if self.search is not None else {"nodes": 0, "iterations": 0}
        for key in ("nodes", "iterations"):
            self.report["phases"][key] = self.block_effort[key] + milp[key]
        report = {**self.report, "warnings": tuple(self.warnings),
                  "phases": dict(self.report["phases"])}
        return PolicyResult(grid, SolveReport(**report))

    def cannot_solve(self) -> bool:
        """No such solver, none installed, or a model too large to build: keep fast's plan."""
        if self.solver not in SOLVERS:
            self.warnings.append(f"unknown solver {self.solver!r} (choose from "
                                 f"{', '.join(SOLVERS)}); returning the fast plan")
            self.report["status"] = "no_solver"
            return True
        if not solver_available(self.solver):
            self.warnings.append(f"solver {self.solver!r} is not available here; "
                                 "returning the fast plan")
            self.report["status"] = "no_solver"
            return True
        size = model_size(self.scenario)
        if size > MAX_MILP_VARIABLES:  # building it alone would take the machine's memory
            self.warnings.append(f"about {size:,} MILP variables, beyond the "
                                 f"{MAX_MILP_VARIABLES:,} this machine builds; "
                                 "returning the fast plan")
            self.report["status"] = "too_large"
            return True
        return False

    def _tighten(self, bound: float) -> float | None:
        """Record a proven bound; the MILP stops once an incumbent is within the gap of it."""
        self.proven.append(bound)
        best = min(self.proven)
        self.report["block_bound"] = best
        return best - self.mip_gap * max(abs(best), 1.0)

    def bound_by_lp(self) -> None:
        """The LP relaxation's bound (weak; on request only)."""
        lp = bounds.lp_relaxation(self.scenario, time_limit=self.left())
        self.report["lp_bound"] = lp.value
        if lp.value is not None:
            self.proven.append(lp.value)

    def bound_by_blocks(self) -> None:
        """The block-capacity relaxation: a bound, a target, and starts worth placing."""
        if not solver_available("highs"):  # the relaxation is solved by HiGHS
            return
        self.block_model = bounds.build_block_model(self.scenario)
        start = self.block_model.start_values(self.scenario, self.fast_grid) \
            if self.warm_start else None
        blk = self._count(bounds.solve_block(self.block_model, start=start,
                                             time_limit=self._first_block_limit()))
        if blk.value is not None:
            self.target = self._tighten(blk.value)
            self.relaxed_starts = blk.starts

    def _first_block_limit(self) -> float:
        """The relaxation proves most optima (fast at its bound, or its starts placed at it),
        so its first solve may take up to BLOCK_SHARE of the limit."""
        return max(min(self.left() * BLOCK_SHARE, BLOCK_SECONDS), 0.1)

    def _zone_limit(self, beside: bool = False) -> float:
        share, most = (BESIDE_ZONE_SHARE, BESIDE_ZONE_SECONDS) if beside \
            else (ZONE_SHARE, ZONE_LONG_SECONDS)
        return max(min(self.left() * share, most), 0.1)

    def _half_left(self) -> float:
        return max(min(self.left() / 2, SOLVE_CAP_SECONDS), 0.1)

    def fast_meets_bound(self) -> bool:
        """fast's best plan is already at a proven bound: optimal without a MILP."""
        if self.proven and relative_gap(self.floor_obj, min(self.proven)) == 0.0:
            self.report.update(status="optimal", best_bound=min(self.proven), gap=0.0,
                               proof="fast meets the relaxation bound")
            return True
        return False

    def build(self) -> None:
        self.model = build_model(self.scenario)
        self.phase("build")
        # Where the MILP orders identical jobs' starts (model.order_twins), its incumbent
        # must be in that order too.
        self.canonical_fast = canonical(self.scenario, self.fast_grid) if self.model.twins \
            else self.fast_grid
        self.search = Search(self.scenario, self.model, self.solver, self.mip_gap, self.deadline,
                             self.canonical_fast, self.fast_obj, self.warnings)

    def place_relaxed_starts(self) -> None:
        """Place the relaxation's starts (dropping any that do not fit): often at its bound.

        While the placement is proven below the bound, cut that start set off the
        relaxation and place the next one (HiGHS only, below LNS_MIN_GPUS, within CUT_SHARE
        of the time limit); max(the cut sets' best, the cut relaxation) is again a bound.
        """
        model, search, scenario = self.model, self.search, self.scenario
        assert model is not None and search is not None
        # Cuts need exact restricted optima, from HiGHS; at 32+ GPUs one placement is all we get.
        cutting = self.solver == "highs" and scenario.G < LNS_MIN_GPUS \
            and self.block_model is not None
        cut_until = self.began + CUT_SHARE * self.time_limit
        # One placement only at 32+ GPUs: its LP alone takes seconds, and windows need the rest.
        large = scenario.G >= LNS_MIN_GPUS
        if large and LARGE_PLACE_SHARE <= 0:
            self.relaxed_starts = None
        while True:
            while self.relaxed_starts is not None and model.start_counts:
                starts = self.relaxed_starts
                # Placed and cut after the first cut: the start set with its trades between
                # alike jobs. Not the first placement: without a cutoff the freedom costs it
                # (tuning seed 1049: at its 10 s cap, where the exact starts prove in 4 s).
                pairs = bounds.swap_closure(scenario, starts) \
                    if cutting and SWAP_CLOSURE and self.cuts else set(starts.items())
                model.restrict_starts(pairs)
                allowed = keep_starts(scenario, search.grid, pairs) if self.warm_start else None
                cap = self.left() * LARGE_PLACE_SHARE if large \
                    else min(self.left() * PLACE_SHARE, PLACE_SECONDS)
                if self.zone_bound and not self.zone_placed:
                    cap = min(self.left() * ZONE_PLACE_SHARE, 10.0)
                    self.zone_placed = True
                # After a cut, only plans above the incumbent matter: prune the rest. (The first
                # placement keeps its warm start, which a cutoff above it would throw away.)
                cutoff = self._incumbent() if cutting and CUTOFF and self.cuts else None
                placed = search.attempt(cap, allowed, self.target, restricted=True, cutoff=cutoff,
                                        options=None if large else PLACE_OPTIONS,
                                        interrupt=self._milp_interrupt())
                model.restrict_starts(None)
                self._take_milp_beside(wait=False)
                if self._at_target():
                    break
                if self._bound_by_zones(wait=False):  # a tighter relaxation: its bound, its starts
                    if self._at_target():
                        break
                    continue
                if placed.status == "optimal" and placed.bound is not None:
                    best_here = placed.bound + model.fixed_value
                    if cutoff is not None:
                        # Plans below the cutoff were pruned, not weighed: HiGHS may then call
                        # it optimal at its warm start's value, below the cutoff, which
                        # is no bound on them. The cutoff (the incumbent) is.
                        best_here = max(best_here, cutoff)
                elif placed.status == "infeasible" and cutoff is not None:
                    best_here = cutoff  # nothing with these starts reaches the incumbent
                else:
                    break
                if not cutting or time.perf_counter() > \
                        (self.deadline if self.milp_beside is not None else cut_until):
                    break
                # No plan with exactly these starts beats `best_here`: cut the set off.
                self.excluded = max(self.excluded, best_here)
                assert self.block_model is not None
                self.block_model.exclude(pairs)
                self.cut_sets.append(pairs)
                self.cuts += 1
                self._start_milp_beside()
                # Only relaxation solutions above the incumbent matter: prune the rest.
                nxt = self._count(bounds.solve_block(
                    self.block_model, time_limit=self._half_left(),
                    cutoff=self._incumbent() if RELAX_CUTOFF else None,
                    interrupt=self._milp_interrupt()))
                self._take_milp_beside(wait=False)
                if self._at_target() or nxt.value is None:
                    break
                self.target = self._tighten(max(self.excluded, nxt.value))
                if self._at_target():
                    break
                self.relaxed_starts = nxt.starts if nxt.value > self.excluded else None
            # Out of starts to place or of time to cut, with the zone relaxation still
            # running beside: wait for it, and go on from its starts if it is lower.
            if self.zones_beside is None or self._at_target() \
                    or not self._bound_by_zones(wait=True) or self._at_target():
                break
        self.report["phases"]["cuts"] = self.cuts
        self.phase("place_relaxed_starts")
        self.met_relaxation = self._at_target()

    def _milp_interrupt(self) -> Interrupt | None:
        """While the whole MILP runs beside: a solve's interrupt, which stops it once that
        MILP has proven its plan optimal. (None otherwise: no callback into Python.)"""
        if self.milp_beside is None or self.milp_taken:
            return None
        done = self.milp_done
        return lambda _seconds, _bound: done.is_set()

    def _start_milp_beside(self) -> None:
        """With MILP_BESIDE, the whole MILP on a second thread, once the cuts stall and the
        zone relaxation has let go of the second core; below LNS_MIN_GPUS only, where its
        bound can close."""
        if not on_second_core(MILP_BESIDE) or self.cuts < MILP_BESIDE_CUTS \
                or self.milp_beside is not None or self.search is None \
                or self.solver != "highs" or self.scenario.G >= LNS_MIN_GPUS \
                or self.left() < 1.0 or (self.zones_beside is not None
                                         and self.zones_beside.running()):
            return
        scenario, solver, mip_gap, deadline = self.scenario, self.solver, self.mip_gap, \
            self.deadline
        grid, value, target = self.search.grid, self.search.objective, self.target
        start = grid if self.warm_start else None
        done = self.milp_done

        def solve(stop: threading.Event) -> tuple[Search, float]:
            began = time.perf_counter()
            # a model of its own: the placements restrict the search's model as they go
            own = Search(scenario, build_model(scenario), solver, mip_gap, deadline, grid,
                         value, [])
            result = own.attempt(deadline - time.perf_counter(), start, target,
                                 interrupt=lambda _seconds, _bound: stop.is_set())
            if result.status in ("optimal", "target"):
                done.set()
            return own, time.perf_counter() - began

        self.milp_beside = Beside(solve, "gpuplan-milp")
        # when it started, seconds into the solve ("milp_beside": how long it ran, if read)
        self.report["phases"]["milp_beside_from"] = round(time.perf_counter() - self.began, 3)

    def _take_milp_beside(self, wait: bool) -> None:
        """The whole MILP's answer, once (waiting for it with `wait`): its plan offered to
        the search, its bound among the proven ones."""
        beside, search = self.milp_beside, self.search
        if beside is None or search is None or self.milp_taken \
                or (not wait and beside.running() and not self.milp_done.is_set()):
            return
        self.milp_taken = True
        try:
            own, seconds = beside.answer()
        except Exception as err:  # like a solver failure: never the plan's end
            self.warnings.append(f"the whole MILP beside the cuts failed ({err}); "
                                 "its answer is dropped")
            return
        search.offer(own.grid, own.objective)
        search.bounds.extend(own.bounds)
        search.statuses.extend(own.statuses)
        for key in ("nodes", "iterations"):
            search.effort[key] += own.effort[key]
        self.warnings.extend(own.warnings)
        self.report["phases"]["milp_beside"] = round(seconds, 3)
        if own.bounds:
            best = min(own.bounds)
            self.milp_target = best - self.mip_gap * max(abs(best), 1.0)

    def _zones_apply(self) -> bool:
        """The zone relaxation runs once, between `zone_gpus(G)` and LNS_MIN_GPUS GPUs, after
        the block relaxation has given a bound."""
        return zone_gpus(self.scenario.G) < self.scenario.G < LNS_MIN_GPUS \
            and self.block_model is not None and bool(self.proven) \
            and solver_available("highs")

    def start_zones(self) -> None:
        """With PARALLEL_ZONES, the zone relaxation on a second thread from now on, beside
        the first placement and the cuts; `_bound_by_zones` takes its answer."""
        if not on_second_core(PARALLEL_ZONES) or self.zoned or not self._zones_apply():
            return
        self.zoned = True
        starts = dict(self.relaxed_starts) if self.relaxed_starts is not None else None

        def solve(stop: threading.Event) -> tuple[Any, list[bounds.Bound], float]:
            began = time.perf_counter()
            solved, solves = self._zone_relaxation(starts, self.fast_grid, stop, beside=True)
            return solved, solves, time.perf_counter() - began

        self.zones_beside = Beside(solve, "gpuplan-zones")

    def _stop_zones(self) -> None:
        if self.zones_beside is not None:
            self.zones_beside.cancel()

    def _zone_relaxation(self, starts: dict[int, int] | None, grid: np.ndarray,
                         stop: threading.Event, beside: bool = False
                         ) -> tuple[tuple[bounds.BlockModel, bounds.Bound] | None,
                                    list[bounds.Bound]]:
        """The zone relaxation's solve (model and bound), or None when the quick check shows
        it cannot lower the bound; with the solves made, for their effort. Touches nothing
        of `self` but what it reads, so that it may run on a thread of its own."""
        size = zone_gpus(self.scenario.G)
        best = min(self.proven)
        tied = best - REL_TOL * max(1.0, abs(best))
        zone = bounds.build_zone_model(self.scenario, size)
        solves: list[bounds.Bound] = []
        # The zone relaxation is a restriction of the block one: if the block solution's
        # starts earn the block bound in it too, its bound is the same. A quick check first.
        if starts is not None:
            zone.restrict(starts)
            same = bounds.solve_block(zone, time_limit=min(self._half_left(), ZONE_CHECK_SECONDS),
                                      interrupt=lambda _seconds, _bound: stop.is_set())
            solves.append(same)
            zone.restrict(None)
            if same.status == "optimal" and same.value is not None and same.value >= tied:
                return None, solves
        if stop.is_set():
            return None, solves
        start = zone.start_values(self.scenario, grid) if self.warm_start else None
        short = min(self._half_left(), ZONE_SECONDS)

        decided: list[bool] = []

        def useful(seconds: float, bound: float) -> bool:
            """At the usual cap, stop if the zone bound is already below the others (what
            the cap did); if not, run on to the end (no stop the moment it dips below:
            seed 1079's bound falls past the block bound to the optimum within a second)."""
            if stop.is_set():
                return True
            if not decided and seconds >= short:
                now = min(self.proven)  # the cuts beside may have lowered it since
                decided.append(bound < now - REL_TOL * max(1.0, abs(now)))
            return bool(decided) and decided[0]

        limit = max(self._zone_limit(beside), short)
        got = bounds.solve_block(zone, start=start, time_limit=limit,
                                 interrupt=useful)
        solves.append(got)
        return (zone, got), solves

    def _bound_by_zones(self, wait: bool = True) -> bool:
        """Once, when the block relaxation's first starts fall short: the zone relaxation
        (on its own thread since `start_zones`, else here, warm-started from the incumbent).
        True if its bound is below every bound so far; it then replaces the block relaxation
        for the starts to place and the cuts."""
        began = time.perf_counter()
        if self.zones_beside is not None:
            if self.zone_taken or (not wait and self.zones_beside.running()):
                return False
            self.zone_taken = True
            solved, solves, seconds = self.zones_beside.answer()
            self.report["phases"]["zone_wait"] = round(time.perf_counter() - began, 3)
        else:
            if self.zoned or not self._zones_apply():
                return False
            self.zoned = True
            assert self.search is not None
            solved, solves = self._zone_relaxation(self.relaxed_starts, self.search.grid,
                                                   threading.Event())
            seconds = time.perf_counter() - began
        for solve in solves:
            self._count(solve)
        self.report["phases"]["zone_seconds"] = round(seconds, 3)
        if solved is None:
            return False
        zone, got = solved
        best = min(self.proven)
        if got.value is None or got.value >= best - REL_TOL * max(1.0, abs(best)):
            return False
        self.target = self._tighten(got.value)
        self.block_model, self.relaxed_starts = zone, got.starts
        self.zone_bound = True
        # Start sets cut off the block relaxation while the zones ran beside it are cut off
        # this one too; if its own starts are among them, it is solved again with the cuts.
        for pairs in self.cut_sets:
            zone.exclude(pairs)
        if any(set(got.starts.items()) <= pairs for pairs in self.cut_sets):
            assert self.search is not None
            nxt = self._count(bounds.solve_block(zone, time_limit=self._half_left(),
                                                 cutoff=self._incumbent()))
            if nxt.value is not None:
                self.target = self._tighten(max(self.excluded, nxt.value))
                self.relaxed_starts = nxt.starts if nxt.value > self.excluded else None
        return True

    def _incumbent(self) -> float:
        """The best plan's objective so far: the search's, or the floor's above it."""
        assert self.search is not None
        if FLOOR_INCUMBENT:
            return max(self.search.objective, self.floor_obj)
        return self.search.objective

    def _at_target(self) -> bool:
        """The incumbent meets a relaxation's bound, or the whole MILP's."""
        return any(target is not None and self._incumbent() >= target
                   for target in (self.target, self.milp_target))

    def improve_by_windows(self) -> bool:
        """Too big to solve whole in time (LNS_MIN_GPUS and up): improve the incumbent one
        GPU or step window at a time. The whole MILP's own bound is useless at this size
        (docs/sources.md): all the time goes to windows. True if they ran."""
        if self.met_relaxation or self.scenario.G < LNS_MIN_GPUS or self.left() <= 0:
            return False
        assert self.search is not None
        self.report["phases"]["windows_solved"] = neighbourhoods(self.search, self.left(),
                                                                 self.target)
        self.met_relaxation = self._at_target()
        self.phase("windows")
        return True

    def solve_whole(self) -> None:
        """The whole MILP, warm-started from the incumbent, for the time that is left; or,
        where it has run beside the cuts, its answer (stopped, if the cuts proved)."""
        assert self.search is not None
        search = self.search
        if self.milp_beside is not None:
            if not self.met_relaxation or self.milp_beside.cancel(MILP_BESIDE_WAIT_SECONDS):
                self._take_milp_beside(wait=True)
            self.met_relaxation = self._at_target()
            self.phase("milp")
            return
        if self.met_relaxation or self.left() <= 0:
            return
        result = search.attempt(self.left(), search.grid if self.warm_start else None,
                                self.target)
        if not result.has_solution and search.objective <= self.fast_obj:
            self.warnings.append(f"the solver stopped ({result.status}) with no solution; "
                                 "returning the fast plan")
        if result.status == "infeasible":
            self.warnings.append("the solver called the model infeasible (a modelling bug)")
        self.phase("milp")

    def conclude(self) -> np.ndarray:
        """The best bound, the gap and the status; the incumbent's grid."""
        search, report = self.search, self.report
        assert search is not None
        if search.bounds:
            report["milp_bound"] = min(search.bounds)
            self.proven.append(min(search.bounds))
        best_bound = min(self.proven) if self.proven else None
        # fast's own grid when nothing beat it, not its relabelled copy
        grid = self.fast_grid if search.grid is self.canonical_fast else search.grid
        objective = search.objective
        if self.floor_obj > objective:  # fast's best beat the search: the floor holds
            grid, objective = self.floor_grid, self.floor_obj
        gap = relative_gap(objective, best_bound)
        met = self.target is not None and objective >= self.target  # the relaxation's bound
        if gap is not None and gap <= self.mip_gap:
            status = "optimal"
            which = "zone" if self.zone_bound else "block-capacity"
            report["proof"] = (f"the plan meets the {which} bound ({self.cuts} no-good "
                               "cuts)" if met else "the MILP's own bound")
        else:
            status = "time_limit" if self.left() <= 0.5 else "feasible"
            shown = "unknown" if gap is None else f"{100 * gap:.2f}%"
            last = search.statuses[-1] if search.statuses else "not run"
            self.warnings.append(f"not proven optimal (solver: {last}): gap {shown} to the "
                                 "best bound")
        improved = objective > self.floor_obj + REL_TOL * max(1.0, abs(self.floor_obj))
        report.update(status=status, objective=objective, best_bound=best_bound,
                      gap=gap, improved_fast=improved)
        return grid
