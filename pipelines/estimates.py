"""Start estimates as a range: the start under predicted durations (p50) and under p90 ones.

A user told "your job starts at 14:00" is told a point; durations are uncertain, so the
replay can also plan once with every duration at its 90th percentile (predicted x
exp(1.2816 sigma), sigma the world's log-normal prediction error) and report
[p50 start, p90 start]. `range_accuracy` then says how often the realized start fell
inside the range (1 step of slack each side), and how wide the ranges were.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from allocator.model import BatchJob, Running, Scenario
from allocator.plan import make_plan
from allocator.reservations import problems

Z90 = 1.2816


def duration_sigma(world) -> float:
    """The world's log-normal sigma of predicted / true duration (0 when unknown)."""
    for key in ("config", "spec"):
        source = world.meta.get(key)
        if source is not None and hasattr(source, "duration_sigma"):
            return float(source.duration_sigma)
    return float(world.meta.get("duration_sigma", 0.0))


def p90_starts(scenario: Scenario, codes: list[int], policy: str, sigma: float,
               t0: int, **options: Any) -> dict[int, int | None]:
    """World code -> absolute start of each queued job when every duration is at its p90
    (`options` go to the policy: fast's stability anchors)."""
    q = math.exp(Z90 * sigma)
    jobs = []
    for job in scenario.jobs:
        if isinstance(job, BatchJob):
            if job.running:
                left = math.ceil(job.running.remaining_steps * q)
                job = replace(job, duration_steps=job.duration_steps - job.running.remaining_steps
                              + left, running=Running(job.running.first_gpu, left))
            else:
                job = replace(job, duration_steps=math.ceil(job.duration_steps * q))
        jobs.append(job)
    slow = replace(scenario, jobs=tuple(jobs))
    if slow.reservations and problems(slow, slow.reservations):
        slow = replace(slow, reservations=())  # a promise the slower world cannot keep
    starts = make_plan(slow, policy, **options).starts()
    out: dict[int, int | None] = {}
    for p, job in enumerate(slow.jobs):
        if isinstance(job, BatchJob) and not job.running:
            got = starts.get(job.id)
            out[codes[p]] = None if got is None else t0 + got["start"]
    return out


def range_accuracy(rec) -> dict[str, float]:
    """Share of started jobs whose realized start fell in [p50 - 1, p90 + 1], and the
    median range width (steps); a job with no p50 estimate counts as a miss."""
    hits, widths = [], []
    for i, (start, _) in rec.starts.items():
        if i not in rec.estimates_p90:
            continue
        low, high = rec.estimates.get(i), rec.estimates_p90[i]
        if low is None:
            hits.append(False)
            continue
        top = high if high is not None else math.inf
        hits.append(low - 1 <= start <= max(top, low) + 1)
        if high is not None:
            widths.append(max(high - low, 0))
    if not hits:
        return {}
    return {"estimate_range_pct": 100.0 * float(np.mean(hits)),
            "estimate_range_width": float(np.median(widths)) if widths else 0.0}
