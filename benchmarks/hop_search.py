"""The realtime hop search's own time, and plan-day's whole fast, on generated tuning seeds.

Each tree runs in a fresh process (this checkout, and `--tree DIR`'s code when given,
e.g. `git archive COMMIT | tar -x -C DIR` with its C extension built in place), the two
alternating, so that a before/after ratio comes from one run on one machine. The hop
search is timed inside `fast(hops=1)` (best of three passes over the scenarios); plan-day's
fast is `fast(pin_trials=24, defer_trials=12, hops=2)`, the best of two calls each. The
scenarios come from this checkout's generator, so both trees plan the same ones:

    python benchmarks/hop_search.py --tree /tmp/before
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import typer

HERE = Path(__file__).resolve().parent.parent

PROBE = """
import json, statistics, sys, time
sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f)]
sys.path.insert(0, {tree!r}); sys.path.insert(1, {here!r})
from allocator.policies import hops as hopping
import allocator.policies.fast as fastlib
assert hopping.__file__.startswith({tree!r}), hopping.__file__
from benchmarks.bench_quality import TUNING_SEEDS, TUNING2_SEEDS, scenario_for, small_cases
seeds = {{"tuning": TUNING_SEEDS, "tuning2": TUNING2_SEEDS}}[{which!r}]
scenarios = [scenario_for(c) for c in small_cases(seeds)][:{count!r}]
search, spent = hopping.search, [0.0]
def timed(*args, **kwargs):
    began = time.perf_counter(); out = search(*args, **kwargs)
    spent[0] += time.perf_counter() - began
    return out
fastlib.hopping.search = timed
for s in scenarios:
    fastlib.fast(s, hops=1)
passes = []
for _ in range(3):
    spent[0] = 0.0
    for s in scenarios:
        fastlib.fast(s, hops=1)
    passes.append(spent[0])
day = []
for s in scenarios:
    best = float("inf")
    for _ in range(2):
        began = time.perf_counter()
        fastlib.fast(s, pin_trials=24, defer_trials=12, hops=2)
        best = min(best, time.perf_counter() - began)
    day.append(best)
print(json.dumps({{"hop_ms": 1000 * min(passes) / len(scenarios),
                  "day_median_ms": 1000 * statistics.median(day),
                  "day_total_s": sum(day), "n": len(scenarios)}}))
"""


def measure(tree: Path, which: str, count: int) -> dict[str, float]:
    code = PROBE.format(tree=str(tree), here=str(HERE), which=which, count=count)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=HERE)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(
    tree: Path | None = typer.Option(None, "--tree", help="another checkout to time beside"),
    which: str = typer.Option("tuning2", "--set", help="tuning or tuning2"),
    count: int = typer.Option(30, "--count", help="the first N scenarios of the set"),
    rounds: int = typer.Option(2, "--rounds", help="alternating runs of each tree"),
) -> None:
    """Hop search ms a plan and plan-day's fast per tree, alternating, one line each."""
    if which not in ("tuning", "tuning2"):
        raise typer.BadParameter("tuning or tuning2 (the test seeds stay out)",
                                 param_hint="--set")
    trees = {"this": HERE} | ({"other": tree.resolve()} if tree else {})
    for r in range(rounds):
        for name, root in trees.items():
            got = measure(root, which, count)
            print(f"round {r + 1} {name} ({root}): hop search {got['hop_ms']:.2f} ms a plan, "
                  f"plan-day's fast median {got['day_median_ms']:.1f} ms, "
                  f"total {got['day_total_s']:.2f} s over {got['n']:.0f} scenarios")


if __name__ == "__main__":
    typer.run(main)
