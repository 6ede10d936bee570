"""fast's cost in machine instructions per call, counted by valgrind's callgrind.

A latency moves with whatever else the machine runs (BENCHMARKS.md has the same commit
measured at 1.5x and 3x on the same kind of machine); an instruction count does not, so
two trees compare on a busy machine too. Each size runs in two fresh interpreters under
callgrind, one with no call of fast and one with N: their difference over N is one call
(imports, scenario building and the warm-up call cancel out). PYTHONHASHSEED is fixed,
so string hashes repeat; what address layout still moves (objects hashed by identity)
leaves counts within about 3% of each other run to run at 64 GPUs and up, and up to
10% at 8 GPUs, where the Python share is larger, so each is the median of
`--repeats` runs. Counts are not time (a cache miss costs more than an
add), so latencies are still measured by benchmarks/fast_latency.py.

    python benchmarks/fast_instructions.py --tree /tmp/before

Needs valgrind (Debian's package); minutes per tree (about 50x slower than native).
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import typer

HERE = Path(__file__).resolve().parent.parent
# (GPUs, jobs, steps, calls counted): benchmarks/fast_latency.py's sizes
SIZES = ((8, 10, 24, 20), (64, 30, 24, 5), (256, 120, 24, 2), (1024, 1000, 48, 1))

sys.path.insert(0, str(HERE))  # benchmarks/ as a package, run as a script too
from benchmarks.fast_latency import PRELUDE  # noqa: E402  # the tree's allocator and fast

PROBE = PRELUDE + """s = scenario_for(ScaleCase({gpus}, {jobs}, {steps}))
fast(s)
for _ in range({calls}):
    fast(s)
"""


def collected(tree: Path, gpus: int, jobs: int, steps: int, calls: int) -> int:
    """Instructions callgrind counts for the probe (imports, one warm-up, `calls` calls)."""
    code = PROBE.format(tree=str(tree), gpus=gpus, jobs=jobs, steps=steps, calls=calls)
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
         sys.executable, "-c", code],
        capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONHASHSEED": "0"})
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"callgrind printed no count:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def per_call(tree: Path, gpus: int, jobs: int, steps: int, calls: int, repeats: int) -> float:
    """Millions of instructions one call of fast costs (the median of `repeats` counts)."""
    base = statistics.median(collected(tree, gpus, jobs, steps, 0) for _ in range(repeats))
    full = statistics.median(collected(tree, gpus, jobs, steps, calls) for _ in range(repeats))
    return (full - base) / calls / 1e6


def main(
    tree: Path | None = typer.Option(None, "--tree", help="another checkout"),
    max_gpus: int = typer.Option(1024, "--max-gpus", help="largest size to count"),
    repeats: int = typer.Option(3, "--repeats", min=1, help="counts per size (median)"),
) -> None:
    """fast's instructions per call at the latency benchmark's sizes (and --tree's)."""
    if shutil.which("valgrind") is None:
        raise typer.BadParameter("valgrind is not installed (apt-get install valgrind)")
    sys.path.insert(0, str(HERE))
    from allocator.core.markdown import table

    trees = {"this": HERE} | ({"other": tree.resolve()} if tree else {})
    head = ["case", "this M instructions"]
    if tree:
        head += ["other M instructions", "other / this"]
    rows = []
    for gpus, jobs, steps, calls in SIZES:
        if gpus > max_gpus:
            continue
        got = {name: per_call(root, gpus, jobs, steps, calls, repeats)
               for name, root in trees.items()}
        row = [f"{gpus} GPUs / {jobs} jobs / {steps} steps", f"{got['this']:.2f}"]
        if tree:
            row += [f"{got['other']:.2f}", f"x{got['other'] / got['this']:.2f}"]
        rows.append(row)
    print(f"callgrind, PYTHONHASHSEED=0, median of {repeats}; millions of instructions "
          "per call of fast "
          f"({', '.join(f'{c} calls at {g} GPUs' for g, _, _, c in SIZES if g <= max_gpus)})")
    print(table(head, rows), end="")


if __name__ == "__main__":
    typer.run(main)
