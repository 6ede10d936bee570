"""Keeping and making promises: the starvation guard's rule, shared by the replay and plan-day.

The rolling replay (pipelines/guard.py) and the daily plan (pipelines/plan_day.py) must
promise the same way, or a replay would measure a guard the operator never runs. This is
the part of the rule that needs no replay world: given a scenario, its waiting jobs (their
claims, arrivals and sizes) and the promises held so far as absolute starts, keep every
promise at its earliest feasible start (never later, but for an overrun on the block or
realtime not yet off it) and promise the top waiting job of each tier. The why of each
choice is in guard.py's docstring and docs/starvation.md.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from allocator.model import Reservation, Scenario
from allocator.reservations import FOREVER, earliest

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Rules:
    """Which jobs get promises, and how many (guard.py's docstring says why each default)."""

    count: int = 1  # promises held for jobs of a whole node or more
    whole_nodes: bool = True  # promise only jobs that need a node or more
    length_exponent: float = 0.5  # the pick ranks claim / predicted run ** this (0: claim)
    half_nodes: int = 0  # promises held for jobs of half a node up to a node
    half_node_within: int = 4  # ... only to a block free within this many steps


@dataclass(frozen=True)
class Waiting:
    """A queued job as the rule sees it: scenario position, arrival (absolute), size, claim."""

    position: int
    arrival: int
    gpus: int
    claim: float


@dataclass(frozen=True)
class Promises(Generic[K]):
    """What one plan keeps and makes: key -> (absolute start, first GPU), in keeping order."""

    promised: dict[K, tuple[int, int]]
    reservations: tuple[Reservation, ...]  # relative to the plan: the scenario's reservations
    later: int  # promises moved later (an overrun on the block, or realtime still on it)
    later_realtime: int  # ... of them, with realtime holding a GPU of the block now
    made: int
    log: tuple[tuple[int, K, int], ...]  # (t0, key, absolute start) per kept or made promise


def keep_and_promise(scenario: Scenario, waiting: Mapping[K, Waiting],
                     promised: Mapping[K, tuple[int, int]], t0: int, rules: Rules,
                     forbidden: set[int], floor: bool) -> Promises[K]:
    """Keep every held promise (its key must be waiting) and promise each tier's top job.

    Starts in `promised` and in the result are absolute (`t0` is the plan's first step);
    the reservations are relative to the plan, ready for `replace(scenario, reservations=)`.
    """
    out: dict[K, tuple[int, int]] = {}
    kept: list[Reservation] = []
    log: list[tuple[int, K, int]] = []
    later = later_realtime = made = 0
    realtime_now = {g for rt in scenario.realtime_jobs for g in rt.current_gpus or ()}
    for key, (start, first) in promised.items():
        job = scenario.batch_job_at(waiting[key].position)
        got = earliest(scenario, job, kept, forbidden, floor, keep=first)
        if got is None or t0 + got.start > start:
            # A promise made is kept even if the realtime forecast has grown since:
            # only an overrun on the block (or realtime not yet off it) pushes it later.
            held = earliest(scenario, job, kept, forbidden, False, keep=first,
                            limit=max(start - t0, 0))
            if held is None:
                # It must move later. The earliest block with the realtime floor was often
                # a day or more later (every other node still draining), and a late-week
                # promise went past the week's end: then it stays on its own block, later
                # by only what the overrun (or realtime still on it) needs. Within a
                # horizon of that, the floor's block is taken, realtime kept whole.
                others = set(range(scenario.G)) - set(range(first, first + job.gpus))
                held = earliest(scenario, job, kept, forbidden | others, False, keep=first)
                if held is not None and got is not None and \
                        got.start <= held.start + scenario.T:
                    held = None
            got = held if held is not None else got
        if got is None:
            continue
        if t0 + got.start > start:
            later += 1
            job_block = range(first, first + job.gpus)
            later_realtime += any(g in realtime_now for g in job_block)
        out[key] = (t0 + got.start, got.first_gpu)
        kept.append(got)
        log.append((t0, key, t0 + got.start))
    node = min(scenario.cluster.node_size, scenario.G)
    tiers = [(node if rules.whole_nodes else 1, scenario.G, rules.count)]
    if rules.half_nodes and rules.whole_nodes and node >= 2:
        tiers.append((node // 2, node - 1, rules.half_nodes))
    for low, high, count in tiers:
        pool = [k for k, w in waiting.items() if k not in out
                and w.arrival <= t0 and low <= w.gpus <= high]
        if sum(low <= waiting[k].gpus <= high for k in out) >= count:
            continue
        top = sorted(pool, key=lambda k: (
            -waiting[k].claim / scenario.batch_job_at(waiting[k].position).duration_steps
            ** rules.length_exponent, waiting[k].arrival, k))
        whole = high >= node
        avoid = forbidden if whole else forbidden | _large_nodes(scenario, kept, node)
        for key in top[:1]:
            got = earliest(scenario, scenario.batch_job_at(waiting[key].position), kept,
                           avoid, floor, limit=FOREVER if whole else rules.half_node_within)
            if got is not None:
                out[key] = (t0 + got.start, got.first_gpu)
                kept.append(got)
                made += 1
                log.append((t0, key, t0 + got.start))
    return Promises(out, tuple(kept), later, later_realtime, made, tuple(log))


def _large_nodes(scenario: Scenario, kept: Iterable[Reservation], node: int) -> set[int]:
    """The GPUs of every node a whole-node job runs on or is promised: a half-node promise
    stays off them, so the chain of large jobs on a drained node is not broken."""
    blocks = [(j.running.first_gpu, j.gpus) for j in scenario.batch_jobs
              if j.running and j.gpus >= node]
    blocks += [(r.first_gpu, r.gpus) for r in kept]
    out: set[int] = set()
    for first, gpus in blocks:
        start = first - first % node
        out.update(range(start, start + max(gpus, node)))
    return out
