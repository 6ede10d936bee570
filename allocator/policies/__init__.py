"""The policy registry: every policy is `(scenario, **options) -> grid` behind one name.

The CLI's `--policy` maps straight onto this table.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from allocator.model import Scenario
from allocator.policies.backfill import backfill
from allocator.policies.baselines import fifo, priority
from allocator.policies.fast import fast

Policy = Callable[..., np.ndarray]

POLICIES: dict[str, Policy] = {
    "fast": fast,
    "fifo": fifo,
    "priority": priority,
    "backfill": backfill,
}


def register(name: str, policy: Policy) -> None:
    """Add a policy (the MILP's `full` registers itself here when its module loads)."""
    POLICIES[name] = policy


def get(name: str) -> Policy:
    if name not in POLICIES:
        raise KeyError(f"unknown policy {name!r}; choose from {', '.join(sorted(POLICIES))}")
    return POLICIES[name]


__all__ = ["POLICIES", "Policy", "Scenario", "get", "register"]

from allocator.policies.full import full  # noqa: E402 (the MILP builds on fast, above)

register("full", full)
