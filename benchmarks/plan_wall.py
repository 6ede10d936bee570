"""Whole-process wall time of `gpuplan plan`: imports, planning, validation, writing.

Runs the command N times in fresh interpreters and prints the median. `--tree DIR` runs
the code of another checkout instead (e.g. `git archive COMMIT | tar -x -C DIR`, with
its C extension built in place when it has one), interleaved with this one, so that a
before/after ratio comes from one run on one machine:

    python benchmarks/plan_wall.py data/scenarios/mixed-control.json --tree /tmp/before

By default the runs use Python's bytecode cache, as an installed package does (one untimed
run per tree writes it, even where PYTHONDONTWRITEBYTECODE is set); `--no-bytecode`
compiles every module on every run instead, which costs about 100 ms more.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import typer

HERE = Path(__file__).resolve().parent.parent


def one_run(tree: Path, scenario: str, policy: str, out: str, bytecode: bool) -> float:
    """Seconds for one `gpuplan plan` in a fresh interpreter, importing from `tree`."""
    code = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path "
            "if 'editable' not in repr(f)]; "
            f"sys.path.insert(0, {str(tree)!r}); "
            f"sys.argv = ['gpuplan', 'plan', {scenario!r}, '--policy', {policy!r}, "
            f"'--out', {out!r}]; "
            "import pipelines.cli as c; assert c.__file__.startswith(sys.path[0]); c.main()")
    env = dict(os.environ)
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, env=env)
    return time.perf_counter() - began


def main(
    scenario: str = typer.Argument("data/scenarios/mixed-control.json"),
    policy: str = typer.Option("fast", "--policy"),
    runs: int = typer.Option(15, "--runs"),
    tree: Path | None = typer.Option(None, "--tree",
                                     help="another checkout to time against this one"),
    bytecode: bool = typer.Option(True, "--bytecode/--no-bytecode",
                                  help="use the bytecode cache (as an install does)"),
) -> None:
    """Median whole-process wall time of `gpuplan plan` (and of --tree, interleaved)."""
    trees = {"this": HERE} | ({"other": tree.resolve()} if tree else {})
    out = "/tmp/gpuplan_plan_wall.json"
    samples: dict[str, list[float]] = {k: [] for k in trees}
    if bytecode:
        for root in trees.values():
            one_run(root, scenario, policy, out, bytecode)
    for _ in range(runs):
        for name, root in trees.items():
            samples[name].append(one_run(root, scenario, policy, out, bytecode))
    cache = "bytecode cached" if bytecode else "no bytecode cache"
    print(f"load average {os.getloadavg()[0]:.1f}; {runs} runs each, interleaved; {cache}")
    for name, values in samples.items():
        print(f"{name} ({trees[name]}): median {1000 * statistics.median(values):.0f} ms, "
              f"min {1000 * min(values):.0f} ms")
    if tree:
        ratio = statistics.median(samples["this"]) / statistics.median(samples["other"])
        print(f"this / other: {ratio:.2f}")


if __name__ == "__main__":
    typer.run(main)
