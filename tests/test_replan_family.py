"""The replan family (benchmarks/bench_quality.py's `replan` and `test-replan` sets): the
wider family's days with each service already holding the GPUs yesterday left it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from allocator import grid as gridlib
from allocator.model import RealtimeJob
from allocator.policies.fast import fast
from allocator.scenario_io import scenario_from_dict, scenario_to_dict
from allocator.scenarios import build
from allocator.validator import violations
from benchmarks.bench_quality import (
    REPLAN2_SEEDS,
    REPLAN3_SEEDS,
    REPLAN_SEEDS,
    REPLAN_TEST_SEEDS,
    SEED_SETS,
    TEST_SEEDS,
    TUNING_SEEDS,
    family_spec,
    scenario_for,
    small_cases,
)


def test_the_replan_seeds_are_their_own_and_apart_from_every_other_set() -> None:
    every = [s for seeds in SEED_SETS.values() for s in seeds]
    assert len(every) == len(set(every))  # no seed in two sets
    replans = REPLAN_SEEDS + REPLAN2_SEEDS + REPLAN3_SEEDS + REPLAN_TEST_SEEDS
    named = {s for name, seeds in SEED_SETS.items() if "replan" in name for s in seeds}
    assert named == set(replans)
    assert all(c.held_over and c.name.startswith("replan-") for c in small_cases(replans))
    assert not any(c.held_over for c in small_cases(TUNING_SEEDS + TEST_SEEDS))


def test_a_replan_is_its_seed_s_day_with_current_gpus_added() -> None:
    """Drawn last, the current GPUs leave the rest of the day as the seed draws it without
    them: the same queue, the same services, the same running jobs."""
    for case in small_cases(REPLAN_SEEDS[:20]):
        replan = scenario_for(case)
        rng = np.random.default_rng([case.seed, case.gpus, case.jobs])
        day = build(replan.name, family_spec(rng, case.gpus, case.jobs, case.min_load), rng)
        assert len(replan.jobs) == len(day.jobs)
        for mine, theirs in zip(replan.jobs, day.jobs, strict=True):
            if isinstance(mine, RealtimeJob):
                assert mine.current_gpus is not None and theirs.current_gpus is None
                mine = replace(mine, current_gpus=None)
            assert mine == theirs


def test_current_gpus_are_distinct_free_and_between_the_first_hour_and_the_peak() -> None:
    held = 0
    for case in small_cases(REPLAN_SEEDS):
        scenario = scenario_for(case)
        taken = np.zeros(scenario.G, dtype=int)
        for job in scenario.batch_jobs:
            if job.running is not None:
                taken[job.running.first_gpu : job.running.first_gpu + job.gpus] += 1
        room = int((taken == 0).sum())
        for job in scenario.realtime_jobs:
            assert job.current_gpus is not None
            gpus = list(job.current_gpus)
            taken[gpus] += 1
            assert len(gpus) <= max(job.demand)
            assert len(gpus) >= min(job.demand[0], room) or taken.sum() == scenario.G
            held += len(gpus)
        assert (taken <= 1).all()  # no GPU held twice, none inside a running block
        assert scenario_from_dict(scenario_to_dict(scenario)) == scenario  # a valid file
    assert held > 0


def test_fast_s_plans_on_replans_are_legal() -> None:
    for case in small_cases(REPLAN_SEEDS[:15]):
        scenario = scenario_for(case)
        grid = fast(scenario)
        assert violations(scenario, gridlib.to_ids(scenario, grid)) == []
