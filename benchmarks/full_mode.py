"""Full mode on the benchmark scenarios, run alone: `python benchmarks/full_mode.py`.

How far `fast` is from the optimum per scenario (benchmarks/bench_full.py, which
`gpuplan bench --full` also prints), with the machine, the commit the policies come
from, the command and the load average around it; `--diagnose` splits each loss between
realtime layout and batch order, `--bounds` adds the two relaxations' bounds
(docs/full_mode.md records the runs).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from allocator.core.markdown import table  # noqa: E402
from allocator.model import Scenario  # noqa: E402
from benchmarks.bench_full import (  # noqa: E402
    bound_rows,
    bounds_markdown,
    full_markdown,
    full_rows,
)


def _load(directory: Path) -> list[Scenario]:
    from allocator.scenario_io import load_scenario_dir
    from allocator.scenarios import SPECS, generate

    if not any(directory.glob("*.json")):  # the files are generated; the generator rules
        return [generate(name) for name in SPECS]
    return load_scenario_dir(directory)


def _code_version() -> str:
    """The commit the policies come from, and whether they had uncommitted edits."""
    import subprocess

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], capture_output=True, text=True,
                                  check=False).stdout.strip()
        except OSError:
            return ""

    commit = git("log", "-1", "--format=%h", "--", "allocator/policies") or "unknown"
    dirty = git("status", "--porcelain", "--", "allocator/policies")
    return f"allocator/policies at {commit}" + (" with uncommitted edits" if dirty else "")


def main(
    scenarios_dir: Path = typer.Argument(Path("data/scenarios"),
                                         help="directory of scenario JSON (when empty, the "
                                              "seven generated benchmark scenarios)"),
    time_limit: float = typer.Option(30.0, "--time-limit", help="seconds per solve"),
    solver: str = typer.Option("highs", "--solver", help="highs | cbc"),
    only: list[str] | None = typer.Option(None, "--only",
                                          help="a scenario name to keep (repeat for more)"),
    diagnose: bool = typer.Option(False, "--diagnose",
                                  help="also solve with fast's realtime cells fixed (loss: "
                                       "realtime layout vs batch order)"),
    bounds: bool = typer.Option(False, "--bounds",
                                help="also tabulate the block-capacity and LP relaxation "
                                     "bounds"),
) -> None:
    """fast against the optimum per scenario, with the machine, code and command."""
    scenarios = _load(scenarios_dir)
    if only:
        scenarios = [s for s in scenarios if s.name in only]
    from benchmarks.bench import machine

    print(f"Machine: {machine()}; load average at start {os.getloadavg()[0]:.2f}\n")
    print(f"Code: {_code_version()}\n")
    extra = "".join(f" --only {name}" for name in only or ()) + \
        (" --bounds" if bounds else "") + (" --diagnose" if diagnose else "")
    print(f"Command: `python benchmarks/full_mode.py --time-limit {time_limit:g}"
          f" --solver {solver}{extra}`\n")
    rows = full_rows(scenarios, time_limit=time_limit, solver=solver, diagnose=diagnose)
    print(full_markdown(rows))
    if diagnose:
        print(table(["scenario", "fast", "best with fast's realtime cells", "optimum or best"],
                    [[r["scenario"], f"{r['fast']:.2f}", r["best_with_fast_realtime"],
                      f"{r['full']:.2f}"] for r in rows], ["---", "---:", "---:", "---:"]))
    if bounds:
        print(bounds_markdown(bound_rows(scenarios, time_limit=time_limit)))
    print(f"Load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    typer.run(main)
