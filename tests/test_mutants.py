"""Weakened versions of fast fail the quality oracles: the suite can tell them apart.

Each mutant is built by monkeypatching the real policy, then judged by
`tests/quality_oracle.py`'s `quality_failures` (the same thresholds as the real test). A
mutant that passed would mean the oracles had gone blind to that weakness.

- "better of the baselines": fast replaced by the better of the fifo and priority grids
  (legal, never below either baseline: every other property test passes it).
- "no order search": fast with its bounded order search switched off
  (`SEARCH_PLACEMENTS = 0`).
- "no second realtime layout": fast with realtime always placed before batch work.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from allocator import grid as gridlib
from allocator.model import Scenario
from allocator.policies import POLICIES, baselines
from tests.quality_oracle import quality_failures

fast_module = importlib.import_module("allocator.policies.fast")  # the module, not the function


def better_of_baselines(scenario: Scenario) -> np.ndarray:
    grids = [baselines.fifo(scenario), baselines.priority(scenario)]
    return max(grids, key=lambda g: gridlib.objective(scenario, g))


def use_better_of_baselines(monkeypatch: pytest.MonkeyPatch) -> None:
    # the registry is a read-only lazy mapping: replace its loaded entry for this test only
    monkeypatch.setitem(POLICIES._loaded, "fast", better_of_baselines)


def drop_order_search(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fast_module, "SEARCH_PLACEMENTS", 0)


class _NoLaterLayers(fast_module.RealtimePlacer):
    def later_demand(self, later_only: bool = True) -> np.ndarray:
        # nothing to keep spare: the second layout is skipped (realtime last is not)
        need = super().later_demand(later_only)
        return np.zeros_like(need) if later_only else need


def drop_second_layout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fast_module, "RealtimePlacer", _NoLaterLayers)


MUTANTS = {
    "better of the baselines": use_better_of_baselines,
    "no order search": drop_order_search,
    "no second realtime layout": drop_second_layout,
}


@pytest.mark.parametrize("name", list(MUTANTS))
def test_a_weakened_fast_fails_the_quality_oracles(name: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    MUTANTS[name](monkeypatch)
    failures = quality_failures(POLICIES["fast"])
    assert failures, f"the mutant '{name}' passes every quality threshold"
