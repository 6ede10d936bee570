"""The starvation guard of the rolling replay: age claims and the top job's reservation.

Each plan, before the policy runs:

1. **Claims.** A waiting job's claim is its priority plus `age` per step waited
   (`allocator.reservations.claim`), so a job that waits long enough outranks every fresh
   one. `age = 0` turns it off. Claims pick the top job; with `age_in_plan` they also
   replace priorities in the plan (off by default: it cost 14-23% of value in the
   over-full starvation worlds, docs/starvation.md).
2. **Keep the promises.** Every job already promised a block is promised again at the
   earliest start now feasible (`allocator.reservations.earliest`, which looks past the
   horizon), on the same block when that start ties: a promise moves earlier or stays,
   and moves later only when a job on its block overran its predicted end, or realtime
   still holds a GPU of it too close to the start to move off (both counted); then it
   stays on its block, later by only what that needs, unless a block that leaves realtime
   its forecast is free within a horizon of that start (docs/starvation.md).
3. **Promise the top job.** While fewer than `count` promises are held, the waiting job
   that ranks first (claim per square root of its run, below) is promised its earliest
   block (even one that could start now: the promise then pins it there). Promising only
   jobs that cannot start now, as Slurm does, was tried and is worse here: the first
   large job gets a promise days out (every node holds a multi-day 1-GPU job) and holds
   the only slot all week (Philly: 0 of 157 8-GPU jobs start, against 24 this way).
   The pick ranks claim / sqrt(predicted run) (`Rules.length_exponent`; 0 ranks by claim alone):
   a node drained for a promise serves the most waiting jobs when the short ones go
   first, and age still lifts a long one. By claim alone the Philly week chained its
   8-GPU jobs on one node until a multi-day one took it, and the next node drained days
   later (docs/starvation.md: 23 of 157 started against 55).
   Only jobs that need a whole node or more (`whole_nodes`, on by default) are promised:
   fragmentation starves them, not smaller jobs, which fit the gaps any ending job leaves.
   A promise to a long 1-GPU job (often the top claim, after a day of waiting) pinned it
   ahead of realtime's growth and held the single promise the large jobs wait for
   (docs/starvation.md, "Promises to whole-node jobs only").
   With `half_nodes` (off by default) a job of half a node up to a node is promised too,
   besides, but only a block free within `half_node_within` steps and off every node a
   whole-node job runs on or is promised: a 4-GPU promise elsewhere took the node the
   8-GPU promises were chained on (seed-11 Philly week: 18 of 157 8-GPU starts, against 57).

Steps 2 and 3 need no replay world: they are `pipelines.promising.keep_and_promise`, which
`gpuplan plan-day --guard` runs too (pipelines/day_guard.py), so the replay measures the
rule the operator runs.

The policy then gets the promises as the scenario's `reservations`: the reserved job is
pinned there and other jobs only backfill on its block if they end before it (fast and
full honour them, and so does the Slurm-style `backfill` baseline; MODEL.md's fifo and
priority are left as the contract defines them and get none).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from allocator.model import BatchJob, Scenario
from allocator.policies.backfill import static_columns
from allocator.reservations import claim
from pipelines.promising import Rules, Waiting, keep_and_promise
from pipelines.worlds import World

GUARDED: tuple[str, ...] = ("fast", "full", "backfill")


@dataclass
class Guard:
    """Promises held across the plans of one replay; starts are absolute steps."""

    world: World
    policy: str
    age: float = 0.25
    reserve: bool = True
    rules: Rules = field(default_factory=Rules)  # who is promised, how many (promising.py)
    age_in_plan: bool = False  # claims replace priorities in the plan, not only in the pick
    promised: dict[int, tuple[int, int]] = field(default_factory=dict)  # code -> start, GPU
    log: list[tuple[int, int, int]] = field(default_factory=list)  # (t0, code, start)
    later: int = 0  # promises moved later: an overrun on the block, or realtime still on it
    later_realtime: int = 0  # ... of them, with realtime holding a GPU of the block then
    made: int = 0

    def apply(self, scenario: Scenario, codes: list[int], t0: int,
              started: dict[int, tuple[int, int]]) -> Scenario:
        """The scenario the policy plans: claims as priorities, the promises as reservations."""
        jobs = list(scenario.jobs)
        claims: dict[int, float] = {}
        waiting: dict[int, int] = {}  # code -> scenario position, queued jobs
        for p, job in enumerate(jobs):
            if isinstance(job, BatchJob) and not job.running:
                waiting[codes[p]] = p
                waited = t0 - self.world.jobs[codes[p]].arrival
                claims[codes[p]] = claim(job.priority, waited, self.age)
                if self.age_in_plan:
                    jobs[p] = replace(job, priority=claims[codes[p]])
        scenario = replace(scenario, jobs=tuple(jobs))
        for code in [c for c in self.promised if c in started or c not in waiting]:
            del self.promised[code]
        if not self.reserve:
            return scenario
        # A promise may take GPUs realtime holds now, from when it can have moved off them
        # (allocator.reservations.vacate_steps), as long as its forecast fits elsewhere.
        forbidden: set[int] = set()
        floor = self.policy != "backfill"
        if not floor:  # the baseline's realtime sits in fixed columns: promise around them
            forbidden = {g for j in scenario.realtime_jobs for g in (j.current_gpus or ())}
            forbidden |= {int(g) for g in static_columns(scenario).nonzero()[0]}
        world = self.world.jobs
        queued = {c: Waiting(p, world[c].arrival, world[c].gpus, claims[c])
                  for c, p in waiting.items()}
        got = keep_and_promise(scenario, queued, self.promised, t0, self.rules, forbidden,
                               floor)
        self.promised = got.promised
        self.later += got.later
        self.later_realtime += got.later_realtime
        self.made += got.made
        self.log.extend(got.log)
        return replace(scenario, reservations=got.reservations)


