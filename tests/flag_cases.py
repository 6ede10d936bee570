"""A stored case told by one of fast's flags: the plan without it, and the plan with it.

Each mechanism test loads a case where one flag lifts fast's plan, turns off the other
mechanisms that reach the same plan by another road, and compares the two objectives.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from allocator.model import Scenario
from allocator.policies import fast as fast_module
from tests.plan_checks import without_and_with


def off_and_on(monkeypatch: pytest.MonkeyPatch, scenario: Scenario, module: object,
               flag: str, others_off: tuple[str, ...] = (), **options: Any
               ) -> tuple[float, np.ndarray]:
    """fast's objective with `module.flag` False, and its grid (asserted legal) with it
    True; `others_off`: fast's own flags set False both ways; `options` go to fast."""
    for other in (*others_off, "REROUTE_LAST", "REPLAN_LAYOUTS", "DRIFT", "FLIP"):  # (the
        # final plan's reroute, the hot path's replan layouts, the drift layout and the
        # flipped ones: other roads)
        if (module, flag) != (fast_module, other):
            monkeypatch.setattr(fast_module, other, False)
    return without_and_with(monkeypatch, scenario, module, flag, False, True, **options)
