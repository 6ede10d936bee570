"""fast against proven optima on a fixed set of scenarios: the quality yardstick.

The set (`data/quality/`) is the benchmark generator's six specs of up to 14 GPUs (scale
left out) at seeds 1-8: 48 scenarios stored as JSON, each solved once by the MILP
(`python benchmarks/optima.py --solve`, minutes) with the proven optimum recorded in
`data/quality/optima.json`. A scenario whose solve did not prove optimality is kept in
the file with its status and left out of the set. The optimum of a stored scenario never
changes, so measuring a policy against it is quick (one fast call per scenario) and
exact: the tests assert fast's mean and minimum share of the optimum
(`tests/test_quality.py`), and `gpuplan figures` publishes them.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from allocator import grid as gridlib
from allocator.grid import Grid
from allocator.model import Scenario
from allocator.result import PolicyResult
from allocator.scenario_io import load_scenario

DIR = Path(__file__).resolve().parents[1] / "data" / "quality"
OPTIMA = "optima.json"


@dataclass(frozen=True)
class Case:
    """One stored scenario and its proven optimum."""

    key: str          # "<seed>/<name>"
    seed: int
    scenario: Scenario
    optimum: float


def case_key(seed: int, name: str) -> str:
    return f"{seed}/{name}"


def case_file(directory: Path, seed: int, name: str) -> Path:
    return directory / f"seed{seed}-{name}.json"


def load_cases(directory: Path = DIR) -> list[Case]:
    """The proven-optimal cases, in seed then spec order."""
    records = json.loads((directory / OPTIMA).read_text(encoding="utf-8"))
    cases = []
    for key, record in records.items():
        if record["status"] != "optimal":
            continue
        seed, name = key.split("/", 1)
        scenario = load_scenario(case_file(directory, int(seed), name))
        cases.append(Case(key, int(seed), scenario, float(record["optimum"])))
    return cases


def shares(policy: Callable[[Scenario], Grid | PolicyResult],
           cases: Sequence[Case]) -> list[float]:
    """policy's objective / the optimum, per case (the optima here are all positive)."""
    out = []
    for case in cases:
        grid = PolicyResult.of(policy(case.scenario)).grid
        out.append(gridlib.objective(case.scenario, grid) / case.optimum)
    return out


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    minimum: float
    below_97: int


def summarize(values: Sequence[float]) -> Summary:
    return Summary(len(values), statistics.fmean(values), min(values),
                   sum(v < 0.97 for v in values))
