"""The policy registry: every policy is `(scenario, **options) -> grid` behind one name
(or a `PolicyResult`, the grid with the solve's report: `full`).

The CLI's `--policy` maps straight onto this table. Entries are resolved on first use,
so planning with `fast` never imports the MILP's PuLP and HiGHS (`full`), and a policy
module that fails to import only breaks that policy.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping

from allocator.grid import Grid
from allocator.result import PolicyResult

Policy = Callable[..., Grid | PolicyResult]

# name -> "module:attribute", imported when the policy is first asked for.
BUILTIN: dict[str, str] = {
    "fast": "allocator.policies.fast:fast",
    "fifo": "allocator.policies.baselines:fifo",
    "priority": "allocator.policies.baselines:priority",
    "backfill": "allocator.policies.backfill:backfill",
    "full": "allocator.policies.full:full",
}


class Registry(Mapping[str, Policy]):
    """A read-only mapping of policy names to callables, each imported on first lookup."""

    def __init__(self, specs: Mapping[str, str]) -> None:
        self._specs: dict[str, str] = dict(specs)
        self._loaded: dict[str, Policy] = {}

    def __getitem__(self, name: str) -> Policy:
        if name not in self._loaded:
            module, _, attr = self._specs[name].partition(":")  # KeyError: unknown name
            self._loaded[name] = getattr(importlib.import_module(module), attr)
        return self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)

    def add(self, name: str, policy: Policy) -> None:
        self._specs.setdefault(name, f"<registered {name}>")
        self._loaded[name] = policy


POLICIES = Registry(BUILTIN)


def register(name: str, policy: Policy) -> None:
    """Add a policy under `name` (already imported; it replaces a lazy entry of that name)."""
    POLICIES.add(name, policy)


def get(name: str) -> Policy:
    if name not in POLICIES:
        raise KeyError(f"unknown policy {name!r}; choose from {', '.join(sorted(POLICIES))}")
    return POLICIES[name]


__all__ = ["BUILTIN", "POLICIES", "Policy", "Registry", "get", "register"]
