"""Reservations: a waiting job's promised block, so large jobs are not starved by backfill.

A `Reservation` (allocator.model) says: job `id` runs on `[first_gpu, first_gpu + gpus)`
from step `start`; no other batch job on that block may run past `start` (it may only
backfill ahead of it). This module holds everything the policies share about them:

- `problems`: the input rules (the loader raises on the first; the replay never breaks them);
- `plan_problems`: whether a grid keeps its reservations (the validator calls it);
- `Holds`: what a policy must do with them (pin the job, keep other batch work off the
  block past the start, keep realtime off the block so a service never settles on GPUs
  the reserved job needs); fast and the Slurm-style baseline use it;
- the same as variable bounds on full's MILP: `allocator.milp.model.hold_reservations`;
- `earliest`: the earliest aligned block a waiting job could be promised, looking past the
  horizon (running jobs' predicted ends, other reservations, the realtime floor).

Choosing the top job and keeping its reservation across replans is the replay's business
(pipelines/guard.py); the allocator only honours what it is given.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from allocator.core.envelope import target_curve
from allocator.grid import FREE
from allocator.model import BatchJob, Reservation, Scenario

FOREVER = 1 << 30
# A promise on a block realtime holds GPUs of starts this many steps past `vacate_steps`:
# fast's realtime layout spends the swap budget on its own moves first, and where two
# services held several GPUs of a block, a promise at exactly `vacate_steps` left a release
# it could not pay for (an illegal plan).
VACATE_MARGIN = 3
OFF = -2  # a grid code beside FREE: a free cell realtime must not take


def _runs(job: BatchJob, start: int) -> tuple[int, int]:
    return start, start + job.duration_steps


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def problems(scenario: Scenario, reservations: Iterable[Reservation]) -> list[tuple[str, str,
                                                                                       str]]:
    """Broken input rules as (job id, field, message); empty when the reservations are sound.

    A reservation names a queued batch job of its size, on an aligned block inside the
    cluster, no earlier than the job's arrival, clear of every running block while that
    runs and of the other reservations' runs, and starting no earlier than realtime can
    move off the block's GPUs it holds now (`vacate_steps`).
    """
    by_id = {j.id: j for j in scenario.jobs}
    out: list[tuple[str, str, str]] = []
    seen: list[tuple[Reservation, BatchJob]] = []
    current = {g for j in scenario.realtime_jobs for g in (j.current_gpus or ())}
    for r in reservations:
        job = by_id.get(r.id)
        if not isinstance(job, BatchJob):
            out.append((r.id, "id", "names no batch-like job of the scenario"))
            continue
        if job.running:
            out.append((r.id, "id", "the job is already running"))
            continue
        if any(o.id == r.id for o, _ in seen):
            out.append((r.id, "id", "reserved twice"))
            continue
        if r.gpus != job.gpus:
            out.append((r.id, "gpus", f"is {r.gpus}, the job needs {job.gpus}"))
            continue
        if r.first_gpu % r.gpus or not 0 <= r.first_gpu <= scenario.G - r.gpus:
            out.append((r.id, "first_gpu", f"{r.first_gpu} is not an aligned block of "
                        f"{r.gpus} inside the cluster"))
            continue
        if r.start < job.arrival_step:
            out.append((r.id, "start", f"{r.start} is before the job's arrival "
                        f"{job.arrival_step}"))
            continue
        block = set(range(r.first_gpu, r.first_gpu + r.gpus))
        lead = vacate_steps(scenario, r.first_gpu, r.gpus)
        if r.start < lead:
            out.append((r.id, "first_gpu", f"the block holds a realtime job's current GPU "
                        f"{min(block & current)}, which realtime needs {lead} steps to move "
                        f"off; the reservation starts at {r.start}"))
            continue
        run = _runs(job, r.start)
        for other in scenario.batch_jobs:
            if other.running and _overlap((0, other.running.remaining_steps), run) and \
                    block & set(range(other.running.first_gpu,
                                      other.running.first_gpu + other.gpus)):
                out.append((r.id, "start", f"the block is held by running {other.id!r} "
                            f"until step {other.running.remaining_steps}"))
                break
        else:
            for o, ojob in seen:
                if block & set(range(o.first_gpu, o.first_gpu + o.gpus)) and \
                        _overlap(_runs(ojob, o.start), run):
                    out.append((r.id, "start", f"overlaps the reservation of {o.id!r}"))
                    break
            else:
                seen.append((r, job))
    return out


def plan_problems(scenario: Scenario, starts: dict[str, tuple[int, int]]) -> list[str]:
    """How a grid breaks its scenario's reservations; `starts` maps batch id -> (start, first)."""
    out = []
    T = scenario.T
    by_id = {j.id: j for j in scenario.batch_jobs}
    for r in scenario.reservations:
        got = starts.get(r.id)
        if r.start < T and got != (r.start, r.first_gpu):
            out.append(f"{r.id}: reserved from step {r.start} on GPU {r.first_gpu}, the plan "
                       f"has {'nothing' if got is None else f'step {got[0]} on GPU {got[1]}'}"
                       " (reservation)")
        elif r.start >= T and got is not None:
            out.append(f"{r.id}: reserved from step {r.start}, past the horizon, but the plan "
                       f"starts it at step {got[0]} (reservation)")
        block = range(r.first_gpu, r.first_gpu + r.gpus)
        for jid, (s, first) in starts.items():
            job = by_id[jid]
            if jid == r.id or job.running:
                continue
            if first < block.stop and block.start < first + job.gpus and \
                    s < r.start < s + job.duration_steps:
                out.append(f"{jid}: runs on {r.id}'s reserved block past its start {r.start} "
                           f"(steps {s}..{s + job.duration_steps - 1}; reservation)")
    return out


@dataclass(frozen=True)
class Holds:
    """What a policy does with the reservations, as grid masks.

    `pins`: (job index, start, end, first GPU, gpus) for reservations inside the horizon;
    `batch_busy`: cells other batch jobs must treat as busy (the pinned runs, and for a
    reservation past the horizon its block at the last step, which no job that would run
    past the reserved start can avoid); `realtime_off`: the reserved blocks, from
    `realtime_off_from` to the reserved run's end.
    """

    pins: tuple[tuple[int, int, int, int, int], ...]
    batch_busy: np.ndarray | None  # None: no reservations (fast's hot path stays as it was)
    realtime_off: np.ndarray | None
    reserved: frozenset[int] = frozenset()  # every reserved job's index: not placed freely

    def pin(self, grid: np.ndarray) -> None:
        """Write the reserved runs into `grid`, as a running job's pin is written."""
        for i, start, end, first, gpus in self.pins:
            grid[start:end, first : first + gpus] = i

    def keep_realtime_off(self, grid: np.ndarray) -> None:
        """Mark the reserved blocks' free cells taken (OFF), so realtime placement skips them.

        Batch placement reads `grid >= 0` as busy, so OFF cells stay open to backfill.
        """
        if self.realtime_off is not None:
            grid[self.realtime_off & (grid == FREE)] = OFF

    def release(self, grid: np.ndarray) -> None:
        if self.realtime_off is not None:
            grid[grid == OFF] = FREE


def holds(scenario: Scenario) -> Holds:
    if not scenario.reservations:
        return NO_HOLDS
    T, G = scenario.T, scenario.G
    index = {j.id: i for i, j in enumerate(scenario.jobs)}
    pins = []
    batch_busy = np.zeros((T, G), dtype=bool)
    realtime_off = np.zeros((T, G), dtype=bool)
    for r in scenario.reservations:
        i = index[r.id]
        job = scenario.batch_job_at(i)
        cols = slice(r.first_gpu, r.first_gpu + r.gpus)
        realtime_off[realtime_off_from(scenario, r):realtime_off_until(scenario, r), cols] = True
        if r.start < T:
            end = min(r.start + job.duration_steps, T)
            pins.append((i, r.start, end, r.first_gpu, r.gpus))
            batch_busy[r.start : end, cols] = True
        elif T:
            batch_busy[T - 1, cols] = True
    return Holds(tuple(pins), batch_busy, realtime_off,
                 frozenset(index[r.id] for r in scenario.reservations))


NO_HOLDS = Holds((), None, None)


def earliest(scenario: Scenario, job: BatchJob, others: Iterable[Reservation] = (),
             forbidden: Iterable[int] = (), floor: bool = True, keep: int | None = None,
             limit: int = FOREVER) -> Reservation | None:
    """The earliest aligned block `job` could be promised, looking past the horizon.

    A block qualifies from step s when every GPU in it is clear of running jobs (by their
    predicted ends) and of the `others`' runs for the whole run, holds no `forbidden` GPU
    (a baseline's static realtime columns), gives realtime time to move off the GPUs of it
    that it holds now (`vacate_steps`) and, with `floor`,
    leaves realtime its forecast demand at every step of the horizon outside all reserved
    blocks. Ties on s keep block `keep`, else the lowest (realtime stacks at the top).
    """
    T, G, k, d = scenario.T, scenario.G, job.gpus, job.duration_steps
    if k > G:
        return None
    sizes = {j.id: j for j in scenario.batch_jobs}
    busy_until = np.zeros(G, dtype=np.int64)
    for j in scenario.batch_jobs:
        if j.running:
            busy_until[j.running.first_gpu : j.running.first_gpu + j.gpus] = \
                j.running.remaining_steps
    held = [(o.first_gpu, o.first_gpu + o.gpus, o.start, o.start + sizes[o.id].duration_steps)
            for o in others]
    banned = np.zeros(G, dtype=bool)
    banned[list(forbidden)] = True
    demand = np.zeros(T, dtype=np.int64)
    for rt in scenario.realtime_jobs:
        demand += np.asarray(rt.demand, dtype=np.int64)
    run_busy = np.zeros((T, G), dtype=bool)
    for g in range(G):
        run_busy[: min(int(busy_until[g]), T), g] = True
    off = np.zeros(G, dtype=bool)
    for a, b, _, _ in held:
        off[a:b] = True
    without = (~(run_busy | off[None, :])).sum(axis=1)
    firsts = list(range(0, G - k + 1, k))
    leads = {b: _lead(scenario, b, k) for b in firsts}
    candidates = sorted({job.arrival_step, *(int(v) for v in busy_until),
                         *(e for _, _, _, e in held), *leads.values()})
    if keep is not None and keep in firsts:
        firsts.remove(keep)
        firsts.insert(0, keep)
    for s in candidates:
        if s < job.arrival_step or s > limit:
            continue
        for b in firsts:
            if banned[b : b + k].any() or (busy_until[b : b + k] > s).any() or s < leads[b]:
                continue
            if any(a < b + k and b < e and s < re and rs < s + d for a, e, rs, re in held):
                continue
            if floor and demand.any():
                mask = off.copy()
                mask[b : b + k] = True
                left = (~(run_busy | mask[None, :])).sum(axis=1)
                if (left < np.minimum(demand, without)).any():
                    continue  # the promise would cost realtime GPUs it could have had
            return Reservation(id=job.id, start=s, first_gpu=b, gpus=k)
    return None


def _lead(scenario: Scenario, first: int, gpus: int) -> int:
    """The earliest start `earliest` promises on a block: `vacate_steps`, plus
    `VACATE_MARGIN` steps where realtime holds a GPU of the block now."""
    lead = vacate_steps(scenario, first, gpus)
    return lead + VACATE_MARGIN if lead else 0


def vacate_steps(scenario: Scenario, first: int, gpus: int) -> int:
    """Steps realtime needs to move off the GPUs of [first, first + gpus) it holds now.

    A moved GPU costs an acquire elsewhere and a release here against the job's per-step
    swap limit, and the budget a step's change in forecast demand uses is not there to
    move with (a service growing into its peak may have none left); but where the held
    curve falls to a new low (below every count since now), a release here is the fall
    itself and needs no replacement. Counting that keeps the estimate from growing along
    the path a plan takes off the block: a plan that acquired a GPU elsewhere last step
    only has the release left. Only a new low: fast keeps a GPU held now on a layer of the
    curve that starts at step 0, and such a layer ends only where the curve sets a new low
    (a fall after a peak ends a peak's layer, on whichever GPU it took; counting that fall
    too, a promise went illegal). An acquire made to release a GPU here is only of use in
    the next step: fast hands a GPU over in consecutive steps or not at all. The jobs move in
    parallel, and past the horizon demand is taken as flat. 0 when realtime holds none;
    the horizon's length where a service with swap limit 0 holds one (it never moves).
    """
    out = 0
    for rt in scenario.realtime_jobs:
        inside = sum(first <= g < first + gpus for g in rt.current_gpus or ())
        if not inside:
            continue
        if rt.swap_limit == 0:  # it can never change its GPUs inside the horizon
            out = max(out, scenario.T)
            continue
        limit, t = rt.swap_limit, 0
        previous = len(rt.current_gpus or ())
        # the held count fast and full actually follow: it rises ahead of a peak, so the
        # budget of the steps before the peak is spent too (raw demand would miss that)
        demand = np.asarray(rt.demand, dtype=np.int64)
        curve = target_curve(demand, limit, previous, np.full(len(demand), scenario.G))
        ahead = 0  # GPUs acquired elsewhere for a release still to come
        low = previous  # the curve's lowest count so far: below it, held layers end
        while inside > 0:
            now = int(curve[t]) if t < len(curve) else previous
            budget = limit - abs(now - previous)
            if now < low:  # a new low: the GPUs that fall are ours, unreplaced
                inside, low = inside - min(low - now, inside), now
                ahead = min(ahead, inside)
            released = min(ahead, inside, max(budget, 0))  # replacements already held
            inside, ahead, budget = inside - released, ahead - released, budget - released
            moved = min(inside - ahead, max(budget, 0) // 2)  # an acquire and a release
            inside, budget = inside - moved, budget - 2 * moved
            ahead = min(max(budget, 0), inside)  # acquire now, release next step
            previous, t = now, t + 1
        out = max(out, t + 1)  # one step of slack: the last move may land on step t
    return out


def realtime_off_from(scenario: Scenario, r: Reservation) -> int:
    """The step from which fast and full keep realtime off `r`'s block: late enough that a
    service may use the block's free GPUs until then, early enough that it can move off all
    of them (an acquire and a release each, at the slowest swap limit) before `r.start`;
    never before it can leave the GPUs it holds now.

    And at least two steps before the start: the next plan sees realtime where this one
    left it a step earlier, and `vacate_steps` gives a GPU still held there a step to move
    and one of slack, so a block cleared any later would push the kept promise later.
    A reservation without `lead` (a pin trial's, never kept past its plan) keeps realtime
    off only from its start.
    """
    limits = [max(rt.swap_limit, 1) for rt in scenario.realtime_jobs]
    if not limits:
        return 0
    if not r.lead:  # a pin trial's plan: fast's realtime placer leaves the block at the
        return r.start  # start on its own, within the swap limits, short where it must
    lead = -(-2 * r.gpus // min(limits))
    vacate = vacate_steps(scenario, r.first_gpu, r.gpus)
    off = min(r.start, max(vacate, r.start - lead))
    # a promise on a block realtime holds starts VACATE_MARGIN steps past `vacate_steps`
    # (`earliest`); realtime leaves as early as it would without them, or it stays on the
    # block, the next plan's `vacate_steps` is no shorter, and the promise moves later
    return max(0, min(off, r.start - 2 - (VACATE_MARGIN if vacate else 0)))


def realtime_off_until(scenario: Scenario, r: Reservation) -> int:
    """The step from which realtime may take `r`'s block again: the reserved run's end (the
    horizon's end for a run that ends past it, or a promise past the horizon). Kept off
    after the run, a service short at a late peak could not use GPUs nobody needs."""
    if r.start >= scenario.T:
        return scenario.T
    job = next(j for j in scenario.batch_jobs if j.id == r.id)
    return min(r.start + job.duration_steps, scenario.T)


def claim(priority: float, waited: int, age: float) -> float:
    """A waiting job's claim: its priority plus `age` per step waited (additive, as Slurm's
    age factor), so any job that waits long enough outranks every fresh one."""
    return priority + age * max(waited, 0)


def as_dicts(reservations: Iterable[Reservation]) -> list[dict[str, int | str]]:
    """The plan file's `reservations` list (docs/contract/MODEL.md)."""
    return [{"id": r.id, "start": r.start, "first_gpu": r.first_gpu, "gpus": r.gpus}
            for r in reservations]


__all__ = ["Holds", "Reservation", "as_dicts", "claim", "earliest", "holds",
           "plan_problems", "problems", "vacate_steps"]
