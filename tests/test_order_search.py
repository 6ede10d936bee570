"""What fast's greedy passes and its order search guarantee, whatever order they settle on.

Every candidate order is decoded greedily: each job at its earliest start where an aligned
block is free for its run (cut at the horizon), or left out if there is none. Occupancy
only grows during a pass, so the grid a pass writes, and hence the grid the order search
returns, has two properties that no quality threshold needs to be tight to see:

- **nothing left out has room**: a queued batch job missing from the plan has no aligned
  block free for its run at any start from its arrival, given everything else placed
  (with a reserve: no such block that also leaves the reserved GPUs spare);
- **nothing starts late for no reason**: no placed job could start earlier on any aligned
  block, the other jobs staying where they are (without a reserve).

A search trial that loses a job from the order (docs/testing.md, mutation triage) breaks
the first whenever the lost job would still fit, which is common in contended scenarios.
Both decoders are checked: the compiled one runs its own copy of the search.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from allocator import grid as gridlib
from allocator.model import BatchJob, Scenario
from allocator.policies import decoder
from allocator.policies import fast as fastmod
from allocator.policies.fast import place_batch
from allocator.policies.placement import run_length
from allocator.policies.realtime import place_realtime
from tests.strategies import contended_scenarios, examples

DECODERS = [False] + ([True] if decoder._packc is not None else [])
SEARCHES = (0, 40, 400)  # placements per queued job: none, a little, plenty


def _start(scenario: Scenario) -> np.ndarray:
    """The grid place_batch starts from in fast: running jobs pinned, realtime placed."""
    grid = gridlib.empty(scenario)
    gridlib.pin_running(scenario, grid)
    place_realtime(scenario, grid)
    return grid


def _queued(scenario: Scenario) -> list[int]:
    return [i for i, job in enumerate(scenario.jobs)
            if isinstance(job, BatchJob) and not job.running]


def _room(job: BatchJob, free: np.ndarray, spare: np.ndarray | None,
          starts: range) -> tuple[int, int] | None:
    """A (start, first GPU) among `starts` where `job` fits on `free` cells (and `spare`)."""
    T, G = free.shape
    length = run_length(job)
    for s in starts:
        end = min(s + length, T)
        if spare is not None and (spare[s:end] < job.gpus).any():
            continue
        for first in range(0, G - job.gpus + 1, job.gpus):
            if free[s:end, first : first + job.gpus].all():
                return s, first
    return None


def left_out_with_room(scenario: Scenario, grid: np.ndarray,
                       reserve: np.ndarray | None = None) -> dict[int, tuple[int, int]]:
    """Queued batch jobs absent from `grid` that still fit somewhere: job -> (start, GPU)."""
    free = grid == gridlib.FREE
    spare = None if reserve is None else free.sum(axis=1) - reserve
    placed = set(np.unique(grid[grid >= 0]).tolist())
    out = {}
    for i in _queued(scenario):
        job = scenario.jobs[i]
        if i in placed:
            continue
        spot = _room(job, free, spare, range(job.arrival_step, scenario.T))
        if spot is not None:
            out[i] = spot
    return out


def started_late(scenario: Scenario, grid: np.ndarray) -> dict[int, tuple[int, int]]:
    """Placed queued jobs that could start earlier, the others fixed: job -> (start, GPU)."""
    out = {}
    for i in _queued(scenario):
        steps = np.flatnonzero((grid == i).any(axis=1))
        if not len(steps):
            continue
        start = int(steps[0])
        job = scenario.jobs[i]
        free = (grid == gridlib.FREE) | (grid == i)
        spot = _room(job, free, None, range(job.arrival_step, start))
        if spot is not None:
            out[i] = spot
    return out


def _batch_value(scenario: Scenario, grid: np.ndarray) -> float:
    return gridlib.objective(scenario, grid)  # realtime is fixed: only batch value moves


@settings(max_examples=examples(0.5))
@given(scenario=contended_scenarios())
def test_the_search_leaves_out_only_jobs_that_fit_nowhere(scenario: Scenario) -> None:
    grid = _start(scenario)
    for compiled in DECODERS:
        if compiled and scenario.T > decoder.COMPILED_MAX_T:
            continue
        for search in SEARCHES:
            budget = search * max(1, len(_queued(scenario)))
            out = place_batch(scenario, grid, None, budget, compiled=compiled)
            assert not left_out_with_room(scenario, out), (compiled, search)
            assert not started_late(scenario, out), (compiled, search)


@settings(max_examples=examples(0.5))
@given(scenario=contended_scenarios())
def test_with_a_reserve_the_search_leaves_out_only_jobs_that_fit_nowhere(
        scenario: Scenario) -> None:
    """The realtime reserve (fast's second layout) counts as busy: a job left out has no
    block that also leaves the reserved GPUs spare. (No spill: with one, a job may take
    reserved GPUs, a trade priced by value, not a matter of room.)"""
    grid = _start(scenario)
    reserve = np.arange(scenario.T) % 3
    for compiled in DECODERS:
        if compiled and scenario.T > decoder.COMPILED_MAX_T:
            continue
        for search in SEARCHES:
            budget = search * max(1, len(_queued(scenario)))
            out = place_batch(scenario, grid, reserve, budget, compiled=compiled)
            assert not left_out_with_room(scenario, out, reserve), (compiled, search)


@settings(max_examples=examples(0.5))
@given(scenario=contended_scenarios())
def test_the_search_never_ends_below_the_best_value_order(scenario: Scenario) -> None:
    grid = _start(scenario)
    for compiled in DECODERS:
        if compiled and scenario.T > decoder.COMPILED_MAX_T:
            continue
        greedy = _batch_value(scenario, place_batch(scenario, grid, None, 0, compiled=compiled))
        for search in SEARCHES[1:]:
            budget = search * max(1, len(_queued(scenario)))
            searched = place_batch(scenario, grid, None, budget, compiled=compiled)
            assert _batch_value(scenario, searched) >= greedy - 1e-6, (compiled, search)


@settings(max_examples=examples(0.5))
@given(scenario=contended_scenarios())
def test_the_pair_step_never_ends_below_the_order_search(scenario: Scenario) -> None:
    """Both pair neighbourhoods keep a pass only if it gains (with and without a reserve)."""
    grid = _start(scenario)
    reserve = np.arange(scenario.T) % 3
    for compiled in DECODERS:
        if compiled and scenario.T > decoder.COMPILED_MAX_T:
            continue
        budget = SEARCHES[-1] * max(1, len(_queued(scenario)))
        for kept in (None, reserve):
            saved, fastmod.PAIRS = fastmod.PAIRS, False
            try:
                alone = place_batch(scenario, grid, kept, budget, compiled=compiled)
            finally:
                fastmod.PAIRS = saved
            paired = place_batch(scenario, grid, kept, budget, compiled=compiled)
            assert _batch_value(scenario, paired) >= _batch_value(scenario, alone) - 1e-6


# --- the checks can fail: a search that loses a job, and a pass that starts jobs late ---

def _fixed_scenario() -> Scenario:
    """Four GPUs, four steps; two 2-GPU jobs and a 1-GPU job that all fit."""
    from allocator.scenario_io import scenario_from_dict

    jobs = [{"id": f"b{k}", "kind": "training", "priority": 1.0, "gpus": g,
             "duration_steps": d, "arrival_step": 0}
            for k, (g, d) in enumerate([(2, 4), (2, 2), (1, 3)])]
    return scenario_from_dict({
        "name": "fixed", "cluster": {"gpus": 4, "horizon_steps": 4, "node_size": 4,
                                     "step_minutes": 60},
        "weights": {"realtime_penalty": 1.0, "decay": 1.0}, "jobs": jobs})


def test_the_checks_see_a_lost_job_and_a_late_start() -> None:
    scenario = _fixed_scenario()
    grid = place_batch(scenario, _start(scenario), None, 0)
    assert grid.tolist() == [[0, 0, 1, 1], [0, 0, 1, 1], [0, 0, 2, -1], [0, 0, 2, -1]]
    assert not left_out_with_room(scenario, grid) and not started_late(scenario, grid)
    lost = grid.copy()
    lost[lost == 2] = gridlib.FREE  # the 1-GPU job dropped: it fits from step 2 on GPU 2
    assert left_out_with_room(scenario, lost) == {2: (2, 2)}
    late = lost.copy()
    late[3, 3] = 2  # the same job one step later on GPU 3, cut at the horizon: legal, late
    assert not left_out_with_room(scenario, late)
    assert started_late(scenario, late) == {2: (2, 2)}


def _dropping_search(scenario, empty, order, best, packs):
    """A search whose accepted trial lost the last job of the order (any decoder)."""
    trial = empty.copy()
    trial.pack(order[:-1])
    return trial, tuple(order)


def test_a_search_that_loses_a_job_fails_the_property(monkeypatch: pytest.MonkeyPatch) -> None:
    """The property above, run on a search that loses a job, finds a counterexample."""
    monkeypatch.setattr(fastmod, "improve_order", _dropping_search)
    with pytest.raises(AssertionError):
        test_the_search_leaves_out_only_jobs_that_fit_nowhere()


# --- place_batch's own switches: the decoder chosen, and the spill price passed on ---

def test_place_batch_runs_the_python_decoder_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    class NoCompiledDecoder:
        def __getattr__(self, name: str) -> None:
            raise AssertionError(f"the compiled decoder ran ({name})")

    scenario = _fixed_scenario()
    expected = place_batch(scenario, _start(scenario), None, 100, compiled=False)
    monkeypatch.setattr(decoder, "_packc", NoCompiledDecoder())
    assert np.array_equal(place_batch(scenario, _start(scenario), None, 100, compiled=False),
                          expected)


def _one_pair_job(steps: int, duration: int, decay: float) -> Scenario:
    """Two GPUs and one 2-GPU job of priority 1 from step 0: a spill case."""
    from allocator.scenario_io import scenario_from_dict

    return scenario_from_dict({
        "name": "spill", "cluster": {"gpus": 2, "horizon_steps": steps, "node_size": 2,
                                     "step_minutes": 60},
        "weights": {"realtime_penalty": 1.0, "decay": decay},
        "jobs": [{"id": "b", "kind": "training", "priority": 1.0, "gpus": 2,
                  "duration_steps": duration, "arrival_step": 0}]})


@pytest.mark.parametrize("compiled", DECODERS)
def test_a_job_takes_reserved_gpus_only_when_spilling_is_priced_in(compiled: bool) -> None:
    """Two GPUs, one of them reserved every step: a 2-GPU job fits only by spilling onto
    the reserve, which a zero price allows and no price (-1) forbids."""
    scenario = _one_pair_job(steps=2, duration=2, decay=1.0)
    grid, reserve = _start(scenario), np.ones(2, dtype=np.int64)
    kept = place_batch(scenario, grid, reserve, 100, compiled=compiled, spill=-1.0)
    spilled = place_batch(scenario, grid, reserve, 100, compiled=compiled, spill=0.0)
    assert (kept == gridlib.FREE).all()
    assert (spilled == 0).all()


@pytest.mark.parametrize("compiled", DECODERS)
def test_a_spilling_job_takes_the_start_that_earns_most_net_of_its_price(
        compiled: bool) -> None:
    """Reserved GPUs at steps 0 and 2 only: from step 0 the job takes two reserved
    GPU-steps, from step 1 one, from step 3 none. At a price of 1.0 a GPU-step, step 1
    earns most net of it (4.88 - 1 against 5.42 - 2, and 1.46 keeping the reserve); the
    earliest spilling start alone would have been step 0."""
    scenario = _one_pair_job(steps=4, duration=3, decay=0.9)
    grid, reserve = _start(scenario), np.array([1, 0, 1, 0], dtype=np.int64)
    placed = place_batch(scenario, grid, reserve, 100, compiled=compiled, spill=1.0)
    assert (placed[1:] == 0).all() and (placed[0] == gridlib.FREE).all()
    kept = place_batch(scenario, grid, reserve, 100, compiled=compiled, spill=-1.0)
    assert (kept[3] == 0).all() and (kept[:3] == gridlib.FREE).all()


@pytest.mark.parametrize("name", ["fifo", "priority"])
def test_the_baselines_run_the_python_decoder_when_asked(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from allocator.policies import baselines

    class NoCompiledDecoder:
        def __getattr__(self, attr: str) -> None:
            raise AssertionError(f"the compiled decoder ran ({attr})")

    scenario = _fixed_scenario()
    expected = getattr(baselines, name)(scenario, compiled=False)
    monkeypatch.setattr(decoder, "_packc", NoCompiledDecoder())
    assert np.array_equal(getattr(baselines, name)(scenario, compiled=False), expected)
