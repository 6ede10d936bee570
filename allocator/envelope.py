"""The swap-limited envelope of a realtime demand curve: the held-GPU count every layer of
the allocator follows (the policies' realtime placement and the reservations' vacate time),
so they agree on what moving a service costs.
"""

from __future__ import annotations

import numpy as np


def target_curve(demand: np.ndarray, swap_limit: int, start: int | None,
                 capacity: np.ndarray) -> np.ndarray:
    """The fewest GPUs per step that cover demand with steps of at most `swap_limit`.

    Backward pass: rise early enough to meet each peak; forward pass: never drop faster
    than the limit allows (from `start`, the count held before step 0, when known).
    """
    need: np.ndarray = np.minimum(demand.astype(np.int64), capacity)
    T = len(need)
    for t in range(T - 2, -1, -1):
        need[t] = max(need[t], need[t + 1] - swap_limit)
    previous = start
    for t in range(T):
        if previous is not None:
            need[t] = max(need[t], previous - swap_limit)
        need[t] = min(need[t], capacity[t])
        previous = need[t]
    return need
