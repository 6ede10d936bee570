"""fast against full mode on the wider seeded family, run alone: `python benchmarks/quality.py`.

The same table and summary as `gpuplan bench --quality` (benchmarks/bench_quality.py), with
this script's own command line quoted (BENCHMARKS.md records the runs):
    python benchmarks/quality.py --set test --gpus 16 --time-limit 30
    python benchmarks/quality.py --set test --store benchmarks/stored/full30-test.json
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_quality import SEED_SETS, print_report  # noqa: E402


def main(
    which: str = typer.Option("tuning", "--set",
                              help="tuning .. tuning4, replan, replan2, test or "
                                   "test-replan"),
    gpus: int = typer.Option(16, "--gpus",
                             help="16: the small family (8-16 GPUs); 64 or 256: cluster scale"),
    count: int | None = typer.Option(None, "--count", help="first N seeds of the set"),
    time_limit: float = typer.Option(30.0, "--time-limit", help="full: seconds each"),
    no_full: bool = typer.Option(False, "--no-full", help="fast and the bound only"),
    store: Path | None = typer.Option(None, "--store",
                                      help="also write full's runs as JSON here "
                                           "(benchmarks/stored/full30-SET.json)"),
) -> None:
    """fast against full mode on the wider seeded family (the table and its summary)."""
    if which not in SEED_SETS:
        raise typer.BadParameter(", ".join(SEED_SETS), param_hint="--set")
    cmd = (f"python benchmarks/quality.py --set {which} --gpus {gpus}"
           + (f" --count {count}" if count else "")
           + f" --time-limit {time_limit:g}" + (" --no-full" if no_full else ""))
    print_report(which, gpus, count, time_limit, not no_full, cmd, store)


if __name__ == "__main__":
    typer.run(main)
