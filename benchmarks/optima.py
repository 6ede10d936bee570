"""The quality yardstick (allocator.quality): every policy's share of the proven optima in
data/quality, or with `--solve` the set regenerated and solved again (minutes):
    python benchmarks/optima.py            # fast, priority and fifo against optima.json
    python benchmarks/optima.py --solve    # rewrites data/quality and optima.json
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

import typer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from allocator import grid as gridlib  # noqa: E402
from allocator import quality  # noqa: E402
from allocator.policies import POLICIES  # noqa: E402
from allocator.scenario_io import scenario_to_dict  # noqa: E402

SEEDS = (1, 2, 3, 4, 5, 6, 7, 8)


def solve_set(directory: Path = quality.DIR, seeds: Sequence[int] = SEEDS,
              time_limit: float = 60.0) -> dict[str, dict]:
    """Generate the scenarios, solve each with the MILP, write the JSON files and optima."""
    import importlib

    from allocator.scenarios import SPECS, generate

    full = importlib.import_module("allocator.policies.full").full
    directory.mkdir(parents=True, exist_ok=True)
    records: dict[str, dict] = {}
    for seed in seeds:
        for name in SPECS:
            if name == "scale":
                continue
            scenario = generate(name, seed)
            quality.case_file(directory, seed, name).write_text(
                json.dumps(scenario_to_dict(scenario), indent=1) + "\n", encoding="utf-8")
            result = full(scenario, time_limit=time_limit)
            grid, report = result.grid, result.solve
            best = gridlib.objective(scenario, grid)
            records[quality.case_key(seed, name)] = {
                "status": report.status,
                "optimum": round(best, 6) if report.status == "optimal" else None,
                "best_found": round(best, 6),
                "best_bound": report.best_bound,
                "gap": report.gap,
            }
            print(quality.case_key(seed, name), records[quality.case_key(seed, name)], flush=True)
    (directory / quality.OPTIMA).write_text(json.dumps(records, indent=1) + "\n", encoding="utf-8")
    return records


def main(
    solve: bool = typer.Option(False, "--solve", help="regenerate data/quality and solve "
                                                      "every scenario (minutes)"),
    time_limit: float = typer.Option(60.0, "--time-limit", help="seconds per solve"),
    directory: Path = typer.Option(quality.DIR, "--dir"),
) -> None:
    """Every policy's share of the proven optima (with --solve, the set solved again)."""
    if solve:
        solve_set(directory, time_limit=time_limit)
    cases = quality.load_cases(directory)
    for policy in ("fast", "priority", "fifo"):
        s = quality.summarize(quality.shares(POLICIES[policy], cases))
        print(f"{policy}: {s.n} cases, mean {s.mean:.2%}, min {s.minimum:.2%}, "
              f"below 97% {s.below_97}")


if __name__ == "__main__":
    typer.run(main)
