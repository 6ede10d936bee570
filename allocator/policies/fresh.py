"""A realtime layout made as if services held no GPUs yet, then reached from the GPUs they
do hold within their swap limits.

A replan finds services where yesterday left them. Every other layout lets each owner keep
its own GPUs first and keeps the others off them, so a service holding scattered GPUs
stays on them, shrinking at its swap limit, and the blocks they break stay broken. The
same day with no current GPUs often plans several points better (the replan family of
benchmarks/bench_quality.py). Here the layout of that day is laid out, and each service
walks from its current GPUs onto it: at every step it keeps what both share, releases what
another job needs there, then spends what budget is left on acquiring the layout's GPUs
while it holds no more than its demand (an acquire before each release: a hand-over is
never short) and on releasing the rest. A service that cannot (a forced release past its
limit) leaves the candidate out.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from allocator import grid as gridlib
from allocator.model import RealtimeJob, Scenario


def without_current(scenario: Scenario) -> Scenario:
    """The same scenario with no service holding GPUs before step 0."""
    jobs = tuple(replace(j, current_gpus=None) if isinstance(j, RealtimeJob) else j
                 for j in scenario.jobs)
    return replace(scenario, jobs=jobs)


def holds_current(scenario: Scenario) -> bool:
    """Whether any service holds GPUs before step 0 (a replan)."""
    return any(j.current_gpus for j in scenario.realtime_jobs)


def walk_on(scenario: Scenario, layout: np.ndarray) -> bool:
    """Rewrite, in place, each service's cells of `layout` (a layout made without current
    GPUs; running and other realtime cells fixed, the rest free) as the walk from its
    current GPUs onto them; False (the grid then partly rewritten) where a swap limit
    cannot hold."""
    T = layout.shape[0]
    for i, job in enumerate(scenario.jobs):
        if not isinstance(job, RealtimeJob) or job.current_gpus is None:
            continue  # (holding none, `()`, still counts step 0's acquires)
        mine = layout == i
        target = [set(np.flatnonzero(mine[t]).tolist()) for t in range(T)]
        layout[mine] = gridlib.FREE
        if not _walk(layout, i, job, target):
            return False
    return True


def _walk(grid: np.ndarray, i: int, job: RealtimeJob, target: list[set[int]]) -> bool:
    """One service's walk (see `walk_on`), written into `grid`'s free cells."""
    held = set(job.current_gpus or ())
    limit = job.swap_limit
    for t, want in enumerate(target):
        row = grid[t]
        forced = {g for g in held if row[g] != gridlib.FREE}
        if len(forced) > limit:
            return False
        held -= forced
        budget = limit - len(forced)
        acquire = sorted(g for g in want - held if row[g] == gridlib.FREE)
        release = sorted(held - want)
        demand = job.demand[t]
        while budget > 0 and (acquire or release):
            if acquire and (len(held) <= demand or not release):
                held.add(acquire.pop(0))
            else:
                held.discard(release.pop(0))
            budget -= 1
        for g in held:
            row[g] = i
    return True
