"""The swap-limit envelope: the one curve the forecaster and the allocator both follow.

A realtime job may change its GPU count by at most `swap_limit` a step. The fewest GPUs
per step that still cover a demand curve under that rule is its upper envelope
max_j(raw[j] - swap_limit * |t - j|), held from `start` (the count before step 0) and,
in the allocator, under the GPUs free each step. The forecaster shapes its demand with it
(forecasting.demand.shape_demand) and the policies and reservations place against it
(target_curve): one implementation, so both agree on switching cost by construction.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def swap_envelope(raw: Sequence[int], swap_limit: int, start: int | None = None,
                  capacity: Sequence[int] | None = None) -> list[int]:
    """The fewest GPUs per step covering `raw` (clipped to `capacity`) with steps <= limit.

    Backward pass: rise early enough to meet each peak; forward pass: never drop faster
    than the limit allows from the step before (from `start` at step 0, when known), and
    never above `capacity`. Plain lists: exact for any integer, and quicker than numpy
    scalars in this loop.
    """
    out = [int(x) for x in raw]
    cap = None if capacity is None else [int(c) for c in capacity]
    if cap is not None:
        out = [x if x <= c else c for x, c in zip(out, cap, strict=True)]
    for t in range(len(out) - 2, -1, -1):  # comparisons, not max(): a third of the time
        lower = out[t + 1] - swap_limit
        if lower > out[t]:
            out[t] = lower
    previous = start
    for t in range(len(out)):
        now = out[t]
        if previous is not None and previous - swap_limit > now:
            now = previous - swap_limit
        if cap is not None and cap[t] < now:
            now = cap[t]
        out[t] = previous = now
    return out


def target_curve(demand: np.ndarray | tuple[int, ...], swap_limit: int, start: int | None,
                 capacity: np.ndarray) -> np.ndarray:
    """The allocator's held-GPU curve: `swap_envelope` under the GPUs free each step."""
    raw = demand if isinstance(demand, tuple) else np.asarray(demand).astype(np.int64).tolist()
    return np.array(swap_envelope(raw, swap_limit, start, np.asarray(capacity).tolist()),
                    dtype=np.int64)
