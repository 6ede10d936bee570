"""fast's stability term (allocator/policies/stable.py): previous starts kept, plans legal."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from allocator import grid as gridlib
from allocator.model import Scenario
from allocator.plan import make_plan
from allocator.policies import stable
from allocator.policies.fast import fast
from pipelines import simulate as sim
from pipelines.worlds import SimJob, World
from tests.strategies import contended_scenarios, examples, scenarios


def _starts(scenario: Scenario, grid) -> dict[str, int]:
    return {scenario.jobs[i].id: p.start
            for i, p in gridlib.placements(scenario, grid, queued_only=True).items()}


@settings(max_examples=examples(0.5), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(contended_scenarios(max_realtime=0))
def test_without_realtime_no_anchored_job_starts_later_when_moving_gains_little(
        scenario: Scenario) -> None:
    """Anchors from another policy's legal plan are all still free: fast starts every
    anchored job by a step after its anchor at the latest (earlier where a hole opened)."""
    other = make_plan(scenario, "priority")
    anchors = stable.anchors_from(scenario, other.grid)
    plan = make_plan(scenario, "fast", anchors=anchors, stability=10.0)  # validated
    kept = _starts(scenario, plan.grid)
    assert all(kept.get(job, start + 2) <= start + 1 for job, (start, _) in anchors.items())


@settings(max_examples=examples(0.5), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_with_anchors_fast_stays_legal_and_without_them_nothing_changes(
        scenario: Scenario) -> None:
    fresh = fast(scenario)
    anchors = stable.anchors_from(scenario, make_plan(scenario, "fifo").grid, shift=1)
    make_plan(scenario, "fast", anchors=anchors, stability=0.05)  # raises if illegal
    assert (fast(scenario, anchors={}) == fresh).all()
    assert (fast(scenario, anchors=anchors, stability=-1.0) == fresh).all()


def _world(seed: int) -> World:
    """A contended 8-GPU day: 1-, 2- and 4-GPU jobs arriving through it, durations off by
    up to a third."""
    import numpy as np

    rng = np.random.default_rng(seed)
    jobs = []
    for k in range(24):
        true = int(rng.integers(2, 10))
        jobs.append(SimJob(id=f"j{k}", kind="training",
                           priority=float(rng.choice([1, 2, 5, 8])),
                           gpus=int(rng.choice([1, 1, 2, 4])), arrival=int(rng.integers(0, 18)),
                           true_steps=true,
                           predicted_steps=max(1, round(true * rng.uniform(0.7, 1.3)))))
    return World(name=f"stable-{seed}", gpus=8, steps=24, jobs=tuple(jobs), services=())


def test_in_a_replay_starts_move_less_often_with_the_term_and_every_plan_is_legal() -> None:
    off = sim.SimConfig(horizon=8, margin=0.0, lead=0)
    on = sim.SimConfig(horizon=8, margin=0.0, lead=0, stability=1.0)
    moved = {}
    for label, config in (("off", off), ("on", on)):
        moved[label] = 0
        for seed in range(4):
            rec = sim.replay(_world(seed), "fast", config)  # make_plan validates each plan
            assert sim.integrity(rec) == []
            moved[label] += rec.churn_moved
    assert moved["on"] < moved["off"]


def test_the_stability_option_reads_off_or_a_share() -> None:
    import pytest

    from allocator.core.errors import InputError

    assert sim.stability_option("off") is None
    assert sim.stability_option("0.02") == 0.02
    for bad in ("-1", "nan", "x", "11"):
        with pytest.raises(InputError):
            sim.stability_option(bad)
