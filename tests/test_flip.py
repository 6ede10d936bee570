"""The flipped drift layouts (`fast(flip=True)`, `drift_layout(..., until)`).

Every layer layout prefers the tail and the broken blocks for services from step 0. The
flipped drift layout turns the rank over until a step: services first sit on the aligned
blocks, so batch work that starts now takes the tail, then walk out at their swap limit's
pace. fast judges the best of these plans beside its own after the light rounds and keeps
the better, so a plan with them is never lower than the plan without.
"""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from allocator import grid as gridlib
from allocator.model import BatchJob, Cluster, RealtimeJob, Scenario, Weights
from allocator.policies import drift as drift_module
from allocator.policies.decoder import _packc
from allocator.policies.drift import drift_layout
from allocator.policies.fast import fast
from allocator.policies.realtime import RealtimePlacer
from allocator.scenario_io import load_scenario
from allocator.validator import violations
from tests.plan_checks import assert_realtime_laid
from tests.strategies import contended_scenarios, examples

CASES = Path(__file__).parent / "data" / "quality_cases"
# full's proven optimum of flip_wins.json (benchmarks/bench_quality.py's tuning2 seed 1082,
# benchmarks/stored/full30-tuning2.json: status "optimal").
FLIP_OPTIMUM = 742.755


def _base(scenario: Scenario) -> np.ndarray:
    base = gridlib.empty(scenario)
    gridlib.pin_running(scenario, base)
    return base


def test_a_service_sits_on_the_block_first_and_walks_out_after() -> None:
    """12 GPUs, an 8-GPU job queued, a 2-GPU service at swap limit 2: unflipped it takes
    the tail (10-11) from step 0; flipped until step 4 it holds block 0-7 first (GPUs 0
    and 1, the rank turned over) and from step 4 swaps one GPU a step into the tail."""
    jobs = (RealtimeJob(id="s", priority=5.0, demand=(2,) * 8, swap_limit=2),
            BatchJob(id="big", kind="training", priority=1.0, gpus=8, duration_steps=2))
    scenario = Scenario(cluster=Cluster(gpus=12, horizon_steps=8), weights=Weights(),
                        jobs=jobs)
    base = _base(scenario)
    placer = RealtimePlacer(scenario, base.copy())
    plain = drift_layout(scenario, base, placer)
    flipped = drift_layout(scenario, base, placer, until=4)
    held = [set(np.flatnonzero(flipped[t] == 0).tolist()) for t in range(8)]
    assert set(np.flatnonzero(plain[0] == 0).tolist()) <= set(range(8, 12))
    assert held[:4] == [{0, 1}] * 4
    assert len(held[4] & set(range(8))) == 1 and held[5] <= set(range(8, 12))
    assert violations(scenario, gridlib.to_ids(scenario, flipped)) == []


@pytest.mark.usefixtures("no_rebuilds")
def test_the_flipped_layout_frees_the_tail_for_a_4_gpu_job() -> None:
    """12 GPUs, 25 jobs, three 8-GPU ones: on every layer layout the services hold the
    tail (GPUs 10-11) all day and the 4-GPU train-10 waits for block 0-3 (712.57). Flipped,
    the services start on GPUs 0-1 and train-10 runs on the tail block 8-11 from step 1:
    725.57, 97.7% of the proven optimum."""
    scenario = load_scenario(CASES / "flip_wins.json")
    without = gridlib.objective(scenario, fast(scenario, flip=False))
    plan = fast(scenario, flip=True)
    assert without == pytest.approx(712.5741, abs=1e-3)
    assert gridlib.objective(scenario, plan) == pytest.approx(725.5689, abs=1e-3)
    assert gridlib.objective(scenario, plan) <= FLIP_OPTIMUM + 1e-6
    assert gridlib.objective(scenario, fast(scenario)) == pytest.approx(725.5689, abs=1e-3)
    train_10 = gridlib.to_ids(scenario, plan)
    assert {g for row in train_10 for g, c in enumerate(row) if c == "train-10"} == \
        {8, 9, 10, 11}


def test_a_horizon_shorter_than_every_flip_step_makes_none() -> None:
    """Two steps, the first flip step 2: no flipped layout is made, and the plan is the
    one made without them."""
    jobs = (RealtimeJob(id="s", priority=5.0, demand=(2, 2), swap_limit=2),
            BatchJob(id="big", kind="training", priority=1.0, gpus=8, duration_steps=2))
    scenario = Scenario(cluster=Cluster(gpus=12, horizon_steps=2), weights=Weights(),
                        jobs=jobs)
    assert np.array_equal(fast(scenario, flip=True), fast(scenario, flip=False))


@settings(max_examples=examples(0.5), deadline=None)
@given(scenario=contended_scenarios(max_gpus=12, max_steps=8, max_realtime=4, max_swap=3),
       until=st.integers(0, 9))
def test_flipped_layouts_and_plans_are_legal_and_never_lower(scenario: Scenario,
                                                              until: int) -> None:
    """A flipped layout keeps every swap limit and takes free cells only, for realtime;
    fast's plan with the flipped layouts is legal and earns at least the plan without."""
    base = _base(scenario)
    grid = drift_layout(scenario, base, RealtimePlacer(scenario, base.copy()), until)
    assert_realtime_laid(scenario, base, grid)
    plan = fast(scenario, flip=True)
    assert violations(scenario, gridlib.to_ids(scenario, plan)) == []
    assert gridlib.objective(scenario, plan) >= \
        gridlib.objective(scenario, fast(scenario, flip=False)) - 1e-6


@pytest.mark.skipif(_packc is None, reason="the C extension is not built")
@settings(max_examples=examples(1.0), deadline=None)
@given(scenario=contended_scenarios(max_gpus=12, max_steps=8, max_realtime=4, max_swap=3),
       until=st.integers(1, 9), data=st.data())
def test_the_compiled_flipped_layout_is_the_reference(scenario: Scenario, until: int,
                                                      data: st.DataObject) -> None:
    """`_packc.drift` with `until` against `_drift_layout_py`: the same grid, cell for cell,
    under realtime's own rank and under a drawn rank full of ties (the flipped rank's ties
    are the same GPUs', in the same order)."""
    base = _base(scenario)
    placer = RealtimePlacer(scenario, base.copy())
    if data.draw(st.booleans(), label="tied rank"):
        placer.rank = np.array(data.draw(st.lists(st.integers(0, 2), min_size=scenario.G,
                                                  max_size=scenario.G)), dtype=np.float64)
    compiled = drift_layout(scenario, base, placer, until)
    with mock.patch.object(drift_module, "_packc", None):
        assert np.array_equal(compiled, drift_layout(scenario, base, placer, until))
