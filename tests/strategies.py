"""Hypothesis strategies for random LEGAL scenarios, shared by every allocator test.

A drawn scenario obeys every rule of MODEL.md's fine print by construction (so
`scenario_from_dict` must accept it), and mixes in the unusual-but-allowed cases:
arrivals at or past the horizon, durations longer than it, demand above G, swap
limit 0, G not a power of two, running jobs with any arrival, and heavy contention.
"""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis import strategies as st

from allocator.model import Scenario
from allocator.scenario_io import scenario_from_dict

BATCH_KINDS = ("training", "batch_inference", "quantization")
REALTIME = "realtime"


def examples(fraction: float) -> int:
    """A share of the active profile's budget, for properties that are slow per example."""
    return max(5, int(settings.default.max_examples * fraction))


def powers_of_two(limit: int) -> list[int]:
    """Block sizes a batch job may ask for on a cluster of `limit` GPUs."""
    return [1 << i for i in range(limit.bit_length()) if 1 << i <= limit]


priorities = st.one_of(
    st.integers(min_value=1, max_value=10),
    st.floats(min_value=0.05, max_value=10.0, allow_nan=False, allow_infinity=False),
)
decays = st.one_of(
    st.just(1.0),
    st.just(0.97),
    st.floats(min_value=0.05, max_value=1.0, allow_nan=False, exclude_min=True),
)
penalties = st.one_of(
    st.just(0.0),
    st.just(8.0),
    st.floats(min_value=0.0, max_value=20.0, allow_nan=False),
)


@st.composite
def scenario_dicts(
    draw: st.DrawFn,
    *,
    min_gpus: int = 1,
    max_gpus: int = 16,
    min_steps: int = 1,
    max_steps: int = 24,
    max_batch: int = 7,
    max_realtime: int = 2,
    max_swap: int = 4,
    allow_contention: bool = True,
) -> dict[str, Any]:
    """A legal scenario as contract JSON (a dict), built rule by rule."""
    G = draw(st.integers(min_value=min_gpus, max_value=max_gpus))
    T = draw(st.integers(min_value=min_steps, max_value=max_steps))
    sizes = powers_of_two(G)

    batch: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(min_value=0, max_value=max_batch))):
        batch.append({
            "kind": draw(st.sampled_from(BATCH_KINDS)),
            "priority": draw(priorities),
            "gpus": draw(st.sampled_from(sizes)),
            "duration_steps": draw(st.integers(min_value=1, max_value=T + 3)),
            # Mostly early arrivals, so jobs queue behind each other; some at or past T.
            "arrival_step": draw(st.one_of(st.just(0), st.integers(0, T // 4),
                                           st.integers(0, T + 1))),
        })
    if allow_contention and draw(st.booleans()):
        # Two full-horizon jobs of the largest block: more batch work than the grid holds.
        for _ in range(2):
            batch.append({"kind": "training", "priority": draw(priorities),
                          "gpus": sizes[-1], "duration_steps": T, "arrival_step": 0})

    # Running jobs: non-overlapping blocks, 1 <= remaining <= duration. Mostly aligned;
    # sometimes at any offset, as a real cluster's current placement may be (MODEL.md).
    held = [False] * G
    for job in batch:
        if draw(st.integers(min_value=0, max_value=3)) != 0:
            continue  # about one job in four is already running
        k = job["gpus"]
        stride = 1 if draw(st.integers(min_value=0, max_value=2)) == 0 else k
        blocks = [b for b in range(0, G - k + 1, stride) if not any(held[b : b + k])]
        if not blocks:
            continue
        first = draw(st.sampled_from(blocks))
        job["running"] = {"first_gpu": first,
                          "remaining_steps": draw(st.integers(1, job["duration_steps"]))}
        held[first : first + k] = [True] * k

    realtime: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(min_value=0, max_value=max_realtime))):
        job: dict[str, Any] = {
            "kind": REALTIME,
            "priority": draw(priorities),
            "demand": draw(st.lists(st.integers(0, G + 2), min_size=T, max_size=T)),
            "swap_limit": draw(st.integers(min_value=0, max_value=max_swap)),
        }
        free = [g for g in range(G) if not held[g]]
        mode = draw(st.sampled_from(("absent", "null", "given")))
        if mode == "null":
            job["current_gpus"] = None
        elif mode == "given":
            current = draw(st.lists(st.sampled_from(free), unique=True, max_size=len(free))
                           if free else st.just([]))
            job["current_gpus"] = current
            for g in current:
                held[g] = True
        realtime.append(job)

    jobs = draw(st.permutations(batch + realtime))
    for index, job in enumerate(jobs):
        job["id"] = f"{job['kind'][:2]}{index}"
    return {
        "name": "drawn",
        "cluster": {"gpus": G, "horizon_steps": T,
                    "node_size": draw(st.sampled_from((1, 2, 4, 8))), "step_minutes": 60},
        "weights": {"realtime_penalty": draw(penalties), "decay": draw(decays)},
        "jobs": jobs,
    }


def scenarios(**kwargs: Any) -> st.SearchStrategy[Scenario]:
    """`scenario_dicts` through the strict loader: the typed scenario the policies see."""
    return scenario_dicts(**kwargs).map(scenario_from_dict)


def tiny_scenario_dicts() -> st.SearchStrategy[dict[str, Any]]:
    """G 1..4, T 1..4, at most 3 jobs: small enough for `brute_force` to enumerate."""
    return st.integers(min_value=0, max_value=2).flatmap(
        lambda rt: scenario_dicts(max_gpus=4, max_steps=4, max_batch=3 - rt, max_realtime=rt,
                                  max_swap=3, allow_contention=False)
    )


def tiny_scenarios() -> st.SearchStrategy[Scenario]:
    return tiny_scenario_dicts().map(scenario_from_dict)


def micro_scenario_dicts() -> st.SearchStrategy[dict[str, Any]]:
    """At most 6 cells and 2 jobs: small enough to enumerate every grid cell by cell."""
    return st.integers(min_value=0, max_value=1).flatmap(
        lambda rt: scenario_dicts(max_gpus=3, max_steps=3, max_batch=2 - rt, max_realtime=rt,
                                  max_swap=3, allow_contention=False)
    ).filter(lambda d: d["cluster"]["gpus"] * d["cluster"]["horizon_steps"] <= 6)


def micro_scenarios() -> st.SearchStrategy[Scenario]:
    return micro_scenario_dicts().map(scenario_from_dict)
