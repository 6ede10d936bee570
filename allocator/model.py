"""The model of MODEL.md as frozen, typed values: cluster, weights, jobs, scenario.

These are built once, by `allocator.scenario_io`, after every rule of the contract
has been checked; code past that boundary trusts them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

BATCH_KINDS: tuple[str, ...] = ("training", "batch_inference", "quantization")
REALTIME = "realtime"


@dataclass(frozen=True)
class Cluster:
    gpus: int
    horizon_steps: int
    node_size: int = 8
    step_minutes: int = 60


@dataclass(frozen=True)
class Weights:
    realtime_penalty: float = 8.0
    decay: float = 0.97


@dataclass(frozen=True)
class Running:
    """A batch job already running when the plan is made: pinned from step 0."""

    first_gpu: int
    remaining_steps: int


@dataclass(frozen=True)
class BatchJob:
    id: str
    kind: str
    priority: float
    gpus: int
    duration_steps: int
    arrival_step: int = 0
    running: Running | None = None


@dataclass(frozen=True)
class RealtimeJob:
    id: str
    priority: float
    demand: tuple[int, ...]
    swap_limit: int
    current_gpus: tuple[int, ...] | None = None
    kind: str = REALTIME


Job = BatchJob | RealtimeJob


@dataclass(frozen=True)
class Reservation:
    """A waiting job's promised block: `gpus` GPUs from `first_gpu`, from step `start`.

    The plan runs the job there (if `start` is inside the horizon) and lets no other batch
    job on that block run past `start` (backfill only ahead of it). Chosen outside the
    allocator (allocator/reservations.py); an extension of MODEL.md, see its page.
    """

    id: str
    start: int
    first_gpu: int
    gpus: int
    # A promise kept across replans has realtime leave the block ahead of its start
    # (`reservations.realtime_off_from`); a pin trial's one plan only at the start itself.
    lead: bool = field(default=True, kw_only=True)


@dataclass(frozen=True)
class Scenario:
    cluster: Cluster
    weights: Weights = field(default_factory=Weights)
    jobs: tuple[Job, ...] = ()
    name: str = ""
    reservations: tuple[Reservation, ...] = ()

    # Cached on first use (the jobs never change; `replace` makes a new scenario): fast
    # asks for them a dozen times a plan, and each scan was a tuple of every job.
    @cached_property
    def batch_jobs(self) -> tuple[BatchJob, ...]:
        return tuple(j for j in self.jobs if isinstance(j, BatchJob))

    @cached_property
    def realtime_jobs(self) -> tuple[RealtimeJob, ...]:
        return tuple(j for j in self.jobs if isinstance(j, RealtimeJob))

    @property
    def G(self) -> int:
        return self.cluster.gpus

    @property
    def T(self) -> int:
        return self.cluster.horizon_steps

    def batch_job_at(self, index: int) -> BatchJob:
        """jobs[index] where the caller's index can only be a batch job's (a start variable,
        a decoder order); TypeError if it is not."""
        job = self.jobs[index]
        if not isinstance(job, BatchJob):
            raise TypeError(f"job {index} ({job.id}) is not a batch job")
        return job

    def realtime_job_at(self, index: int) -> RealtimeJob:
        """jobs[index] where the caller's index can only be a realtime job's; TypeError if not."""
        job = self.jobs[index]
        if not isinstance(job, RealtimeJob):
            raise TypeError(f"job {index} ({job.id}) is not a realtime job")
        return job

    def job(self, job_id: str) -> Job:
        for j in self.jobs:
            if j.id == job_id:
                return j
        raise KeyError(job_id)


def ends_inside(job: BatchJob, start: int, horizon: int) -> bool:
    """MODEL.md's `completed`: the whole run ends inside the horizon."""
    if job.running:
        return job.running.remaining_steps <= horizon
    return start + job.duration_steps <= horizon


def largest_queued(scenario: Scenario) -> int:
    """The GPUs of the largest job not yet running (1 with none): the block size the
    realtime layouts keep whole."""
    return max((j.gpus for j in scenario.batch_jobs if not j.running), default=1)


def queued_work(scenario: Scenario) -> int:
    """Queued batch jobs x steps: what the plan's bound and its refinement cost grow with."""
    return sum(1 for j in scenario.batch_jobs if not j.running) * scenario.T
