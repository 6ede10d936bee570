"""fifo and priority follow MODEL.md's fine print to the letter (they are the yardstick).

Hand-built scenarios pin each rule; a literal, loop-by-loop reading of MODEL.md
(`reference`) must then produce the very same grid on random scenarios.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given

from allocator import grid as gridlib
from allocator.model import BatchJob, Scenario
from allocator.policies import POLICIES, baselines
from allocator.policies.decoder import Jobs
from allocator.scenario_io import scenario_from_dict
from tests.strategies import scenarios

BASELINES = ("fifo", "priority")
Grid = list[list[str | None]]


def scenario(G: int, T: int, *jobs: dict[str, Any]) -> Scenario:
    return scenario_from_dict({"cluster": {"gpus": G, "horizon_steps": T}, "jobs": list(jobs)})


def batch(job_id: str, gpus: int, duration: int, arrival: int = 0, priority: float = 1,
          running: tuple[int, int] | None = None) -> dict[str, Any]:
    job: dict[str, Any] = {"id": job_id, "kind": "training", "priority": priority,
                           "gpus": gpus, "duration_steps": duration, "arrival_step": arrival}
    if running is not None:
        job["running"] = {"first_gpu": running[0], "remaining_steps": running[1]}
    return job


def realtime(job_id: str, demand: list[int], swap: int = 8, current: list[int] | None = None,
             priority: float = 5) -> dict[str, Any]:
    job: dict[str, Any] = {"id": job_id, "kind": "realtime", "priority": priority,
                           "demand": demand, "swap_limit": swap}
    if current is not None:
        job["current_gpus"] = current
    return job


def plan(policy: str, s: Scenario) -> Grid:
    return gridlib.to_ids(s, POLICIES[policy](s))


def held(grid: Grid, job_id: str) -> list[set[int]]:
    return [{g for g, c in enumerate(row) if c == job_id} for row in grid]


def start_of(grid: Grid, job_id: str) -> tuple[int, int] | None:
    """(start step, first GPU) of a batch job in the grid, None when it is left out."""
    cells = [(t, g) for t, row in enumerate(grid) for g, c in enumerate(row) if c == job_id]
    return (min(t for t, _ in cells), min(g for _, g in cells)) if cells else None


# -- the static peak reservation ------------------------------------------------------------

@pytest.mark.parametrize("policy", BASELINES)
def test_reservation_comes_from_the_top_in_file_order(policy: str) -> None:
    """max(demand) GPUs each, highest free first, first job in the file first, held throughout."""
    s = scenario(8, 2, realtime("a", [1, 3]), realtime("b", [2, 0]))
    grid = plan(policy, s)
    assert held(grid, "a") == [{5, 6, 7}, {5, 6, 7}]
    assert held(grid, "b") == [{3, 4}, {3, 4}]  # the whole reservation, even at demand 0


@pytest.mark.parametrize("policy", BASELINES)
def test_reservation_counts_pinned_running_blocks_as_taken(policy: str) -> None:
    """'Free' means free at every step once running jobs are pinned, even if they end soon."""
    s = scenario(8, 3, batch("run", 4, 3, running=(4, 1)), realtime("rt", [2, 2, 2]),
                 batch("next", 4, 2))
    grid = plan(policy, s)
    assert held(grid, "rt") == [{2, 3}] * 3  # not {6, 7}: those are busy at step 0
    # [0, 4) holds the reservation, so the 4-GPU job waits for the running block to end.
    assert start_of(grid, "next") == (1, 4)


@pytest.mark.parametrize("policy", BASELINES)
def test_a_realtime_job_short_of_gpus_reserves_what_there_is(policy: str) -> None:
    """Less than max(demand) free: take all of it; the next job in the file gets nothing."""
    s = scenario(4, 2, batch("run", 2, 5, running=(0, 5)), realtime("first", [3, 1]),
                 realtime("second", [1, 1]))
    grid = plan(policy, s)
    assert held(grid, "first") == [{2, 3}, {2, 3}]
    assert held(grid, "second") == [set(), set()]


@pytest.mark.parametrize("policy", BASELINES)
def test_current_gpus_kept_and_topped_up_from_the_top_but_not_from_others(policy: str) -> None:
    """Own current GPUs first, then the highest free ones that are no other job's current."""
    s = scenario(8, 3, realtime("a", [3, 3, 3], swap=8, current=[1]),
                 realtime("b", [1, 1, 1], swap=0, current=[7]))
    grid = plan(policy, s)
    assert held(grid, "a") == [{1, 5, 6}] * 3  # 7 is b's current GPU, never a top-up
    assert held(grid, "b") == [{7}] * 3


@pytest.mark.parametrize("policy", BASELINES)
def test_migration_acquires_highest_first_within_the_swap_limit(policy: str) -> None:
    """At most swap_limit changes per step, missing GPUs acquired highest first."""
    s = scenario(8, 3, realtime("a", [4, 4, 4], swap=2, current=[0]))
    grid = plan(policy, s)
    assert held(grid, "a") == [{0, 6, 7}, {0, 5, 6, 7}, {0, 5, 6, 7}]


@pytest.mark.parametrize("policy", BASELINES)
def test_reserved_gpus_not_yet_acquired_stay_idle(policy: str) -> None:
    """GPU 2 is reserved but acquired only at step 1: no batch job may use it at step 0."""
    s = scenario(4, 3, realtime("a", [3, 3, 3], swap=1, current=[0]),
                 batch("x", 1, 1), batch("y", 1, 1))
    grid = plan(policy, s)
    assert held(grid, "a") == [{0, 3}, {0, 2, 3}, {0, 2, 3}]
    assert grid[0][2] is None
    assert start_of(grid, "x") == (0, 1)
    assert start_of(grid, "y") == (1, 1)


@pytest.mark.parametrize("policy", BASELINES)
def test_migration_releases_highest_first_and_frees_gpus_for_batch(policy: str) -> None:
    """Surplus current GPUs go highest first, swap_limit per step; batch may use them after.

    Which current GPUs are kept is the one choice MODEL.md leaves open; the code keeps
    the highest ("from the top", like the top-ups), and this pins that reading.
    """
    s = scenario(4, 4, realtime("a", [1, 1, 1, 1], swap=2, current=[0, 1, 2, 3]),
                 batch("pair", 2, 2))
    grid = plan(policy, s)
    assert held(grid, "a") == [{0, 3}, {3}, {3}, {3}]
    assert start_of(grid, "pair") == (1, 0)  # [0, 2) is free from step 1 on


@pytest.mark.parametrize("policy", BASELINES)
def test_zero_swap_limit_keeps_every_current_gpu(policy: str) -> None:
    """swap_limit 0: the job can release nothing, so its surplus current GPUs stay busy."""
    s = scenario(2, 2, realtime("a", [1, 1], swap=0, current=[0, 1]), batch("x", 1, 1))
    grid = plan(policy, s)
    assert held(grid, "a") == [{0, 1}, {0, 1}]
    assert start_of(grid, "x") is None


# -- batch placement ---------------------------------------------------------------------------

def test_fifo_order_bound_is_the_last_placed_start() -> None:
    """fifo: no job starts before the previous placed one; priority backfills the hole."""
    s = scenario(2, 4, batch("a", 1, 2), batch("b", 2, 1), batch("c", 1, 1))
    fifo = plan("fifo", s)
    assert start_of(fifo, "a") == (0, 0)
    assert start_of(fifo, "b") == (2, 0)
    assert start_of(fifo, "c") == (3, 0)  # bound 2 (b's start); step 2 is full
    assert start_of(plan("priority", s), "c") == (0, 1)


def test_fifo_left_out_job_does_not_block_or_move_the_bound() -> None:
    """A job that fits nowhere is skipped; the bound stays the last placed job's start."""
    s = scenario(4, 4, realtime("rt", [2, 2, 2, 2]), batch("a", 2, 2, arrival=1),
                 batch("x", 4, 1, arrival=2), batch("y", 1, 1, arrival=2))
    grid = plan("fifo", s)
    assert start_of(grid, "a") == (1, 0)
    assert start_of(grid, "x") is None  # never 4 GPUs free beside the reservation
    assert start_of(grid, "y") == (3, 0)


def test_fifo_orders_by_arrival_then_file_position() -> None:
    """Later in the file but earlier to arrive goes first; equal arrivals keep file order."""
    s = scenario(1, 3, batch("late", 1, 1, arrival=1), batch("p", 1, 1), batch("q", 1, 1))
    grid = plan("fifo", s)
    assert [row[0] for row in grid] == ["p", "q", "late"]


@pytest.mark.parametrize("policy", BASELINES)
def test_fits_nowhere_means_no_start_before_the_horizon_end(policy: str) -> None:
    """A run may pass the end, but a job arriving at or after T can never start."""
    s = scenario(2, 3, batch("long", 1, 10, arrival=2), batch("never", 1, 1, arrival=3))
    grid = plan(policy, s)
    assert start_of(grid, "long") == (2, 0)
    assert start_of(grid, "never") is None


def test_priority_ties_by_arrival_then_file_position() -> None:
    """Order (-priority, arrival, file position); fractional priorities compare as numbers."""
    s = scenario(1, 4, batch("p", 1, 1, arrival=1, priority=2), batch("q", 1, 1, priority=2),
                 batch("r", 1, 1, priority=2), batch("s", 1, 1, priority=2.5),
                 batch("low", 1, 1, priority=0.5))
    grid = plan("priority", s)
    assert [row[0] for row in grid] == ["s", "q", "r", "p"]
    assert start_of(grid, "low") is None


def test_priority_has_no_order_bound() -> None:
    """A lower-priority job takes an earlier hole than a higher-priority one (backfill)."""
    s = scenario(2, 3, batch("wide", 2, 1, arrival=1, priority=9), batch("narrow", 1, 1))
    grid = plan("priority", s)
    assert start_of(grid, "wide") == (1, 0)
    assert start_of(grid, "narrow") == (0, 0)


@pytest.mark.parametrize("policy", BASELINES)
def test_earliest_start_beats_a_lower_block(policy: str) -> None:
    """Earliest start first (the high block now), lowest aligned block only among equals."""
    s = scenario(4, 2, batch("run", 2, 1, running=(0, 1)), batch("j", 2, 1), batch("k", 1, 1))
    grid = plan(policy, s)
    assert start_of(grid, "j") == (0, 2)
    assert start_of(grid, "k") == (1, 0)


@pytest.mark.parametrize("policy", BASELINES)
def test_blocks_are_aligned_and_inside_a_cluster_that_is_not_a_power_of_two(policy: str) -> None:
    """G = 6: a 4-GPU job has one block, [0, 4); GPUs 1-2 free never make an aligned pair."""
    s = scenario(6, 3, batch("r0", 1, 2, running=(0, 2)), batch("r3", 1, 1, running=(3, 1)),
                 batch("pair", 2, 1), batch("pair2", 2, 1), batch("four", 4, 1))
    grid = plan(policy, s)
    assert start_of(grid, "four") == (2, 0)
    assert start_of(grid, "pair") == (0, 4)
    assert start_of(grid, "pair2") == (1, 2)  # [0, 2) is busy until step 2, [2, 4) frees at 1


# -- the literal reading, on random scenarios -------------------------------------------------

def reference(s: Scenario, policy: str) -> Grid:
    """MODEL.md's baselines, read sentence by sentence, with plain loops and sets."""
    T, G = s.T, s.G
    grid: Grid = [[None] * G for _ in range(T)]
    busy = [[False] * G for _ in range(T)]
    for job in s.batch_jobs:
        if job.running:
            for t in range(min(job.running.remaining_steps, T)):
                for g in range(job.running.first_gpu, job.running.first_gpu + job.gpus):
                    grid[t][g], busy[t][g] = job.id, True
    taken = {g for g in range(G) if any(busy[t][g] for t in range(T))}
    currents = {g for j in s.realtime_jobs for g in (j.current_gpus or ())}
    for job in s.realtime_jobs:  # file order
        size = max(job.demand)
        own = sorted(job.current_gpus or (), reverse=True)[:size]
        tops = [g for g in reversed(range(G)) if g not in taken and g not in currents]
        reservation = set(own) | set(tops[: size - len(own)])
        taken |= reservation
        now = set(job.current_gpus) if job.current_gpus is not None else set(reservation)
        for t in range(T):
            if job.current_gpus is not None:
                budget = job.swap_limit
                acquire = sorted(reservation - now, reverse=True)[:budget]
                now |= set(acquire)
                release = sorted(now - reservation, reverse=True)[: budget - len(acquire)]
                now -= set(release)
            for g in now:
                grid[t][g], busy[t][g] = job.id, True
            for g in reservation:
                busy[t][g] = True

    def fits(job: BatchJob, start: int, first: int) -> bool:
        return all(not busy[t][g] for t in range(start, min(start + job.duration_steps, T))
                   for g in range(first, first + job.gpus))

    def earliest_lowest(job: BatchJob, earliest: int) -> tuple[int, int] | None:
        for start in range(earliest, T):
            for first in range(0, G - job.gpus + 1, job.gpus):
                if fits(job, start, first):
                    return start, first
        return None

    queued = [(i, j) for i, j in enumerate(s.jobs) if isinstance(j, BatchJob) and not j.running]
    if policy == "fifo":
        queued.sort(key=lambda p: (p[1].arrival_step, p[0]))
    else:
        queued.sort(key=lambda p: (-p[1].priority, p[1].arrival_step, p[0]))
    bound = 0
    for _, job in queued:
        spot = earliest_lowest(job, max(job.arrival_step, bound))
        if spot is None:
            continue
        start, first = spot
        for t in range(start, min(start + job.duration_steps, T)):
            for g in range(first, first + job.gpus):
                grid[t][g], busy[t][g] = job.id, True
        if policy == "fifo":
            bound = start
    return grid


@pytest.mark.parametrize("policy", BASELINES)
@given(s=scenarios())
def test_baselines_equal_the_literal_reading(policy: str, s: Scenario) -> None:
    """The numpy baselines and the sentence-by-sentence reference give the same grid."""
    assert plan(policy, s) == reference(s, policy)


@pytest.mark.parametrize("policy", BASELINES)
@given(s=scenarios())
def test_a_reservation_without_current_gpus_is_one_fixed_set(policy: str, s: Scenario) -> None:
    """Without current_gpus a realtime job holds one fixed set: min(max(demand), what is left)."""
    grid = plan(policy, s)
    for job in s.realtime_jobs:
        if job.current_gpus is None:
            sets = held(grid, job.id)
            assert all(h == sets[0] for h in sets), job.id
            assert len(sets[0]) <= max(job.demand)


@given(s=scenarios())
def test_both_baselines_from_one_start_equal_each_alone(s: Scenario) -> None:
    """fast scores priority and fifo from one shared start (`baselines.both`): the same
    grids as each policy run alone."""
    prio, fifo = baselines.both(s, Jobs.of(s))
    assert np.array_equal(prio, baselines.priority(s))
    assert np.array_equal(fifo, baselines.fifo(s))
