"""Re-cuts (allocator/policies/recut.py): two overlapping runs of one service trade ends
or starts; no step's held count or swaps change for the worse, the plans stay legal and
never fall below the plan without them."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import event, given, settings

from allocator import grid as gridlib
from allocator.model import RealtimeJob, Scenario
from allocator.policies import fast as fastlib
from allocator.policies import recut
from allocator.policies.decoder import _packc
from allocator.policies.fast import fast
from allocator.policies.hops import layout
from allocator.scenario_io import load_scenario
from allocator.validator import violations
from tests.plan_checks import legal_and_above_without
from tests.strategies import contended_scenarios, examples, family_scenarios

FAMILY = family_scenarios()  # the generated family (tests/strategies.py)
needs_c = pytest.mark.skipif(_packc is None, reason="the C decoder was not built")
CASES = Path(__file__).parent / "data" / "quality_cases"


def _held(cells: np.ndarray, job: int) -> list[set[int]]:
    return [set(np.flatnonzero(row == job).tolist()) for row in cells]


def _swaps(held: list[set[int]]) -> list[int]:
    return [len(a ^ b) for a, b in itertools.pairwise(held)]


def test_the_cut_that_frees_a_block_is_tried_first() -> None:
    scenario = load_scenario(CASES / "recut_wins.json")
    service = next(i for i, job in enumerate(scenario.jobs) if isinstance(job, RealtimeJob))
    cells = gridlib.empty(scenario)[:, :4]
    cells[0:12, 0] = service  # the base run on GPU 0, a rise on GPU 3 over steps 4-9
    cells[4:10, 3] = service
    cells[:, 2] = service  # a second layer all day on GPU 2
    # trading ends with GPU 3 frees the 2-block 0-1 over steps 10-11, where GPU 3's block
    # is broken anyway; the first cut found (GPU 0's end traded with GPU 2's) frees 2-3
    # but breaks 0-1 over steps 12-23: nothing gained
    found = recut.cuts(scenario, cells)
    assert (found[0].off, found[0].onto) == (2, 0)
    first = recut.ranked(scenario, cells)[0]
    assert (first.off, first.onto, first.window) == (0, 3, (10, 12))


def test_the_ends_of_a_nested_run_are_traded() -> None:
    scenario = load_scenario(CASES / "recut_wins.json")
    service = next(i for i, job in enumerate(scenario.jobs) if isinstance(job, RealtimeJob))
    batch = next(i for i, job in enumerate(scenario.jobs) if not isinstance(job, RealtimeJob))
    cells = gridlib.empty(scenario)[:, :3]
    cells[0:10, 0] = service  # the base run on GPU 0, a rise held on GPU 1 over steps 4-7
    cells[4:8, 1] = service
    cells[8:12, 2] = batch  # (GPU 2 is busy: a third GPU plays no part)
    out = list(recut.recuts(scenario, cells))
    assert len(out) == 1  # the starts stay: a trade of them would move step 0's GPU
    expected = gridlib.empty(scenario)[:, :3]
    expected[0:8, 0] = service  # GPU 0 let go when the rise ends, GPU 1 kept to step 10
    expected[4:10, 1] = service
    expected[8:12, 2] = batch
    np.testing.assert_array_equal(out[0], expected)


@settings(max_examples=examples(0.3), deadline=None)
@given(scenario=FAMILY | contended_scenarios(max_gpus=16))
def test_a_recut_keeps_every_step_s_count_and_spends_no_swap(scenario: Scenario) -> None:
    cells = layout(scenario, fast(scenario))
    services = [i for i, job in enumerate(scenario.jobs) if isinstance(job, RealtimeJob)]
    found = 0
    for cut in recut.recuts(scenario, cells):
        found += 1
        others = ~np.isin(cells, services)  # running jobs and free cells
        np.testing.assert_array_equal(cut[others & (cells >= 0)], cells[others & (cells >= 0)])
        for i in services:
            before, after = _held(cells, i), _held(cut, i)
            assert [len(s) for s in after] == [len(s) for s in before]
            assert after[0] == before[0]  # step 0's GPUs: its swaps against current GPUs
            assert all(a <= b for a, b in zip(_swaps(after), _swaps(before), strict=True))
    event("re-cuts offered" if found else "no overlapping runs")


@needs_c
@pytest.mark.parametrize(("constant", "rounds", "options"),
                         [("RECUT_ROUNDS", fastlib.RECUT_ROUNDS, {"hops": 1}),
                          ("HOT_RECUT_ROUNDS", 1, {})])
@settings(max_examples=examples(0.2), deadline=None)
@given(scenario=FAMILY | contended_scenarios(max_gpus=16, max_steps=16))
def test_recuts_are_legal_and_never_lower_the_plan(constant: str, rounds: int,
                                                  options: dict[str, int],
                                                  scenario: Scenario) -> None:
    """With the hops (plan-day's setting), and on the hot path where it is off by default."""
    legal_and_above_without(scenario, "re-cuts", (constant, 0, rounds), **options)


@needs_c
@pytest.mark.usefixtures("no_rebuilds", "no_walk")
def test_a_recut_reaches_the_optimum_here() -> None:
    """Tuning seed 1165 (14 GPUs, one service with swap limit 1 and several rises): the
    hops leave the service's rises let go on the GPUs the batch work wants; traded ends
    reach the proven optimum."""
    scenario = load_scenario(CASES / "recut_wins.json")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fastlib, "RECUT_ROUNDS", 0)
        without = gridlib.objective(scenario, fast(scenario, hops=1))
    grid = fast(scenario, hops=1)
    assert violations(scenario, gridlib.to_ids(scenario, grid)) == []
    assert without == pytest.approx(980.82, abs=0.01)
    assert gridlib.objective(scenario, grid) == pytest.approx(1002.88, abs=0.01)
