"""The plans of every bundled scenario, pinned: a refactor must leave them byte for byte.

For each scenario in data/scenarios/ and data/quality/ (tiny.json's 120 included) and each
deterministic policy (fast, fifo, priority, backfill), the sha256 of the plan's JSON body
(grid, metrics, starts, unplaced, kinds, reservations; the latency left out) is stored in
tests/data/plans_pinned.json. `full` is pinned on tiny.json only: there every solve is
proven optimal in milliseconds, so its grid does not depend on the machine's speed; on
the larger scenarios it stops on a time limit and its grid may differ from run to run.

A change that moves a plan on purpose regenerates the file and says why in its commit:
    GPUPLAN_PIN_PLANS=write .venv/bin/python -m pytest tests/test_plans_pinned.py
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from allocator.plan import make_plan
from allocator.scenario_io import load_scenario, scenario_from_dict

ROOT = Path(__file__).resolve().parents[1]
PINS = Path(__file__).parent / "data" / "plans_pinned.json"
POLICIES = ("fast", "fifo", "priority", "backfill")
NOT_SCENARIOS = {"optima.json", "tiny.json"}


def bundled() -> dict[str, object]:
    """Every bundled scenario by a stable name ("quality/tiny.json#tiny-000" for the list)."""
    found = {}
    for folder in ("scenarios", "quality"):
        for path in sorted((ROOT / "data" / folder).glob("*.json")):
            if path.name not in NOT_SCENARIOS:
                found[f"{folder}/{path.name}"] = load_scenario(path)
    tiny = ROOT / "data" / "quality" / "tiny.json"
    for raw in json.loads(tiny.read_text(encoding="utf-8")):
        found[f"quality/tiny.json#{raw['name']}"] = scenario_from_dict(raw)
    return found


def digest(plan) -> str:
    body = plan.to_dict()
    body.pop("latency_ms")
    body.pop("solve", None)  # full's solve report: timings and the solver's own log
    text = json.dumps(body, sort_keys=True, allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]


def current() -> dict[str, str]:
    out = {}
    for name, scenario in bundled().items():
        policies = POLICIES + (("full",) if "#" in name else ())
        for policy in policies:
            out[f"{name}:{policy}"] = digest(make_plan(scenario, policy))
    return out


@pytest.fixture(scope="module")
def plans() -> dict[str, str]:
    return current()


def test_every_plan_is_pinned(plans: dict[str, str]) -> None:
    if os.environ.get("GPUPLAN_PIN_PLANS") == "write":
        PINS.write_text(json.dumps(plans, indent=0, sort_keys=True) + "\n", encoding="utf-8")
    pinned = json.loads(PINS.read_text(encoding="utf-8"))
    assert sorted(plans) == sorted(pinned), "a scenario or policy was added or removed"
    moved = [key for key in sorted(pinned) if plans[key] != pinned[key]]
    assert moved == [], f"{len(moved)} plans changed, first: {moved[:5]}"


def test_the_pins_cover_every_policy_and_scenario(plans: dict[str, str]) -> None:
    policies = {key.rsplit(":", 1)[1] for key in plans}
    assert policies == {*POLICIES, "full"}
    assert sum(key.startswith("scenarios/") for key in plans) == 7 * len(POLICIES)
    assert sum(key.endswith(":full") for key in plans) == 120
