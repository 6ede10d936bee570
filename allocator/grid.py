"""The grid as the policies hold it: a (T, G) int32 array of job indices, -1 for free.

Job indices are positions in `scenario.jobs`; ids appear only at the edges.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from allocator.model import BatchJob, RealtimeJob, Scenario

FREE = -1

# The plan as the policies hold it (see above); MODEL.md's id grid exists only at the edges.
Grid = NDArray[np.int32]
# A (T, G) or per-GPU yes/no: busy cells, pinned cells, blocked columns.
Mask = NDArray[np.bool_]


def empty(scenario: Scenario) -> Grid:
    return np.full((scenario.T, scenario.G), FREE, dtype=np.int32)


def pin_running(scenario: Scenario, grid: Grid) -> None:
    """Constraint 2, inherited work: a running job holds its block from step 0."""
    for index, job in enumerate(scenario.jobs):
        if isinstance(job, BatchJob) and job.running:
            first = job.running.first_gpu
            grid[: min(job.running.remaining_steps, scenario.T), first : first + job.gpus] = index


class Placement(NamedTuple):
    """Where a batch job sits in a grid: steps [start, end), GPUs from first_gpu."""

    start: int
    first_gpu: int
    end: int


def placement(grid: Grid, index: int) -> Placement | None:
    """Job `index`'s cells in `grid` as a placement (None: it has none)."""
    rows, cols = np.nonzero(grid == index)
    if not len(rows):
        return None
    return Placement(int(rows.min()), int(cols.min()), int(rows.max()) + 1)


def placements(scenario: Scenario, grid: Grid, *,
               queued_only: bool = False) -> dict[int, Placement]:
    """Every placed batch job's placement, by job index (running jobs left out if
    `queued_only`: their placement is pinned, not chosen)."""
    out = {}
    for i, job in enumerate(scenario.jobs):
        if isinstance(job, BatchJob) and not (queued_only and job.running):
            found = placement(grid, i)
            if found is not None:
                out[i] = found
    return out


def to_ids(scenario: Scenario, grid: Grid) -> list[list[str | None]]:
    ids = [job.id for job in scenario.jobs]
    return [[ids[c] if c >= 0 else None for c in row] for row in grid.tolist()]


def from_ids(scenario: Scenario, ids: list[list[str | None]]) -> Grid:
    """`to_ids` turned back: a grid of job ids (None: free) as the policies' cells."""
    index = {job.id: i for i, job in enumerate(scenario.jobs)}
    return np.array([[FREE if c is None else index[c] for c in row] for row in ids],
                    dtype=np.int32)


def objective(scenario: Scenario, grid: Grid) -> float:
    """MODEL.md's objective, vectorised for comparing candidate grids inside a policy.

    The validator's `compute_metrics` is the reference; a test holds the two equal.
    """
    return Scorer(scenario)(grid)


class Scorer:
    """`objective` with the scenario's weights laid out once: fast scores a dozen
    candidate grids per plan, and the per-job loop was a seventh of its time."""

    def __init__(self, scenario: Scenario) -> None:
        n, T = len(scenario.jobs), scenario.T
        self.n, self.T, self.G = n, T, scenario.G
        decay = scenario.weights.decay ** np.arange(T)
        batch = [i for i, j in enumerate(scenario.jobs) if isinstance(j, BatchJob)]
        realtime = [(i, j) for i, j in enumerate(scenario.jobs) if isinstance(j, RealtimeJob)]
        self.batch = np.asarray(batch, dtype=np.int64)
        self.batch_weight = np.outer(decay, [scenario.jobs[i].priority for i in batch])
        self.realtime = np.asarray([i for i, _ in realtime], dtype=np.int64)
        self.demand = np.asarray([j.demand for _, j in realtime],
                                 dtype=np.float64).reshape(len(realtime), T).T
        self.penalty = np.asarray([scenario.weights.realtime_penalty * j.priority
                                   for _, j in realtime], dtype=np.float64)
        self._count = _COUNTS[0] if _COUNTS else None  # compiled (None: bincount)
        # the columns of counts each sum reads: a slice where the jobs are consecutive
        # (a view, not a gathered copy; the same cells in the same order)
        self._batch_cols = _columns(batch)
        self._realtime_cols = _columns([i for i, _ in realtime])

    def __call__(self, grid: Grid) -> float:
        if self.n == 0:
            return 0.0
        return self.of_counts(self.counts(grid))

    def of_counts(self, counts: np.ndarray) -> float:
        """The objective from `counts` (cells per step and job, FREE in the last column)."""
        return self.split(counts)[0]

    def split(self, counts: np.ndarray) -> tuple[float, float]:
        """(the objective, what realtime shortfall takes off it) from `counts`."""
        if self.n == 0:
            return 0.0, 0.0
        lost = self._short(counts)
        return float((counts[:, self._batch_cols] * self.batch_weight).sum()) - lost, lost

    def split_all(self, grids: list[Grid]) -> tuple[list[np.ndarray], list[tuple[float, float]]]:
        """`counts` and `split` of every grid, counted in one pass over them all (fast
        scores about ten candidates a plan; per grid, numpy's call overhead was most of
        it): the same sums, each over its own grid's cells in the same order."""
        if self.n == 0 or not grids:
            counted = [self.counts(g) for g in grids]
            return counted, [self.split(c) for c in counted]
        if self._count is not None and all(_compiled(g) for g in grids):
            out = np.empty((len(grids), self.T, self.n + 1), dtype=np.int64)
            self._count(list(grids), self.n + 1, out)  # the same counts, in C
            counts = out
        else:
            counts = self._bincounts(grids)
        # contiguous rows: numpy sums a strided axis in plain order and a contiguous one
        # pairwise, as `split` does (a drawn 7-GPU grid differed in the last bit)
        batch = np.ascontiguousarray(counts[:, :, self._batch_cols] * self.batch_weight)
        values = batch.reshape(len(grids), -1).sum(axis=1)
        if len(self.realtime):
            short = np.maximum(self.demand - counts[:, :, self._realtime_cols], 0).sum(axis=1)
            if len(self.realtime) == 1:  # a dot of one term is 0.0 plus its product
                lost = (0.0 + short[:, 0] * self.penalty[0]).tolist()
            else:
                lost = [float(row @ self.penalty) for row in short]
        else:
            lost = [0.0] * len(grids)
        return list(counts), [(float(v) - cost, cost) for v, cost in zip(values, lost, strict=True)]

    def _bincounts(self, grids: list[Grid]) -> np.ndarray:
        """`counts` of every grid as one (grids, T, n + 1) array, by one bincount."""
        cells = self.T * (self.n + 1)
        flat = np.concatenate([g.ravel() for g in grids]) % (self.n + 1)
        # grid k's step t starts at (k * T + t) * (n + 1): `rows` tiled, each copy offset
        # by k's cells (numpy calls are most of the cost here)
        flat += np.repeat(np.arange(len(grids) * self.T) * (self.n + 1), self.G)
        return np.bincount(flat, minlength=cells * len(grids)).reshape(
            len(grids), self.T, self.n + 1)

    def shortfall_cost(self, grid: Grid) -> float:
        """What `grid`'s realtime shortfall takes off the objective."""
        return self._short(self.counts(grid)) if self.n else 0.0

    def counts(self, grid: Grid) -> np.ndarray:
        """Cells per (step, job) of `grid`, FREE ones in the last column."""
        if self._count is not None and _compiled(grid):
            out = np.empty((self.T, self.n + 1), dtype=np.int64)
            self._count([grid], self.n + 1, out)  # the same counts, in C
            return out
        # cells per (step, job); FREE (-1) wraps to the last column
        rows = np.repeat(np.arange(self.T) * (self.n + 1), self.G)
        return np.bincount(rows + grid.ravel() % (self.n + 1),
                           minlength=self.T * (self.n + 1)).reshape(self.T, self.n + 1)

    def holds_realtime(self, grid: Grid, other: Grid) -> bool:
        """Whether every service holds at least as many GPUs in `grid` as in `other` at
        every step: the headroom a plan keeps for demand its forecast missed."""
        if not len(self.realtime):
            return True
        cols = self._realtime_cols
        return bool((self.counts(grid)[:, cols] >= self.counts(other)[:, cols]).all())

    def _short(self, counts: np.ndarray) -> float:
        if not len(self.realtime):
            return 0.0
        short = np.maximum(self.demand - counts[:, self._realtime_cols], 0).sum(axis=0)
        if len(short) == 1:  # a dot of one term is 0.0 plus its product
            return float(0.0 + short[0] * self.penalty[0])
        return float(short @ self.penalty)


def _compiled(grid: Grid) -> bool:
    """Whether the compiled counts read `grid` (fast's own: int32, C-contiguous, 2-D)."""
    return grid.dtype == np.int32 and grid.ndim == 2 and grid.flags.c_contiguous


# The compiled counts (allocator/policies/_packc.c's `counts(grids, n + 1, out)`),
# registered by allocator.policies.decoder once the extension loads (the policies sit
# above this module); empty: numpy's bincount, the same counts.
_COUNTS: list[Callable[[list[Grid], int, np.ndarray], None]] = []


def use_compiled_counts(counts: Callable[[list[Grid], int, np.ndarray], None]) -> None:
    """Count cells with `counts` from now on (allocator.policies.decoder registers it)."""
    _COUNTS[:] = [counts]


def _columns(indices: list[int]) -> slice | np.ndarray:
    """`indices` as a slice where they are consecutive and ascending, else as an array."""
    if indices and indices == list(range(indices[0], indices[-1] + 1)):
        return slice(indices[0], indices[-1] + 1)
    return np.asarray(indices, dtype=np.int64)
