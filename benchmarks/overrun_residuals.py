"""How much longer a job runs once it is past its predicted end, on the bundled Philly weeks.

The rolling replay re-estimates a running job's remaining time at every plan; past its
prediction, "one more step" (`gpuplan simulate --overrun-share 0`) or a share of the steps
it has run (`--overrun-share S`). This prints, per week, the jobs that overrun and, for
every step an overrunning job is still running past its prediction, its residual steps
over the steps it has run (bucketed by how far past the prediction it is), so S can be
read off the weeks it is tuned on and checked on the held-out one:

    python benchmarks/overrun_residuals.py
    python benchmarks/overrun_residuals.py --weeks 2017-10-30,2017-11-06 --suite 7

The jobs' durations are the trace's; their predictions are the replay's (true duration x
log-normal error, pipelines/philly.py), so the figures hold for that error model.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import typer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.philly_replays import WEEKS  # noqa: E402

BUCKETS = ((1.0, 1.5), (1.5, 2.0), (2.0, 4.0), (4.0, np.inf))  # elapsed / predicted


def residuals(jobs: list[Any]) -> tuple[float, np.ndarray]:
    """(share of the jobs that overrun, rows of (elapsed / predicted, residual / elapsed)
    for every step an overrunning job runs past its prediction)."""
    rows = [(e / job.predicted_steps, (job.true_steps - e) / e)
            for job in jobs if job.true_steps > job.predicted_steps
            for e in range(job.predicted_steps, job.true_steps)]
    overrun = sum(job.true_steps > job.predicted_steps for job in jobs) / len(jobs)
    return overrun, np.asarray(rows, dtype=float).reshape(-1, 2)


def row(name: str, jobs: list[Any]) -> str:
    """One table row: the jobs' overrun share and their residuals' medians."""
    share, rows = residuals(jobs)
    cells = []
    for lo, hi in BUCKETS:
        pick = rows[(rows[:, 0] >= lo) & (rows[:, 0] < hi), 1]
        cells.append(f"{np.median(pick):.2f} ({len(pick)})" if len(pick) else "-")
    whole = f"{np.median(rows[:, 1]):.2f}" if len(rows) else "-"
    return (f"| {name} | {100 * share:.1f}% | {len(rows)} | {whole} | " + " | ".join(cells)
            + " |")


def main(weeks: str = typer.Option(",".join(WEEKS), "--weeks", help="the weeks' Mondays"),
         gpus: int = typer.Option(16, "--gpus", help="cluster size (jobs larger are dropped)"),
         seed: int = typer.Option(7, "--seed", help="the prediction errors' seed"),
         suite_seed: int | None = typer.Option(None, "--suite",
                                               help="also the seeded suite's worlds (2 days) "
                                                    "of this seed")) -> None:
    from pipelines.philly import PhillyConfig, philly_world
    from pipelines.worlds import suite

    print("| jobs | overrunning | steps past prediction | median residual / elapsed | "
          + " | ".join(f"at {lo:g}-{hi:g}x" if hi < np.inf else f"at {lo:g}x and more"
                       for lo, hi in BUCKETS) + " |")
    print("|---" * (4 + len(BUCKETS)) + "|")
    for week in weeks.split(","):
        world = philly_world(PhillyConfig(start=week, gpus=gpus, seed=seed))
        print(row(f"Philly, week of {week}", list(world.jobs)))
    if suite_seed is not None:
        worlds = suite(suite_seed, days=2)
        print(row(f"the suite's {len(worlds)} worlds, seed {suite_seed}",
                  [job for w in worlds for job in w.jobs]))


if __name__ == "__main__":
    typer.run(main)
