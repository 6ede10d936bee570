"""Assertions about fast's plans that several test modules share: legal, and never below
the plan without a step (or fast's default plan); realtime laid on free cells only."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import event

from allocator import grid as gridlib
from allocator.model import RealtimeJob, Scenario
from allocator.policies import fast as fastlib
from allocator.policies.fast import fast
from allocator.validator import violations


def without_and_with(monkeypatch: pytest.MonkeyPatch, scenario: Scenario, module: object,
                     name: str, off: Any, on: Any, **options: Any
                     ) -> tuple[float, np.ndarray]:
    """fast's objective with `module.name` set to `off`, and its grid (asserted legal) with
    it set to `on`; `options` go to fast."""
    monkeypatch.setattr(module, name, off)
    without = gridlib.objective(scenario, fast(scenario, **options))
    monkeypatch.setattr(module, name, on)
    grid = fast(scenario, **options)
    assert violations(scenario, gridlib.to_ids(scenario, grid)) == []
    return without, grid


def legal_and_above_without(scenario: Scenario, what: str, step: tuple[str, int, int],
                            same_both_ways: dict[str, Any] | None = None,
                            **options: Any) -> None:
    """fast with `options` plans legally, and never below its plan with the step off:
    `step` is (fast's constant, its value off, its value on). `same_both_ways`: fast's
    attributes set alike in both runs; by default the final plan's reroute
    (`REROUTE_LAST`) is off: it works on whatever plan the step leaves, and a step's lift
    can leave it less to reroute (a drawn family case: 539 without the re-cuts, 444 with
    them, where the rerouted plans are compared)."""
    constant, off, on = step
    fixed = {"REROUTE_LAST": False} if same_both_ways is None else same_both_ways
    with pytest.MonkeyPatch.context() as mp:
        for name, value in fixed.items():
            mp.setattr(fastlib, name, value)
        without, grid = without_and_with(mp, scenario, fastlib, constant, off, on, **options)
    got = gridlib.objective(scenario, grid)
    event(f"{what} lifted the plan" if got > without + 1e-6 else "plan unchanged")
    assert got >= without - 1e-6


def default_and_with(scenario: Scenario, **options: Any) -> tuple[float, np.ndarray]:
    """fast's default objective, and its grid (asserted legal) with `options`."""
    plain = gridlib.objective(scenario, fast(scenario))
    grid = fast(scenario, **options)
    assert violations(scenario, gridlib.to_ids(scenario, grid)) == []
    return plain, grid


def legal_and_never_worse(scenario: Scenario, what: str, **options: Any) -> float:
    """fast with `options` plans legally and never below fast's default plan; its value
    (`what` names the step in hypothesis' statistics)."""
    plain, grid = default_and_with(scenario, **options)
    got = gridlib.objective(scenario, grid)
    event(f"{what} lifted the plan" if got > plain + 1e-6 else "plan unchanged")
    assert got >= plain - 1e-6
    return got


def assert_realtime_laid(scenario: Scenario, base: np.ndarray, grid: np.ndarray) -> None:
    """`grid` is `base` with realtime jobs on free cells only, and keeps every swap limit
    (the drift layout's guarantees, flipped or not)."""
    assert violations(scenario, gridlib.to_ids(scenario, grid)) == []
    changed = base != grid
    assert (base[changed] == gridlib.FREE).all()
    realtime = [i for i, j in enumerate(scenario.jobs) if isinstance(j, RealtimeJob)]
    assert np.isin(grid[changed], realtime).all()
