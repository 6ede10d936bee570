"""fast's block clearing (allocator/policies/rtmove.py): legal, never worse, and it moves a
service out of the block a delayed job needs, within the service's swap limit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from allocator import grid as gridlib
from allocator import reservations
from allocator.model import BatchJob, Cluster, RealtimeJob, Running, Scenario
from allocator.policies import baselines, rtmove
from allocator.policies import fast as fastmod
from allocator.policies.decoder import Jobs
from allocator.validator import violations
from tests.strategies import examples, scenarios


@pytest.fixture
def eager(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every delayed job is worth trials, on any queue: the step runs wherever it can."""
    monkeypatch.setattr(rtmove, "MIN_QUEUE", 0)
    monkeypatch.setattr(rtmove, "MIN_LOSS", 0.0)
    monkeypatch.setattr(rtmove, "TRIALS", 8)
    monkeypatch.setattr(rtmove, "SCREENS", 16)
    monkeypatch.setattr(rtmove, "WINDOWS", 2)


def _clear(scenario: Scenario, grid: np.ndarray) -> np.ndarray:
    return rtmove.clear_blocks(scenario, grid, Jobs.of(scenario), reservations.holds(scenario),
                               100, fastmod.place_batch)


@settings(max_examples=examples(0.5), deadline=None)
@given(scenario=scenarios())
def test_cleared_grids_are_legal_and_never_worse(scenario: Scenario) -> None:
    """From fast's own grid, and from the baselines' (realtime held as a peak, batch work
    in a plain order: more delayed jobs, so more windows cleared)."""
    saved = rtmove.MIN_QUEUE, rtmove.MIN_LOSS, rtmove.TRIALS, rtmove.SCREENS
    try:
        rtmove.MIN_QUEUE, rtmove.MIN_LOSS, rtmove.TRIALS, rtmove.SCREENS = 0, 0.0, 8, 16
        starts = [fastmod.fast(scenario)]
        if not scenario.reservations:  # the baselines know nothing of reservations
            starts += [baselines.fifo(scenario), baselines.priority(scenario)]
        pairs = [(before, _clear(scenario, before)) for before in starts]
    finally:
        rtmove.MIN_QUEUE, rtmove.MIN_LOSS, rtmove.TRIALS, rtmove.SCREENS = saved
    for before, after in pairs:
        assert violations(scenario, gridlib.to_ids(scenario, after)) == []
        assert gridlib.objective(scenario, after) >= gridlib.objective(scenario, before) - 1e-9


def _case(current: tuple[int, ...] | None, swap_limit: int) -> tuple[Scenario, np.ndarray]:
    """Four GPUs, four steps: a service on GPU 1 all day, inside the only free 2-GPU block
    (GPU 3 runs a job, GPU 2 is free), so a 2-GPU job waits for nothing else."""
    scenario = Scenario(
        cluster=Cluster(gpus=4, horizon_steps=4),
        jobs=(
            RealtimeJob("serve", 1.0, (1, 1, 1, 1), swap_limit, current),
            BatchJob("pair", "train", 5.0, 2, 2),
            BatchJob("held", "train", 1.0, 1, 4, running=Running(3, 4)),
        ),
    )
    grid = gridlib.empty(scenario)
    gridlib.pin_running(scenario, grid)
    grid[:, 1] = 0  # the service; "pair" is left out
    return scenario, grid


def test_a_service_moves_out_of_the_block_a_job_needs(eager: None) -> None:
    scenario, grid = _case(None, 2)
    out = _clear(scenario, grid)
    assert violations(scenario, gridlib.to_ids(scenario, out)) == []
    assert (out[0:2, 0:2] == 1).all()  # "pair" runs at once on GPUs 0-1
    assert ((out == 0).sum(axis=1) >= 1).all()  # the service keeps its demand


def test_a_move_at_the_swap_limit_hands_over_a_step_later(eager: None) -> None:
    # The service holds GPU 1 now and may change one GPU a step: leaving it at step 0
    # for GPU 2 would change two, so it holds both at step 0 and "pair" starts at 1.
    scenario, grid = _case((1,), 1)
    out = _clear(scenario, grid)
    assert violations(scenario, gridlib.to_ids(scenario, out)) == []
    assert (out[1:3, 0:2] == 1).all()
    assert out[0, 1] == 0 and out[0, 2] == 0


@settings(max_examples=examples(0.3), deadline=None)
@given(scenario=scenarios())
def test_fast_with_step_six_is_legal_and_never_worse(scenario: Scenario) -> None:
    """`fast(clear_blocks=True)` (`plan --clear-blocks`) keeps fast's plan or improves it."""
    plain = fastmod.fast(scenario)
    cleared = fastmod.fast(scenario, clear_blocks=True)
    assert violations(scenario, gridlib.to_ids(scenario, cleared)) == []
    assert gridlib.objective(scenario, cleared) >= gridlib.objective(scenario, plain) - 1e-9
