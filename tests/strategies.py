"""Hypothesis strategies for random LEGAL scenarios, shared by every allocator test.

A drawn scenario obeys every rule of MODEL.md's fine print by construction (so
`scenario_from_dict` must accept it), and mixes in the unusual-but-allowed cases:
arrivals at or past the horizon, durations longer than it, demand above G, swap
limit 0, G not a power of two, running jobs with any arrival, and heavy contention.

Most drawn scenarios are contended on purpose (`contended_scenario_dicts`): several queued
batch jobs of different sizes ask for more aligned GPU-steps than the grid has left after
running jobs and realtime demand (load >= 1), realtime curves move, and a job may already
run. A scenario where every job fits tells no allocator apart from another. `contention`
measures a drawn scenario; `tests/test_strategies.py` checks the mix.
"""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis import strategies as st

from allocator.model import BATCH_KINDS, REALTIME, Scenario
from allocator.scenario_io import scenario_from_dict


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


def contention(d: dict[str, Any]) -> tuple[int, float]:
    """(queued batch jobs, load) of a scenario dict.

    load = queued batch GPU-steps asked inside the horizon (from arrival, at most the
    duration) / the GPU-steps left after running jobs' pinned cells and realtime demand
    (capped at G per step); inf when nothing is left.
    """
    G, T = d["cluster"]["gpus"], d["cluster"]["horizon_steps"]
    asked, pinned, queued = 0, 0, 0
    realtime = [0] * T
    for job in d["jobs"]:
        if job["kind"] == REALTIME:
            for t, need in enumerate(job["demand"][:T]):
                realtime[t] += need
        elif job.get("running"):
            pinned += job["gpus"] * min(job["running"]["remaining_steps"], T)
        else:
            queued += 1
            arrival = job.get("arrival_step", 0)
            asked += job["gpus"] * max(0, min(job["duration_steps"], T - arrival))
    left = G * T - pinned - sum(min(r, G) for r in realtime)
    return queued, (asked / left if left > 0 else float("inf"))


def _asked(jobs: list[dict[str, Any]], T: int) -> int:
    return sum(j["gpus"] * max(0, min(j["duration_steps"], T - j["arrival_step"])) for j in jobs)


@st.composite
def contended_scenario_dicts(
    draw: st.DrawFn,
    *,
    min_gpus: int = 2,
    max_gpus: int = 16,
    min_steps: int = 2,
    max_steps: int = 24,
    min_batch: int = 3,
    max_batch: int = 7,
    min_running: int = 0,
    max_running: int = 1,
    max_realtime: int = 2,
    max_swap: int = 4,
) -> dict[str, Any]:
    """A legal scenario where queued batch jobs of different sizes compete (load >= 1).

    `min_batch`..`max_batch` queued batch jobs (at least two sizes when G >= 2), arriving in
    the first half of the horizon; `min_running`..`max_running` jobs already running on aligned
    blocks; up to `max_realtime` services whose demand moves. If the queue asks for less
    than the capacity left, it is grown (runs to the horizon, then earlier arrivals, then
    bigger blocks) until it asks for at least all of it.
    """
    G = draw(st.integers(min_value=min_gpus, max_value=max_gpus))
    T = draw(st.integers(min_value=min_steps, max_value=max_steps))
    sizes = powers_of_two(G)
    held = [False] * G
    running: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(min_value=min_running, max_value=max_running))):
        k = draw(st.sampled_from(sizes[:-1] or sizes))
        blocks = [b for b in range(0, G - k + 1, k) if not any(held[b : b + k])]
        if not blocks:
            continue
        first = draw(st.sampled_from(blocks))
        duration = draw(st.integers(min_value=1, max_value=T + 2))
        running.append({"kind": draw(st.sampled_from(BATCH_KINDS)), "priority": draw(priorities),
                        "gpus": k, "duration_steps": duration,
                        "arrival_step": draw(st.integers(0, T)),
                        "running": {"first_gpu": first,
                                    "remaining_steps": draw(st.integers(1, duration))}})
        held[first : first + k] = [True] * k

    realtime: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(min_value=0, max_value=max_realtime))):
        demand = draw(st.lists(st.integers(0, max(1, G // 2)), min_size=T, max_size=T))
        if len(set(demand)) == 1:  # a curve that moves: a flat one is the peak reservation
            demand[T // 2] = demand[T // 2] + 1 if demand[T // 2] < G else demand[T // 2] - 1
        job: dict[str, Any] = {"kind": REALTIME, "priority": draw(priorities), "demand": demand,
                               "swap_limit": draw(st.integers(min_value=1, max_value=max_swap))}
        free = [g for g in range(G) if not held[g]]
        if free and draw(st.booleans()):
            current = draw(st.lists(st.sampled_from(free), unique=True,
                                    max_size=min(len(free), demand[0] + 1)))
            job["current_gpus"] = current
            for g in current:
                held[g] = True
        realtime.append(job)

    queued: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(min_value=min_batch, max_value=max_batch))):
        queued.append({
            "kind": draw(st.sampled_from(BATCH_KINDS)),
            "priority": draw(priorities),
            "gpus": draw(st.sampled_from(sizes)),
            "duration_steps": draw(st.integers(min_value=1, max_value=T)),
            "arrival_step": draw(st.one_of(st.just(0), st.integers(0, T // 2))),
        })
    if len(sizes) > 1 and len({j["gpus"] for j in queued}) == 1:
        queued[0]["gpus"] = sizes[0] if queued[0]["gpus"] != sizes[0] else sizes[-1]
    # The capacity the queue competes for, as `contention` counts it.
    left = G * T - sum(j["gpus"] * min(j["running"]["remaining_steps"], T) for j in running) \
        - sum(min(sum(r["demand"][t] for r in realtime), G) for t in range(T))
    for grow in ("duration", "arrival", "size"):
        for job in queued:
            if _asked(queued, T) >= left:
                break
            if grow == "duration":
                job["duration_steps"] = max(job["duration_steps"], T - job["arrival_step"])
            elif grow == "arrival":
                job["arrival_step"], job["duration_steps"] = 0, max(job["duration_steps"], T)
            elif job is not queued[0] or len(queued) == 1:
                job["gpus"] = sizes[-1]

    jobs = draw(st.permutations(queued + running + realtime))
    for index, job in enumerate(jobs):
        job["id"] = f"{job['kind'][:2]}{index}"
    return {
        "name": "contended",
        "cluster": {"gpus": G, "horizon_steps": T,
                    "node_size": draw(st.sampled_from((1, 2, 4, 8))), "step_minutes": 60},
        "weights": {"realtime_penalty": draw(penalties), "decay": draw(decays)},
        "jobs": jobs,
    }


def mostly_contended(contended: st.SearchStrategy[dict[str, Any]],
                     anything: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict]:
    """Four draws in five from `contended`, the rest from `anything` (the odd legal cases)."""
    return st.integers(min_value=0, max_value=4).flatmap(
        lambda k: contended if k else anything)


def scenarios(**kwargs: Any) -> st.SearchStrategy[Scenario]:
    """`scenario_dicts` through the strict loader: the typed scenario the policies see.

    Without arguments, mostly contended scenarios (`contended_scenario_dicts`) mixed with
    the unusual-but-legal ones; with arguments, exactly `scenario_dicts(**kwargs)`.
    """
    if kwargs:
        return scenario_dicts(**kwargs).map(scenario_from_dict)
    return mostly_contended(contended_scenario_dicts(), scenario_dicts()).map(scenario_from_dict)


def contended_scenarios(**kwargs: Any) -> st.SearchStrategy[Scenario]:
    return contended_scenario_dicts(**kwargs).map(scenario_from_dict)


def tiny_scenario_dicts() -> st.SearchStrategy[dict[str, Any]]:
    """G 1..4, T 1..4: small enough for `brute_force` to enumerate.

    Mostly three queued batch jobs of different sizes competing (load >= 1) with a running
    job or a moving realtime curve; the rest at most 3 jobs of any legal kind.
    """
    contended = st.integers(min_value=0, max_value=1).flatmap(
        lambda rt: contended_scenario_dicts(max_gpus=4, max_steps=4, min_batch=3,
                                            max_batch=3, min_running=1 - rt,
                                            max_running=1 - rt, max_realtime=rt,
                                            max_swap=2))
    anything = st.integers(min_value=0, max_value=2).flatmap(
        lambda rt: scenario_dicts(max_gpus=4, max_steps=4, max_batch=3 - rt, max_realtime=rt,
                                  max_swap=3, allow_contention=False)
    )
    return mostly_contended(contended, anything)


def tiny_scenarios() -> st.SearchStrategy[Scenario]:
    return tiny_scenario_dicts().map(scenario_from_dict)


def micro_scenario_dicts() -> st.SearchStrategy[dict[str, Any]]:
    """At most 6 cells and 2 jobs: small enough to enumerate every grid cell by cell.

    Mostly two queued batch jobs of different sizes competing for the grid.
    """
    contended = contended_scenario_dicts(max_gpus=3, max_steps=3, min_batch=2, max_batch=2,
                                         max_running=0, max_realtime=0)
    anything = st.integers(min_value=0, max_value=1).flatmap(
        lambda rt: scenario_dicts(max_gpus=3, max_steps=3, max_batch=2 - rt, max_realtime=rt,
                                  max_swap=3, allow_contention=False))
    return mostly_contended(contended, anything).filter(
        lambda d: d["cluster"]["gpus"] * d["cluster"]["horizon_steps"] <= 6)


def micro_scenarios() -> st.SearchStrategy[Scenario]:
    return micro_scenario_dicts().map(scenario_from_dict)


def family_scenario(seed: int, gpus: int, jobs: int) -> Scenario:
    """One draw of the quality benchmark's generator (services, long small jobs and
    whole-node jobs): the shapes fast's later steps act on, which the contended
    strategies rarely draw."""
    from benchmarks.bench_quality import Case, scenario_for

    return scenario_for(Case(seed, gpus, jobs))


def family_scenarios(gpus: tuple[int, ...] = (8, 12, 16), jobs: tuple[int, int] = (8, 24)
                     ) -> st.SearchStrategy[Scenario]:
    """`family_scenario` drawn: any seed, one of these cluster sizes, a job count within
    `jobs` (both ends included)."""
    return st.builds(family_scenario, st.integers(0, 2**31), st.sampled_from(gpus),
                     st.integers(*jobs))
