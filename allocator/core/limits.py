"""The largest inputs gpuplan accepts, and the checks that hold every number to them.

The bounds are chosen from what two cores and a few GB plan in reasonable time (the scale
benchmark runs 4096 GPUs x 1000 jobs x 48 steps); MODEL.md's "Limits" section lists them.
Anything beyond is bad input (exit 2, one line), never a MemoryError or an overflow later.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from allocator.core.errors import InputError

MAX_GPUS = 4096  # cluster.gpus, node_size, a batch job's gpus, simulate --gpus
MAX_STEPS = 672  # cluster.horizon_steps: four weeks of hours, a week of 15-minute steps
MAX_CELLS = 1 << 20  # GPUs x steps of one grid (4096 x 256)
MAX_STEP_MINUTES = 7 * 24 * 60  # one step is at most a week
MAX_JOBS = 5000  # jobs in one scenario (queued + running + realtime)
MAX_DURATION = 100_000  # duration_steps, remaining_steps, arrival_step
MAX_DEMAND = 1 << 20  # realtime GPUs wanted at one step
MAX_SWAP = 1 << 20  # a realtime job's swap_limit
MAX_PRIORITY = 1e6  # priorities and the realtime penalty
MAX_REQUESTS = 1e15  # requests of one service in one traffic row
MAX_FILE_BYTES = 64 << 20  # any JSON input (scenario, plan, cluster, running, services)
MAX_TABLE_BYTES = 512 << 20  # any CSV or Parquet input (history, queue, traffic, traces)
MAX_SIM_DAYS = 28  # simulate --days
MAX_WORKERS = 64  # simulate --workers
MAX_SECONDS = 7 * 24 * 3600.0  # any time limit given in seconds


def check_file_size(path: str | os.PathLike[str], limit: int = MAX_FILE_BYTES) -> None:
    """InputError before reading a file larger than `limit` (a regular file only)."""
    try:
        size = Path(path).stat().st_size
    except OSError:
        return  # the reader reports a missing or unreadable file in its own words
    if size > limit:
        raise InputError(f"file is {size / 2**20:.0f} MiB; gpuplan reads at most "
                         f"{limit / 2**20:.0f} MiB", file=str(path))


def finite(value: float, field: str, *, low: float | None = None, high: float | None = None,
           low_open: bool = False) -> float:
    """`value` as a finite float inside [low, high] (or (low, high] when low_open)."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"must be a number, got {value!r}", field=field) from None
    if not math.isfinite(number):
        raise InputError(f"must be a finite number, got {value!r}", field=field)
    if low is not None and (number <= low if low_open else number < low):
        sign = ">" if low_open else ">="
        raise InputError(f"must be {sign} {low:g}, got {number:g}", field=field)
    if high is not None and number > high:
        raise InputError(f"must be <= {high:g}, got {number:g}", field=field)
    return number


def whole(value: int, field: str, *, low: int = 0, high: int) -> int:
    """`value` as an int inside [low, high]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"must be a whole number, got {value!r}", field=field)
    if not low <= value <= high:
        raise InputError(f"must be from {low} to {high}, got {value}", field=field)
    return value


def check_separator(columns: list[str], path: str | os.PathLike[str]) -> None:
    """A CSV read as one column whose name holds `;` or a tab was written with another
    separator: say so, rather than report every expected column as missing."""
    if len(columns) == 1:
        for sep, name in ((";", "semicolon"), ("\t", "tab"), ("|", "pipe")):
            if sep in str(columns[0]):
                raise InputError(f"looks {name}-separated; gpuplan reads comma-separated CSV",
                                 file=str(path))
