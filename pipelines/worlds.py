"""The worlds a replay runs in: true jobs and true demand, plus what the planner is told.

A world holds the truth (each job's actual duration, each service's actual load) next to
the prediction the planner sees (a predicted duration, an expected load curve). The
seeded suite spans three contention levels so that "fast beats the online baselines"
is checked where it is easy (slack) and where it is hard (oversubscribed).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from allocator.model import Weights
from allocator.scenarios import KIND_SHAPES

PRIORITIES = (1.0, 2.0, 3.0, 5.0, 8.0)


@dataclass(frozen=True)
class SimJob:
    """A batch-like job as it really is (`true_steps`) and as predicted (`predicted_steps`)."""

    id: str
    kind: str
    priority: float
    gpus: int
    arrival: int
    true_steps: int
    predicted_steps: int


@dataclass(frozen=True, eq=False)
class Service:
    """A realtime service: actual load in GPUs (float) and the expected curve a profile gives.

    `expected` covers the replay plus any look-ahead (the planner forecasts past the end);
    the GPUs demanded at step t are `ceil(actual[t])`, never below `min_gpus`. `issued`,
    when an estimator made them, are its forecasts: row t0 is what it said at step t0
    for steps t0, t0 + 1, ... (GPUs); the replay then uses them instead of `expected`.
    """

    id: str
    priority: float
    swap_limit: int
    actual: np.ndarray
    expected: np.ndarray
    min_gpus: int = 1
    issued: np.ndarray | None = None

    def demand(self) -> np.ndarray:
        return np.maximum(np.ceil(self.actual - 1e-9), self.min_gpus).astype(np.int64)


@dataclass(frozen=True, eq=False)
class World:
    name: str
    gpus: int
    steps: int
    jobs: tuple[SimJob, ...]
    services: tuple[Service, ...]
    node_size: int = 8
    weights: Weights = field(default_factory=Weights)
    meta: dict = field(default_factory=dict)


@dataclass(frozen=True)
class WorldSpec:
    """What shapes a synthetic world; `load` = batch GPU-hours asked / GPU-hours left."""

    gpus: int = 16
    days: int = 2
    load: float = 1.3
    services: int = 2
    peak_fraction: float = 0.5  # realtime peak, summed over services, as a share of G
    backlog: float = 0.35  # share of the batch jobs already queued at step 0
    duration_sigma: float = 0.3  # log-normal sigma of predicted / true duration
    demand_sigma: float = 0.08  # sigma of the AR(1) log-noise on realtime load
    demand_rho: float = 0.7
    lookahead: int = 96


# Three contention levels, the same cluster sizes in each.
LEVELS: dict[str, float] = {"low": 0.7, "medium": 1.3, "high": 2.0}
SUITE_SIZES: tuple[int, ...] = (8, 16, 32, 8, 16, 32, 16)


def diurnal_load(rng: np.random.Generator, steps: int, trough: float, peak: float,
                 step_minutes: int = 60) -> np.ndarray:
    """An expected daily curve (float GPUs): a trough and a peak of a few hours, repeated."""
    per_day = 24 * 60 // step_minutes
    centre = rng.uniform(9, 18) * per_day / 24
    width = rng.uniform(2.0, 4.0) * per_day / 24
    hour = np.arange(steps) % per_day
    distance = np.minimum(np.abs(hour - centre), per_day - np.abs(hour - centre))
    return trough + (peak - trough) * np.exp(-0.5 * (distance / width) ** 2)


def noisy(rng: np.random.Generator, expected: np.ndarray, sigma: float, rho: float) -> np.ndarray:
    """Actual load: the expected curve times exp(AR(1) noise), persistent as real traffic is."""
    eps = np.empty(len(expected))
    state = rng.normal(0, sigma)
    for t in range(len(expected)):
        state = rho * state + np.sqrt(1 - rho**2) * rng.normal(0, sigma)
        eps[t] = state
    return expected * np.exp(eps)


def predicted(rng: np.random.Generator, true_steps: int, sigma: float) -> int:
    """A median-unbiased log-normal prediction of a duration, in whole steps (>= 1)."""
    return max(1, round(true_steps * float(np.exp(rng.normal(0, sigma)))))


def synthetic(name: str, spec: WorldSpec, seed: int) -> World:
    """A seeded world: diurnal services, a backlog, then arrivals over the days."""
    rng = np.random.default_rng([seed, *name.encode()])
    G, L = spec.gpus, 24 * spec.days
    services = []
    peaks = rng.dirichlet(np.ones(spec.services) * 3) * spec.peak_fraction * G
    for r, peak in enumerate(np.maximum(peaks, 1.0)):
        trough = peak * rng.uniform(0.25, 0.45)
        expected = diurnal_load(rng, L + spec.lookahead, trough, peak)
        actual = noisy(rng, expected[:L], spec.demand_sigma, spec.demand_rho)
        services.append(Service(id=f"serve-{r}", priority=float(rng.choice([8, 10, 12])),
                                swap_limit=int(rng.choice([1, 2, 2, 3])), actual=actual,
                                expected=expected))
    mean_rt = sum(float(np.mean(s.expected[:L])) for s in services)
    budget = spec.load * max(G - mean_rt, 1.0) * L
    jobs = _batch_jobs(rng, spec, G, L, budget)
    return World(name=name, gpus=G, steps=L, jobs=tuple(jobs), services=tuple(services),
                 meta={"spec": spec, "seed": seed, "level_load": spec.load})


def _batch_jobs(rng: np.random.Generator, spec: WorldSpec, G: int, L: int,
                budget: float) -> list[SimJob]:
    jobs: list[SimJob] = []
    asked = 0.0
    # Arrivals follow Philly's hour-of-day swing (peak/trough ~4, docs/sources.md), over the days.
    hour = np.arange(L) % 24
    rate = 1.0 + 3.0 * np.exp(-0.5 * ((hour - 14) / 4.0) ** 2)
    rate = rate / rate.sum()
    kinds = list(KIND_SHAPES)
    while asked < budget:
        kind = str(rng.choice(kinds, p=[0.45, 0.35, 0.2]))
        sizes, weights, (lo, hi) = KIND_SHAPES[kind]
        allowed = [s for s in sizes if s <= G]
        w = np.array(weights[: len(allowed)])
        gpus = int(rng.choice(allowed, p=w / w.sum()))
        true_steps = int(rng.integers(lo, hi + 1))
        arrival = 0 if rng.random() < spec.backlog else int(rng.choice(L, p=rate))
        k = len(jobs)
        jobs.append(SimJob(id=f"{kind[:5]}-{k:03d}", kind=kind,
                           priority=float(rng.choice(PRIORITIES)), gpus=gpus, arrival=arrival,
                           true_steps=true_steps,
                           predicted_steps=predicted(rng, true_steps, spec.duration_sigma)))
        asked += gpus * true_steps
    jobs.sort(key=lambda j: (j.arrival, j.id))
    return jobs


def suite(seed: int = 7, per_level: int = 7, days: int = 2,
          sizes: tuple[int, ...] = SUITE_SIZES) -> list[World]:
    """The seeded suite: `per_level` worlds at each contention level (21 by default);
    world k of a level has `sizes[k % len(sizes)]` GPUs."""
    return [suite_world(f"{level}-{k:02d}", seed, days, sizes)
            for level in LEVELS for k in range(per_level)]


def suite_world(name: str, seed: int = 7, days: int = 2,
                sizes: tuple[int, ...] = SUITE_SIZES) -> World:
    """One suite world by name (e.g. `high-03`), without building the others."""
    level, _, index = name.partition("-")
    if level not in LEVELS or not index.isdigit():
        raise KeyError(f"unknown world {name!r}; suite worlds are named like "
                       f"{', '.join(f'{lv}-00' for lv in LEVELS)}")
    k = int(index)
    G = sizes[k % len(sizes)]
    return synthetic(name, WorldSpec(gpus=G, days=days, load=LEVELS[level],
                                     services=1 + k % 3), seed)
