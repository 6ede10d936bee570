"""fast's quality oracle: its share of the proven optima on fixed inputs, against
thresholds a little below the measured figures (docs/testing.md). `tests/test_quality.py`
asserts it; `tests/test_mutants.py` shows weakened versions of fast fail it."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache

import numpy as np

from allocator import grid as gridlib
from allocator.model import Scenario
from allocator.quality import DIR, load_cases, shares, summarize
from allocator.scenario_io import scenario_from_dict
from tests.brute_force import brute_force

# fast against the MILP's proven optima on data/quality (46 scenarios, 8-14 GPUs, 24 steps).
OPTIMUM_MEAN = 0.979      # measured 0.9809 (no realtime last: 0.9802; no stacked layout: 0.9764;
#                           no pair step: 0.9731)
OPTIMUM_MIN = 0.82        # measured 0.8355
# fast against brute force on data/quality/tiny.json (120 contended scenarios, G, T <= 4).
TINY_MEAN = 0.995         # measured 1.0000 (no second realtime layout: 0.9886)
TINY_MIN = 0.95           # measured 1.0000 (no second realtime layout: 0.0598)

Policy = Callable[[Scenario], np.ndarray]


@cache
def tiny_cases() -> tuple[tuple[Scenario, float], ...]:
    dicts = json.loads((DIR / "tiny.json").read_text(encoding="utf-8"))
    scenarios = [scenario_from_dict(d) for d in dicts]
    return tuple((s, brute_force(s)[0]) for s in scenarios)


@cache
def milp_cases():
    return tuple(load_cases())


def quality_failures(policy: Policy) -> list[str]:
    """What `policy` misses of the thresholds above (empty: it passes)."""
    failures = []
    milp = summarize(shares(policy, milp_cases()))
    if milp.mean < OPTIMUM_MEAN:
        failures.append(f"mean share of the MILP optimum {milp.mean:.4f} < {OPTIMUM_MEAN}")
    if milp.minimum < OPTIMUM_MIN:
        failures.append(f"minimum share of the MILP optimum {milp.minimum:.4f} < {OPTIMUM_MIN}")
    tiny = summarize([gridlib.objective(s, policy(s)) / best for s, best in tiny_cases()])
    if tiny.mean < TINY_MEAN:
        failures.append(f"mean share of the brute-force optimum {tiny.mean:.4f} < {TINY_MEAN}")
    if tiny.minimum < TINY_MIN:
        failures.append(f"minimum share of the brute-force optimum {tiny.minimum:.4f} "
                        f"< {TINY_MIN}")
    return failures
