"""The judge: checks a grid against MODEL.md's five constraints and recomputes its metrics.

It reads only the scenario and the grid (job ids or None), never a policy's own
bookkeeping, so it can check any policy, or a plan file from anywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from allocator.model import BatchJob, RealtimeJob, Scenario, ends_inside
from allocator.reservations import plan_problems

IdGrid = Sequence[Sequence[str | None]]


@dataclass(frozen=True)
class Metrics:
    utilization: float
    value: float
    rt_shortfall: int
    completed: int
    objective: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


@dataclass(frozen=True)
class BatchRun:
    """Where and when a batch job runs in a grid."""

    start: int
    end: int  # exclusive
    first_gpu: int


def _cells_by_job(scenario: Scenario, grid: IdGrid) -> tuple[dict[str, list[set[int]]], list[str]]:
    known = {job.id for job in scenario.jobs}
    cells: dict[str, list[set[int]]] = {j: [set() for _ in range(scenario.T)] for j in known}
    problems: list[str] = []
    if len(grid) != scenario.T:
        return cells, [f"grid has {len(grid)} rows, the horizon has {scenario.T} steps"]
    for t, row in enumerate(grid):
        if len(row) != scenario.G:
            problems.append(f"step {t}: row has {len(row)} cells, the cluster has "
                            f"{scenario.G} GPUs")
            continue
        for g, cell in enumerate(row):
            if cell is None:
                continue
            if cell not in known:
                problems.append(f"step {t} GPU {g}: unknown job {cell!r}")
                continue
            cells[cell][t].add(g)
    return cells, problems


def _batch_runs(scenario: Scenario, grid: IdGrid) -> dict[str, BatchRun]:
    """Start, end and block of every batch job present in a (legal) grid."""
    cells, _ = _cells_by_job(scenario, grid)
    runs = {}
    for job in scenario.batch_jobs:
        steps = [t for t, held in enumerate(cells[job.id]) if held]
        if steps:
            runs[job.id] = BatchRun(steps[0], steps[-1] + 1, min(cells[job.id][steps[0]]))
    return runs


def violations(scenario: Scenario, grid: IdGrid) -> list[str]:
    """Every way the grid breaks the contract; an empty list means the plan is legal.

    Constraint 1 (one job per GPU per step) holds by the grid's shape: one id per cell.
    """
    cells, problems = _cells_by_job(scenario, grid)
    if problems:
        return problems
    T, G = scenario.T, scenario.G
    for job in scenario.batch_jobs:
        problems.extend(_batch_violations(job, cells[job.id], T, G))
    for service in scenario.realtime_jobs:
        problems.extend(_swap_violations(service, cells[service.id]))
    if scenario.reservations and not problems:
        runs = _batch_runs(scenario, grid)
        problems.extend(plan_problems(scenario, {j: (r.start, r.first_gpu)
                                                 for j, r in runs.items()}))
    return problems


def _batch_violations(job: BatchJob, held: list[set[int]], T: int, G: int) -> list[str]:
    out: list[str] = []
    steps = [t for t, gpus in enumerate(held) if gpus]
    if not steps:
        if job.running:
            out.append(f"{job.id}: running job is missing (constraint 2: inherited work)")
        return out
    start = steps[0]
    block = held[start]
    first = min(block)
    # Constraint 2: exactly `gpus` GPUs; constraint 3: an aligned contiguous block.
    if block != set(range(first, first + job.gpus)):
        out.append(f"{job.id}: holds GPUs {sorted(block)} at step {start}, not a contiguous "
                   f"block of {job.gpus} (constraints 2-3)")
        return out
    if first % job.gpus and not job.running:  # a running block stays where it runs
        out.append(f"{job.id}: block starts at GPU {first}, not aligned to {job.gpus} "
                   f"(constraint 3)")
    if job.running:
        if start != 0 or first != job.running.first_gpu:
            out.append(f"{job.id}: running job must hold [{job.running.first_gpu}, "
                       f"{job.running.first_gpu + job.gpus}) from step 0 (constraint 2)")
        length = job.running.remaining_steps
    else:
        if start < job.arrival_step:
            out.append(f"{job.id}: starts at step {start}, before its arrival step "
                       f"{job.arrival_step} (constraint 2)")
        length = job.duration_steps
    expected = list(range(start, min(start + length, T)))
    if steps != expected:
        out.append(f"{job.id}: runs at steps {steps[0]}..{steps[-1]} ({len(steps)} steps), "
                   f"expected {expected[0]}..{expected[-1]} without interruption (constraint 5)")
    for t in steps:
        if held[t] != block:
            out.append(f"{job.id}: moves from block {sorted(block)} to {sorted(held[t])} at step "
                       f"{t} (constraint 5)")
            break
    return out


def _swap_violations(job: RealtimeJob, held: list[set[int]]) -> list[str]:
    out = []
    previous = set(job.current_gpus) if job.current_gpus is not None else None
    for t, now in enumerate(held):
        if previous is not None and len(now ^ previous) > job.swap_limit:
            out.append(f"{job.id}: changes {len(now ^ previous)} GPUs at step {t}, swap limit "
                       f"{job.swap_limit} (constraint 4)")
        previous = now
    return out


def compute_metrics(scenario: Scenario, grid: IdGrid) -> Metrics:
    """MODEL.md's reported metrics, from the grid alone."""
    cells, problems = _cells_by_job(scenario, grid)
    if problems:
        raise ValueError("; ".join(problems))
    T, G = scenario.T, scenario.G
    decay = scenario.weights.decay
    batch_cells = 0
    value = 0.0
    objective = 0.0
    completed = 0
    for job in scenario.batch_jobs:
        counts = [len(held) for held in cells[job.id]]
        n = sum(counts)
        if not n:
            continue
        batch_cells += n
        value += job.priority * n
        objective += job.priority * sum(c * decay**t for t, c in enumerate(counts))
        start = next(t for t, c in enumerate(counts) if c)
        completed += ends_inside(job, start, T)
    served = 0
    shortfall_total = 0
    penalty = 0.0
    for service in scenario.realtime_jobs:
        for t, need in enumerate(service.demand):
            have = len(cells[service.id][t])
            served += min(have, need)
            short = max(0, need - have)
            shortfall_total += short
            penalty += service.priority * short
    objective -= scenario.weights.realtime_penalty * penalty
    utilization = (batch_cells + served) / (G * T)
    return Metrics(utilization=utilization, value=value, rt_shortfall=shortfall_total,
                   completed=completed, objective=objective)


def metrics_agree(claimed: dict[str, object], actual: Metrics) -> list[str]:
    """MODEL.md's tolerance: relative 1e-6, `completed` exact."""
    out = []
    for name, want in actual.as_dict().items():
        have = claimed.get(name)
        if isinstance(have, bool) or not isinstance(have, int | float):
            out.append(f"metric {name} is missing")
        elif name == "completed":
            if have != want:
                out.append(f"metric {name}: plan says {have}, grid gives {want}")
        elif abs(have - want) > 1e-6 * max(1.0, abs(have), abs(want)):
            out.append(f"metric {name}: plan says {have}, grid gives {want}")
    return out
