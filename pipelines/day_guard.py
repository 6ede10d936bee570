"""The starvation guard in the daily plan: yesterday's promises kept, today's top job promised.

`gpuplan plan-day --guard` runs the rule the rolling replay measures
(pipelines/promising.py, docs/starvation.md) on the day's scenario: the promises read from
the previous plan's `reservations` are re-anchored to this plan's start and kept at their
earliest feasible start (so a later plan keeps a promise or moves it earlier, never later,
but for an overrun on its block or realtime not yet off it), and the top waiting
whole-node job is promised a block. The plan then carries the promises in its own
`reservations`, which the next day's `--previous-plan` reads.

Claims: the queue contract (FORECASTING.md) has no submit time, so a job's claim is its
priority, unless the queue carries an optional `submitted_at` column (ISO 8601): then the
claim is priority + age x steps waited by the plan's start, as in the replay.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from allocator.core.errors import InputError
from allocator.core.readers import read_json
from allocator.core.timeparse import parse_time
from allocator.model import BatchJob, Reservation, Scenario
from allocator.reservations import claim
from allocator.scenario_io import reservations_from_json
from pipelines.promising import Rules, Waiting, keep_and_promise


@dataclass(frozen=True)
class PreviousPlan:
    """The promises of a plan JSON, with the start and step length that anchor them."""

    path: Path
    start: pd.Timestamp
    step_minutes: int
    reservations: tuple[Reservation, ...]


@dataclass(frozen=True)
class Promise:
    """One promise of today's plan; `was` is the previous plan's start for it, re-anchored."""

    id: str
    start: int
    first_gpu: int
    gpus: int
    was: int | None


@dataclass(frozen=True)
class Guarded:
    """The guarded scenario, its promises, and the warnings to print (dropped promises)."""

    scenario: Scenario
    promises: tuple[Promise, ...]
    warnings: tuple[str, ...]


def read_previous(path: Path) -> PreviousPlan:
    """The previous plan's `start`, `step_minutes` and `reservations`; InputError naming the
    file and the field on anything unreadable."""
    doc = read_json(path)
    where = str(path)
    if not isinstance(doc, dict):
        raise InputError("expected a plan JSON object (from gpuplan plan-day)", file=where)
    start = doc.get("start")
    if not isinstance(start, str):
        raise InputError("missing: the plan's start (ISO 8601)", file=where, field="start")
    try:
        when = parse_time(start, "start")
    except InputError as err:
        raise err.located(where) from None
    minutes = doc.get("step_minutes")
    if type(minutes) is not int or minutes <= 0:
        raise InputError("must be a positive whole number", file=where, field="step_minutes")
    raw = doc.get("reservations", [])
    if raw is None:  # a plan always writes a list; the scenario loader reads null as none
        raise InputError("must be a list", file=where, field="reservations")
    try:
        promised = reservations_from_json(raw)
    except InputError as err:
        raise err.located(where) from None
    return PreviousPlan(Path(path), when.floor("min"), minutes, promised)


def reanchor(previous: PreviousPlan, start: pd.Timestamp,
             step_minutes: int) -> dict[str, tuple[int, int]]:
    """Each promise as (start, first GPU), its start a step of the plan beginning at `start`;
    rounded down, so re-anchoring never moves a promise later."""
    offset = (previous.start - start) / pd.Timedelta(minutes=1)
    return {r.id: (math.floor((offset + r.start * previous.step_minutes) / step_minutes),
                   r.first_gpu) for r in previous.reservations}


def waited_steps(queue: pd.DataFrame, start: pd.Timestamp, step_minutes: int,
                 where: str) -> tuple[dict[str, int], str]:
    """Steps each queued job has waited by `start`, from the optional `submitted_at` column
    (none: no wait is known, every claim is the priority); and a line saying which."""
    if "submitted_at" not in queue.columns:
        return {}, "priority only (the queue has no submitted_at column)"
    out: dict[str, int] = {}
    for row in queue.to_dict("records"):
        job = str(row.get("id", "")).strip()
        value = row.get("submitted_at")
        if value is None or (isinstance(value, float) and math.isnan(value)) or value == "":
            continue
        try:
            when = parse_time(str(value), "submitted_at")
        except InputError:
            raise InputError(f"{value!r} is not an ISO 8601 time", file=where, job=job,
                             field="submitted_at") from None
        minutes = (start - when) / pd.Timedelta(minutes=1)
        out[job] = max(0, int(minutes // step_minutes))
    return out, "priority + age x steps waited since submitted_at"


def guard_day(scenario: Scenario, queued: list[str], waited: dict[str, int], age: float,
              previous: dict[str, tuple[int, int]], rules: Rules = Rules()) -> Guarded:
    """The day's scenario with its promises as reservations (fast and full honour them).

    `previous` maps job id -> its promise (start as a step of this plan, first GPU). A
    promise naming a job not waiting in today's queue (started, cancelled, rejected) is
    dropped with a warning, not an error: jobs start and are cancelled between plans.
    """
    waiting: dict[str, Waiting] = {}
    ids = set(queued)
    for p, job in enumerate(scenario.jobs):
        if isinstance(job, BatchJob) and not job.running and job.id in ids:
            waiting[job.id] = Waiting(p, job.arrival_step, job.gpus,
                                      claim(job.priority, waited.get(job.id, 0), age))
    warnings = []
    held: dict[str, tuple[int, int]] = {}
    for rid, promise in previous.items():
        if rid not in waiting:
            warnings.append(f"the previous plan's promise to {rid!r} is dropped: the job is "
                            "not waiting in this queue (started, cancelled or rejected)")
            continue
        held[rid] = promise  # ties on the start keep the promised block
    got = keep_and_promise(scenario, waiting, held, 0, rules, set(), floor=True)
    by_id = {r.id: r for r in got.reservations}
    promises = tuple(Promise(k, start, first, by_id[k].gpus,
                             previous[k][0] if k in previous else None)
                     for k, (start, first) in got.promised.items())
    return Guarded(replace(scenario, reservations=got.reservations), promises,
                   tuple(warnings))
