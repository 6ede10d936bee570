"""Full mode on the benchmark scenarios, run alone: `python benchmarks/full_mode.py`.

How far `fast` is from the optimum per scenario (benchmarks/bench_full.py, which
`gpuplan bench --full` also prints), with the machine, the commit the policies come
from, the command and the load average around it; `--diagnose` splits each loss between
realtime layout and batch order, `--bounds` adds the two relaxations' bounds
(docs/full_mode.md records the runs).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

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
    from allocator.scenario_io import load_scenario
    from allocator.scenarios import SPECS, generate

    files = sorted(directory.glob("*.json"))
    if not files:  # the files are generated; the generator is the source of truth
        return [generate(name) for name in SPECS]
    order = list(SPECS)
    loaded = [load_scenario(f) for f in files]
    return sorted(loaded, key=lambda s: (order.index(s.name) if s.name in order else 99, s.name))


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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="?", default="data/scenarios", type=Path,
                        help="directory of scenario JSON (default data/scenarios; when "
                             "empty, the seven generated benchmark scenarios)")
    parser.add_argument("--time-limit", type=float, default=30.0, help="seconds per solve")
    parser.add_argument("--solver", default="highs", help="highs | cbc")
    parser.add_argument("--only", nargs="*", default=None, help="scenario names to keep")
    parser.add_argument("--diagnose", action="store_true",
                        help="also solve with fast's realtime cells fixed (loss: realtime "
                             "layout vs batch order)")
    parser.add_argument("--bounds", action="store_true",
                        help="also tabulate the block-capacity and LP relaxation bounds")
    args = parser.parse_args(argv)
    scenarios = _load(args.scenarios)
    if args.only:
        scenarios = [s for s in scenarios if s.name in args.only]
    from benchmarks.bench import machine

    print(f"Machine: {machine()}; load average at start {os.getloadavg()[0]:.2f}\n")
    print(f"Code: {_code_version()}\n")
    extra = (" --only " + " ".join(args.only) if args.only else "") + \
        (" --bounds" if args.bounds else "") + (" --diagnose" if args.diagnose else "")
    print(f"Command: `python benchmarks/full_mode.py --time-limit {args.time_limit:g}"
          f" --solver {args.solver}{extra}`\n")
    rows = full_rows(scenarios, time_limit=args.time_limit, solver=args.solver,
                     diagnose=args.diagnose)
    print(full_markdown(rows))
    if args.diagnose:
        print(table(["scenario", "fast", "best with fast's realtime cells", "optimum or best"],
                    [[r["scenario"], f"{r['fast']:.2f}", r["best_with_fast_realtime"],
                      f"{r['full']:.2f}"] for r in rows], ["---", "---:", "---:", "---:"]))
    if args.bounds:
        print(bounds_markdown(bound_rows(scenarios, time_limit=args.time_limit)))
    print(f"Load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
