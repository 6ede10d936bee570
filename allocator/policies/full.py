"""`full`: MODEL.md's exact model as a MILP, warm-started from `fast`, never worse.

For periodic review, not the hot path. The model, the solvers, the bounds and the search
live in allocator.milp; this is the policy: the steps, in order. The plan returned is the
better of the solver's incumbent (its objective recomputed from the grid, never taken
from the solver) and the warm start (fast's best, `warm_plan`), checked by the validator;
a missing solver or an empty timeout yields the warm start.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from allocator import grid as gridlib
from allocator.milp.search import FullSolve
from allocator.model import Scenario
from allocator.policies import refine
from allocator.policies.fast import fast
from allocator.result import PolicyResult

# fast's pin trials for the warm start (two rounds): a few fast runs (milliseconds) against
# a solve of seconds, and a better incumbent prunes every placement and cut after it.
WARM_PIN_TRIALS = 24
# The warm start is also the best of `gpuplan plan`'s refinement candidates (its hot plan,
# its runs with other layouts and evacuation rules, the daily plan's trials): full's plan is
# then never below the plan `gpuplan plan --policy fast` gives. With fast's pin trials alone,
# full ended below it on replan tuning seed 1296 (798.91 against 831.16 after 30 s).
WARM_REFINED = True
# ... from this time limit up: those runs took a median 0.56 s and up to 3.3 s on the
# 16-GPU tuning scenarios (fast with pin trials alone: 0.05 s, at most 0.26 s), and a
# shorter limit is not to be spent on the warm start alone.
WARM_REFINED_MIN_SECONDS = 5.0


def warm_plan(scenario: Scenario, refined: bool = True) -> np.ndarray:
    """fast with its pin trials, or (`refined`) where one beats it the best of fast's hot
    plan and the refinement's candidate runs (allocator/policies/refine.py), all of them,
    wanting or not."""
    best = fast(scenario, pin_trials=WARM_PIN_TRIALS)
    if not refined:
        return best
    score = gridlib.Scorer(scenario)
    value = score(best)
    for options in ({}, *refine.candidates(scenario, {}).values()):
        grid = fast(scenario, **options)
        if (got := score(grid)) > value:
            best, value = grid, got
    return best


def full(scenario: Scenario, *, solver: str = "highs", time_limit: float = 30.0,
         lp_bound: bool = False, mip_gap: float = 1e-4, warm_start: bool = True,
         block_bound: bool = True) -> PolicyResult:
    """The better of the MILP's incumbent and fast's grid, with the solve's report.

    `time_limit` bounds the whole solve, bounds included. With `block_bound`, the
    block-capacity relaxation (allocator.milp.bounds) runs first: its bound often proves
    fast optimal at once, its starts, placed by a restricted MILP, often reach it (below
    32 GPUs, when they do not, the tighter zone relaxation and no-good cuts follow), and
    the full MILP stops as soon as an incumbent meets it.
    """
    refined = WARM_REFINED and time_limit >= WARM_REFINED_MIN_SECONDS
    run = FullSolve(scenario, partial(warm_plan, refined=refined), solver=solver,
                    time_limit=time_limit, mip_gap=mip_gap, warm_start=warm_start)
    if run.cannot_solve():
        return run.result(run.fast_grid)
    if lp_bound:
        run.bound_by_lp()
    if block_bound:
        run.bound_by_blocks()
    run.phase("bounds")
    if run.fast_meets_bound():
        return run.result(run.fast_grid)
    run.start_zones()
    run.build()
    run.place_relaxed_starts()
    if not run.improve_by_windows():
        run.solve_whole()
    return run.result(run.conclude())
