"""The seven benchmark scenarios of the article, from a seeded, documented generator.

Each scenario is contended the way the article describes:
- realtime services follow a diurnal curve (a trough most of the day, a peak of a few
  hours), so a static reservation of the peak strands GPUs for the rest of the day;
- the batch queue (training, batch inference, quantization) asks for more GPU-hours than
  the cluster has left, in power-of-two blocks of mixed sizes, so order and shape decide
  what fits;
- a few jobs are already running (pinned) and some arrive during the day.

`generate(name, seed)` is deterministic; `gpuplan scenarios --seed N` rewrites the files.
Vary a spec (GPUs, jobs, realtime services, load) to make new scenarios.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from allocator.model import BatchJob, Cluster, RealtimeJob, Running, Scenario, Weights


@dataclass(frozen=True)
class Spec:
    """What shapes a scenario: cluster size, queue length and how hard it is contended."""

    gpus: int
    jobs: int
    realtime: int = 1
    load: float = 1.6  # batch GPU-hours asked / GPU-hours left after the realtime trough
    training_share: float = 0.5
    running: int = 1
    late_arrivals: float = 0.3  # share of the queue arriving after step 0
    peak_fraction: float = 0.6  # realtime peak as a share of the cluster
    uniform_priority: bool = False
    horizon: int = 24
    # The wider family (benchmarks/bench_quality.py); the defaults keep the seven scenarios.
    peak_hours: tuple[float, float] = (9, 18)  # where a service's peak may centre
    arrival_spread: float = 0.5  # late arrivals land in steps 1 .. spread x horizon
    long_single: float = 0.0  # share of the queue turned into long 1-GPU jobs
    big_jobs: int = 0  # extra 8-GPU (or whole-cluster) training jobs
    fragment_running: bool = False  # running jobs on scattered aligned blocks, not packed
    held_over: bool = False  # services hold current GPUs left from yesterday (a replan)


SPECS: dict[str, Spec] = {
    "mixed-control": Spec(gpus=8, jobs=10, realtime=1, load=1.5, training_share=0.4),
    "realtime-contention": Spec(gpus=8, jobs=8, realtime=3, load=1.4, training_share=0.3,
                                peak_fraction=0.75),
    "training-heavy": Spec(gpus=8, jobs=16, realtime=1, load=2.0, training_share=0.9),
    "large-mixed": Spec(gpus=14, jobs=16, realtime=2, load=1.6, running=2),
    "oversubscribed": Spec(gpus=8, jobs=9, realtime=1, load=3.0, training_share=0.7),
    "scale": Spec(gpus=64, jobs=30, realtime=4, load=1.6, running=4),
    "uniform-priority": Spec(gpus=14, jobs=16, realtime=2, load=1.6, running=2,
                             uniform_priority=True),
}

# The uniform-priority scenario is large-mixed's own queue with every priority equal.
SAME_QUEUE_AS = {"uniform-priority": "large-mixed"}

KIND_SHAPES = {
    # kind: (gpu sizes, their weights, duration range in steps)
    "training": ((1, 2, 4, 8), (0.15, 0.3, 0.35, 0.2), (3, 14)),
    "batch_inference": ((1, 2, 4), (0.4, 0.4, 0.2), (1, 5)),
    "quantization": ((1, 2), (0.6, 0.4), (1, 4)),
}


def diurnal(rng: np.random.Generator, horizon: int, trough: int, peak: int,
            hours: tuple[float, float] = (9, 18)) -> list[int]:
    """A day of demand: a trough, a rise to a peak of 2-4 hours, a fall (and noise)."""
    centre = rng.uniform(*hours) * horizon / 24
    width = rng.uniform(1.5, 3.0) * horizon / 24
    t = np.arange(horizon)
    shape = np.exp(-0.5 * ((t - centre) / width) ** 2)
    curve = trough + (peak - trough) * shape + rng.normal(0, 0.3, horizon)
    return [int(v) for v in np.clip(np.round(curve), trough, peak)]


def generate(name: str, seed: int = 7) -> Scenario:
    if name in SAME_QUEUE_AS:
        base = generate(SAME_QUEUE_AS[name], seed)
        jobs = tuple(replace(j, priority=1.0) for j in base.jobs)
        return replace(base, name=name, jobs=jobs)
    spec = SPECS[name]
    rng = np.random.default_rng([seed, *name.encode()])
    return build(name, spec, rng)


def build(name: str, spec: Spec, rng: np.random.Generator) -> Scenario:
    G, T = spec.gpus, spec.horizon
    jobs: list[BatchJob | RealtimeJob] = []
    rt_peak_total = max(spec.realtime, round(spec.peak_fraction * G))
    peaks = _split(rng, rt_peak_total, spec.realtime)
    trough_total = 0
    for r, peak in enumerate(peaks):
        trough = max(1, round(peak * rng.uniform(0.25, 0.45)))
        trough_total += trough
        jobs.append(RealtimeJob(
            id=f"serve-{r}", priority=float(rng.choice([8, 10, 12])),
            demand=tuple(diurnal(rng, T, trough, peak, spec.peak_hours)),
            swap_limit=int(rng.choice([1, 2, 2, 3])),
        ))
    budget = spec.load * (G - trough_total) * T  # batch GPU-hours to ask for
    batch = _batch_jobs(rng, spec, budget)
    jobs.extend(_scatter_running(batch, spec, G, rng) if spec.fragment_running
                else _pin_some(batch, spec, G, T))
    if spec.held_over:  # drawn last: the same seed gives the same day without it
        jobs = _hold_over(jobs, G, rng)
    scenario = Scenario(cluster=Cluster(gpus=G, horizon_steps=T), weights=Weights(),
                        jobs=tuple(jobs), name=name)
    return scenario


def _split(rng: np.random.Generator, total: int, parts: int) -> list[int]:
    weights = rng.dirichlet(np.ones(parts) * 3)
    out = np.maximum(1, np.floor(weights * total)).astype(int)
    return [int(v) for v in out]


def _batch_jobs(rng: np.random.Generator, spec: Spec, budget: float) -> list[BatchJob]:
    n = spec.jobs - spec.realtime
    other = (1 - spec.training_share) / 2
    kinds = rng.choice(list(KIND_SHAPES), size=n,
                       p=[spec.training_share, other, other])
    jobs = []
    for k, kind in enumerate(kinds):
        shapes, weights, (lo, hi) = KIND_SHAPES[str(kind)]
        sizes = [s for s in shapes if s <= spec.gpus]
        w = np.array(weights[: len(sizes)])
        gpus = int(rng.choice(sizes, p=w / w.sum()))
        duration = int(rng.integers(lo, hi + 1))
        late = rng.random() < spec.late_arrivals
        arrival = int(rng.integers(1, max(2, int(spec.horizon * spec.arrival_spread)))) \
            if late else 0
        priority = 1.0 if spec.uniform_priority else float(rng.choice([1, 2, 3, 5, 8]))
        jobs.append(BatchJob(id=f"{_prefix(str(kind))}-{k:02d}", kind=str(kind),
                             priority=priority, gpus=gpus, duration_steps=duration,
                             arrival_step=arrival))
    if spec.long_single:
        jobs = [replace(j, id=f"long-{j.id}", kind="training", gpus=1,
                        duration_steps=int(rng.integers(spec.horizon // 3, spec.horizon)))
                if rng.random() < spec.long_single else j for j in jobs]
    for b in range(spec.big_jobs):
        jobs.append(BatchJob(id=f"big-{b:02d}", kind="training",
                             priority=1.0 if spec.uniform_priority
                             else float(rng.choice([2, 3, 5, 8])),
                             gpus=min(8, 1 << (spec.gpus.bit_length() - 1)),
                             duration_steps=int(rng.integers(3, spec.horizon // 2 + 1)),
                             arrival_step=int(rng.integers(0, spec.horizon // 2))))
    # Scale durations so that the queue asks for `budget` GPU-hours: more than fits.
    asked = sum(j.gpus * j.duration_steps for j in jobs)
    factor = budget / asked if asked else 1.0
    return [replace(j, duration_steps=max(1, round(j.duration_steps * factor)))
            for j in jobs]


def _prefix(kind: str) -> str:
    return {"training": "train", "batch_inference": "batch", "quantization": "quant"}[kind]


def _pin_some(jobs: list[BatchJob], spec: Spec, G: int, T: int) -> list[BatchJob]:
    """Mark the first few jobs as already running, packed from GPU 0 in aligned blocks."""
    out = []
    next_free = 0
    pinned = 0
    for job in jobs:
        first = -(-next_free // job.gpus) * job.gpus  # align up
        if pinned < spec.running and first + job.gpus <= G // 2:
            remaining = max(1, job.duration_steps // 2)
            out.append(replace(job, arrival_step=0,
                               running=Running(first_gpu=first, remaining_steps=remaining)))
            next_free = first + job.gpus
            pinned += 1
        else:
            out.append(job)
    return out


def _scatter_running(jobs: list[BatchJob], spec: Spec, G: int,
                     rng: np.random.Generator) -> list[BatchJob]:
    """Mark the first few jobs that fit as running, each on a random free aligned block:
    running work that breaks up nodes, the way a day's leftovers do."""
    taken = np.zeros(G, dtype=bool)
    out, pinned = [], 0
    for job in jobs:
        blocks = [b for b in range(0, G - job.gpus + 1, job.gpus)
                  if not taken[b : b + job.gpus].any()]
        if pinned < spec.running and blocks and job.gpus < G:
            first = int(rng.choice(blocks))
            taken[first : first + job.gpus] = True
            out.append(replace(job, arrival_step=0, running=Running(
                first_gpu=first, remaining_steps=max(1, job.duration_steps // 2))))
            pinned += 1
        else:
            out.append(job)
    return out


def _hold_over(jobs: list[BatchJob | RealtimeJob], G: int,
               rng: np.random.Generator) -> list[BatchJob | RealtimeJob]:
    """Give each service the GPUs it holds now, as a replan finds them: between its first
    hour's demand and its peak (yesterday's evening not yet let go, shrinking by its swap
    limit a step), on the GPUs no running job holds, either stacked from the top (as a
    stacked plan leaves them) or scattered (as a day of hops leaves them)."""
    free = np.ones(G, dtype=bool)
    for job in jobs:
        if isinstance(job, BatchJob) and job.running is not None:
            free[job.running.first_gpu : job.running.first_gpu + job.gpus] = False
    out: list[BatchJob | RealtimeJob] = []
    for job in jobs:
        if not isinstance(job, RealtimeJob):
            out.append(job)
            continue
        first, peak = job.demand[0], max(job.demand)
        count = min(first + int(rng.integers(0, peak - first + 1)), int(free.sum()))
        open_gpus = np.flatnonzero(free)
        if rng.random() < 0.5:
            taken = open_gpus[len(open_gpus) - count:]
        else:
            taken = rng.choice(open_gpus, size=count, replace=False)
        free[taken] = False
        out.append(replace(job, current_gpus=tuple(sorted(int(g) for g in taken))))
    return out
