"""The judge itself: one hand-built illegal grid per rule, and metrics worked out by hand.

Every other test trusts `violations` and `compute_metrics`, so they are pinned here
on grids small enough to read, with the expected numbers written from MODEL.md.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from allocator import grid as gridlib
from allocator.policies import POLICIES
from allocator.scenario_io import scenario_from_dict
from allocator.validator import Metrics, compute_metrics, metrics_agree, violations
from tests.strategies import scenarios

_ = None  # an empty cell, so that grids read as pictures


def scenario(G: int, T: int, *jobs: dict[str, Any], **weights: float):
    return scenario_from_dict({"cluster": {"gpus": G, "horizon_steps": T},
                               "weights": weights or None, "jobs": list(jobs)})


A = {"id": "a", "kind": "training", "priority": 1, "gpus": 2, "duration_steps": 2,
     "arrival_step": 1}
BATCH = scenario(4, 4, A)
R = {"id": "r", "kind": "quantization", "priority": 1, "gpus": 2, "duration_steps": 4,
     "arrival_step": 3, "running": {"first_gpu": 2, "remaining_steps": 2}}
RUNNING = scenario(4, 3, R)
RT = {"id": "rt", "kind": "realtime", "priority": 1, "demand": [1, 2, 2], "swap_limit": 1,
      "current_gpus": [3]}
REALTIME = scenario(4, 3, RT)


def test_legal_grids_pass() -> None:
    """The baseline pictures the illegal ones are edited from are themselves legal."""
    assert violations(BATCH, [[_, _, _, _], ["a", "a", _, _], ["a", "a", _, _],
                              [_, _, _, _]]) == []
    assert violations(BATCH, [[_, _, _, _], [_, _, _, _], [_, _, _, _],
                              [_, _, "a", "a"]]) == []  # runs past the horizon's end
    assert violations(BATCH, [[_] * 4] * 4) == []  # a batch job may be left out
    assert violations(RUNNING, [[_, _, "r", "r"], [_, _, "r", "r"], [_, _, _, _]]) == []
    assert violations(REALTIME, [[_, _, _, "rt"], [_, _, "rt", "rt"],
                                 [_, _, "rt", "rt"]]) == []


BAD_BATCH = {
    "wrong block size (too few)": [[_, _, _, _], ["a", _, _, _], ["a", _, _, _], [_] * 4],
    "wrong block size (too many)": [[_, _, _, _], ["a", "a", "a", _], ["a", "a", "a", _],
                                    [_] * 4],
    "misaligned block": [[_, _, _, _], [_, "a", "a", _], [_, "a", "a", _], [_] * 4],
    "non-contiguous block": [[_, _, _, _], ["a", _, "a", _], ["a", _, "a", _], [_] * 4],
    "start before arrival": [["a", "a", _, _], ["a", "a", _, _], [_] * 4, [_] * 4],
    "interruption": [[_] * 4, ["a", "a", _, _], [_] * 4, ["a", "a", _, _]],
    "stops early": [[_] * 4, ["a", "a", _, _], [_] * 4, [_] * 4],
    "runs too long": [[_] * 4, ["a", "a", _, _], ["a", "a", _, _], ["a", "a", _, _]],
    "block change mid-run": [[_] * 4, ["a", "a", _, _], [_, _, "a", "a"], [_] * 4],
    "grows mid-run": [[_] * 4, ["a", "a", _, _], ["a", "a", "a", _], [_] * 4],
}


@pytest.mark.parametrize("grid", BAD_BATCH.values(), ids=BAD_BATCH.keys())
def test_each_batch_rule_is_caught(grid: list[list[str | None]]) -> None:
    """Constraints 2, 3, 5 and the arrival rule, one broken at a time, naming the job."""
    found = violations(BATCH, grid)
    assert found, "illegal grid accepted"
    assert all(p.startswith("a:") for p in found), found


BAD_RUNNING = {
    "moved": [["r", "r", _, _], ["r", "r", _, _], [_] * 4],
    "shortened": [[_, _, "r", "r"], [_] * 4, [_] * 4],
    "lengthened": [[_, _, "r", "r"]] * 3,
    "missing": [[_] * 4] * 3,
    "started late": [[_] * 4, [_, _, "r", "r"], [_, _, "r", "r"]],
    "half its block": [[_, _, _, "r"], [_, _, _, "r"], [_] * 4],
}


@pytest.mark.parametrize("grid", BAD_RUNNING.values(), ids=BAD_RUNNING.keys())
def test_running_jobs_must_stay_pinned(grid: list[list[str | None]]) -> None:
    """A running job holds its block from step 0 for remaining_steps, whatever its arrival."""
    found = violations(RUNNING, grid)
    assert found, "illegal grid accepted"
    assert all(p.startswith("r:") for p in found), found


BAD_SWAPS = {
    "too many changes at t > 0": [[_, _, _, "rt"], ["rt", "rt", _, "rt"],
                                  ["rt", "rt", _, "rt"]],
    "moves at t > 0 (drop one, add one)": [[_, _, _, "rt"], [_, _, "rt", "rt"],
                                           [_, "rt", _, "rt"]],
    "moves at t = 0 against current_gpus": [[_, _, "rt", _], [_, _, "rt", "rt"],
                                            [_, _, "rt", "rt"]],
    "grows by two at t = 0": [[_, "rt", "rt", "rt"], [_, "rt", "rt", "rt"],
                              [_, "rt", "rt", "rt"]],
}


@pytest.mark.parametrize("grid", BAD_SWAPS.values(), ids=BAD_SWAPS.keys())
def test_swap_limit_is_enforced(grid: list[list[str | None]]) -> None:
    """Constraint 4: |A[t] xor A[t-1]| <= swap_limit, and at t = 0 against current_gpus."""
    found = violations(REALTIME, grid)
    assert found and all("rt:" in p and "constraint 4" in p for p in found), found


def test_swap_is_free_at_step_zero_without_current_gpus() -> None:
    """No current_gpus: whatever the job holds at step 0 is a fresh start."""
    s = scenario(4, 2, {**RT, "current_gpus": None, "demand": [3, 3]})
    assert violations(s, [["rt", "rt", "rt", _], ["rt", "rt", "rt", _]]) == []
    assert violations(s, [["rt", "rt", "rt", _], [_, _, _, "rt"]])  # but t = 1 still counts


def test_empty_current_gpus_constrains_step_zero() -> None:
    """current_gpus = [] is given (holding nothing): step 0 may add at most swap_limit."""
    s = scenario(4, 1, {**RT, "current_gpus": [], "demand": [2]})
    assert violations(s, [["rt", _, _, _]]) == []
    assert violations(s, [["rt", "rt", _, _]])


@pytest.mark.parametrize("grid", [
    [[_] * 4] * 3,  # T - 1 rows
    [[_] * 4] * 5,  # T + 1 rows
    [[_] * 4, [_] * 5, [_] * 4, [_] * 4],  # a row too long
    [[_] * 4, [_] * 3, [_] * 4, [_] * 4],  # a row too short
], ids=["too few rows", "too many rows", "long row", "short row"])
def test_wrong_grid_shape_is_caught(grid: list[list[str | None]]) -> None:
    """A plan from elsewhere may be any shape; the judge must say so, not crash."""
    assert violations(BATCH, grid)
    with pytest.raises(ValueError):
        compute_metrics(BATCH, grid)


def test_unknown_job_id_is_caught() -> None:
    """A cell naming no job in the scenario is illegal (and has no metrics)."""
    grid = [[_] * 4, ["a", "a", _, "ghost"], ["a", "a", _, _], [_] * 4]
    found = violations(BATCH, grid)
    assert found and "ghost" in found[0]
    with pytest.raises(ValueError, match="ghost"):
        compute_metrics(BATCH, grid)


# -- metrics ----------------------------------------------------------------------------------

def test_metrics_on_a_hand_computed_grid() -> None:
    """Every metric of MODEL.md's table, computed by hand for a 4-GPU, 2-step grid.

    a: p=3, 2 GPUs, runs t0-t1 (complete)    value 3*2*2 = 12, objective 3*2*(1 + .5) = 9
    b: p=1.5, 1 GPU, starts t1, needs 3 steps value 1.5,       objective 1.5*.5 = .75
    r: p=2, running 1 GPU, 1 step left        value 2,         objective 2
    rt: p=4, demand [0, 2], holds 1 GPU each step: served 0 + 1, shortfall 0 + 1
    utilization (6 batch cells + 1 served) / 8; objective 9 + .75 + 2 - 2*4*1 = 3.75
    """
    s = scenario(
        4, 2,
        {"id": "a", "kind": "training", "priority": 3, "gpus": 2, "duration_steps": 2},
        {"id": "b", "kind": "quantization", "priority": 1.5, "gpus": 1, "duration_steps": 3},
        {"id": "r", "kind": "batch_inference", "priority": 2, "gpus": 1, "duration_steps": 5,
         "running": {"first_gpu": 3, "remaining_steps": 1}},
        {"id": "rt", "kind": "realtime", "priority": 4, "demand": [0, 2], "swap_limit": 2},
        decay=0.5, realtime_penalty=2.0,
    )
    grid = [["a", "a", "rt", "r"], ["a", "a", "b", "rt"]]
    assert violations(s, grid) == []
    m = compute_metrics(s, grid)
    assert m.utilization == pytest.approx(7 / 8)
    assert m.value == pytest.approx(15.5)
    assert m.rt_shortfall == 1
    assert m.completed == 2
    assert m.objective == pytest.approx(3.75)


def test_metrics_of_a_running_job_longer_than_the_horizon() -> None:
    """remaining_steps > T: it fills the horizon, earns decayed value, and is not completed."""
    s = scenario(1, 2, {"id": "r", "kind": "training", "priority": 1, "gpus": 1,
                        "duration_steps": 3,
                        "running": {"first_gpu": 0, "remaining_steps": 3}}, decay=0.9)
    m = compute_metrics(s, [["r"], ["r"]])
    assert m == Metrics(utilization=1.0, value=2.0, rt_shortfall=0, completed=0,
                        objective=pytest.approx(1.9))


def test_metrics_of_an_empty_grid_with_unmet_demand() -> None:
    """Nothing held: shortfall is all demand (even demand > G), undecayed in the objective."""
    s = scenario(2, 3, {"id": "rt", "kind": "realtime", "priority": 0.5, "demand": [1, 3, 0],
                        "swap_limit": 0}, decay=0.5, realtime_penalty=8.0)
    m = compute_metrics(s, [[_, _]] * 3)
    assert (m.utilization, m.value, m.rt_shortfall, m.completed) == (0.0, 0.0, 4, 0)
    assert m.objective == pytest.approx(-8.0 * 0.5 * 4)


def test_metrics_agree_uses_the_contract_tolerance() -> None:
    """Relative 1e-6 on floats; completed exact; a missing or boolean metric is wrong."""
    actual = Metrics(utilization=0.5, value=1000.0, rt_shortfall=3, completed=2,
                     objective=-40.0)
    same = actual.as_dict()
    assert metrics_agree(same, actual) == []
    assert metrics_agree({**same, "value": 1000.0005}, actual) == []
    assert metrics_agree({**same, "value": 1000.002}, actual)
    assert metrics_agree({**same, "utilization": 0.5 + 5e-7}, actual) == []
    assert metrics_agree({**same, "utilization": 0.5 + 2e-6}, actual)
    assert metrics_agree({**same, "completed": 3}, actual)
    assert metrics_agree({**same, "rt_shortfall": 4}, actual)
    assert metrics_agree({k: v for k, v in same.items() if k != "objective"}, actual)
    assert metrics_agree({**same, "completed": True}, actual)


# -- the judge against an independent reading, on random grids -----------------------------------

def legal_by_hand(s, rows: list[list[str | None]]) -> bool:
    """Legality read off the grid as rectangles and set differences, with no shared code."""
    if len(rows) != s.T or any(len(r) != s.G for r in rows):
        return False
    known = {j.id for j in s.jobs}
    if any(c is not None and c not in known for r in rows for c in r):
        return False
    for j in s.jobs:
        cells = {(t, g) for t, r in enumerate(rows) for g, c in enumerate(r) if c == j.id}
        if j.kind == "realtime":
            sets = [{g for (u, g) in cells if u == t} for t in range(s.T)]
            before = set(j.current_gpus) if j.current_gpus is not None else None
            for now in sets:
                if before is not None and len(now ^ before) > j.swap_limit:
                    return False
                before = now
            continue
        if not cells:
            if j.running:
                return False
            continue
        start = min(t for t, _ in cells)
        first = min(g for t, g in cells if t == start)
        if j.running:
            length = j.running.remaining_steps
            if (start, first) != (0, j.running.first_gpu):
                return False
        else:
            length = j.duration_steps
            if start < j.arrival_step or first % j.gpus:
                return False
        want = {(t, g) for t in range(start, min(start + length, s.T))
                for g in range(first, first + j.gpus)}
        if cells != want:
            return False
    return True


@st.composite
def mutated_plans(draw):
    """A legal plan from some policy, then one to three cells overwritten at random."""
    s = draw(scenarios(max_gpus=8, max_steps=8))
    policy = draw(st.sampled_from(sorted(p for p in POLICIES if p != "full")))
    rows = gridlib.to_ids(s, POLICIES[policy](s))
    choices = [None, *(j.id for j in s.jobs)]
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        t = draw(st.integers(0, s.T - 1))
        g = draw(st.integers(0, s.G - 1))
        rows[t][g] = draw(st.sampled_from(choices))
    return s, rows


@given(case=mutated_plans())
def test_validator_agrees_with_an_independent_reading(case) -> None:
    """On legal plans and near-misses alike, violations() is empty exactly when legal."""
    s, rows = case
    assert (violations(s, rows) == []) == legal_by_hand(s, rows)


@given(s=scenarios(max_gpus=8, max_steps=8))
def test_metrics_agree_with_an_independent_count(s) -> None:
    """Every metric of every policy's grid, recounted cell by cell from MODEL.md's table."""
    for policy in sorted(p for p in POLICIES if p != "full"):
        rows = gridlib.to_ids(s, POLICIES[policy](s))
        m = compute_metrics(s, rows)
        T, G, w = s.T, s.G, s.weights
        cells = 0
        value = objective = 0.0
        completed = short = served = 0
        for j in s.jobs:
            held = [sum(c == j.id for c in row) for row in rows]
            if j.kind == "realtime":
                served += sum(min(h, d) for h, d in zip(held, j.demand, strict=True))
                missing = [max(0, d - h) for h, d in zip(held, j.demand, strict=True)]
                short += sum(missing)
                objective -= w.realtime_penalty * j.priority * sum(missing)
                continue
            cells += sum(held)
            value += j.priority * sum(held)
            objective += sum(j.priority * h * w.decay**t for t, h in enumerate(held))
            if sum(held):
                start = next(t for t, h in enumerate(held) if h)
                length = j.running.remaining_steps if j.running else j.duration_steps
                completed += (length <= T) if j.running else (start + length <= T)
        assert m.utilization == pytest.approx((cells + served) / (G * T), rel=1e-9, abs=1e-12)
        assert m.value == pytest.approx(value, rel=1e-9, abs=1e-9)
        assert m.objective == pytest.approx(objective, rel=1e-9, abs=1e-9)
        assert (m.rt_shortfall, m.completed) == (short, completed)
