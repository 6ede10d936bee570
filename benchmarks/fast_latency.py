"""fast's median in-process latency at the issue's four sizes, this checkout against another.

Each size is a scale scenario of `benchmarks.bench_scale` (same generator, same seed). With
`--tree DIR` (another checkout, e.g. `git archive COMMIT | tar -x -C DIR`, with its C
extension built in place when it has one) both trees are timed in alternating fresh
processes, so the before/after ratio comes from one run on one (loaded) machine:

    python benchmarks/fast_latency.py --tree /tmp/before --rounds 3

Machines of one kind differ (the same commit ran 0.95 ms at 8 GPUs on one and 1.9 ms on
another), so each run also prints a yardstick: a fixed pure-Python loop, timed in a fresh
process each round. Latencies from two machines compare through it, roughly.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import typer

HERE = Path(__file__).resolve().parent.parent
SIZES = ((8, 10, 24), (64, 30, 24), (256, 120, 24), (1024, 1000, 48))
REPEATS = {8: 41, 64: 21, 256: 7, 1024: 3}

# A probe's first lines: the tree's own allocator (not the editable install's), its scale
# scenarios and fast (benchmarks/fast_instructions.py starts its probe the same way).
PRELUDE = """
import json, statistics, sys, time
sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f)]
sys.path.insert(0, {tree!r})
from allocator import grid as gridlib
try:  # this tree: benchmarks/; a tree from before the move: allocator/
    from benchmarks.bench_scale import ScaleCase, scenario_for
except ImportError:
    from allocator.bench_scale import ScaleCase, scenario_for
from allocator.policies.fast import fast
assert sys.modules['allocator.policies.fast'].__file__.startswith({tree!r})
"""

PROBE = PRELUDE + """out = {{}}
for g, j, t in {sizes!r}:
    s = scenario_for(ScaleCase(g, j, t))
    grid = fast(s)
    times = []
    for _ in range({repeats!r}[g]):
        began = time.perf_counter(); fast(s); times.append(time.perf_counter() - began)
    out[f"{{g}} GPUs / {{j}} jobs / {{t}} steps"] = [1000 * statistics.median(times),
                                                     gridlib.objective(s, grid)]
print(json.dumps(out))
"""

YARDSTICK = """
import time
began = time.perf_counter(); total = 0
for i in range(3_000_000):
    total += i * i % 7
print(1000 * (time.perf_counter() - began))
"""


def yardstick() -> float:
    """ms for 3 million steps of a Python loop: how fast this machine runs CPython now."""
    done = subprocess.run([sys.executable, "-c", YARDSTICK], capture_output=True, text=True,
                          check=True)
    return float(done.stdout)


def measure(tree: Path) -> dict[str, list[float]]:
    code = PROBE.format(tree=str(tree), sizes=SIZES, repeats=REPEATS)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout)


def main(
    tree: Path | None = typer.Option(None, "--tree", help="another checkout"),
    rounds: int = typer.Option(3, "--rounds"),
) -> None:
    """fast's median latency at four sizes, this checkout (and --tree another, alternating)."""
    sys.path.insert(0, str(HERE))
    from allocator.core.markdown import table

    trees = {"this": HERE} | ({"other": tree.resolve()} if tree else {})
    runs: dict[str, list[dict]] = {k: [] for k in trees}
    sticks = []
    for _ in range(rounds):
        sticks.append(yardstick())
        for name, root in trees.items():
            runs[name].append(measure(root))
    print(f"load average {os.getloadavg()[0]:.1f}; {rounds} rounds, alternating; "
          "median ms of the rounds' medians; yardstick (3 million Python loop steps) "
          f"{statistics.median(sticks):.0f} ms")
    head = ["case", "this ms", "this objective"]
    if tree:
        head += ["other ms", "other objective", "other / this"]
    rows = []
    for case in runs["this"][0]:
        ms = statistics.median(r[case][0] for r in runs["this"])
        rows.append([case, f"{ms:.2f}", f"{runs['this'][0][case][1]:.2f}"])
        if tree:
            other = statistics.median(r[case][0] for r in runs["other"])
            rows[-1] += [f"{other:.2f}", f"{runs['other'][0][case][1]:.2f}",
                         f"x{other / ms:.1f}"]
    print(table(head, rows), end="")


if __name__ == "__main__":
    typer.run(main)
