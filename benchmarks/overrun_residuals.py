"""How much longer a job runs once it is past its predicted end, on the bundled Philly weeks.

The rolling replay re-estimates a running job's remaining time at every plan; past its
prediction, "one more step" (`gpuplan simulate --overrun-share 0`) or a share of the steps
it has run (`--overrun-share S`). This prints, per week, the jobs that overrun and, for
every step an overrunning job is still running past its prediction, its residual steps
over the steps it has run (bucketed by how far past the prediction it is), so S can be
read off the weeks it is tuned on and checked on the held-out one:

    python benchmarks/overrun_residuals.py
    python benchmarks/overrun_residuals.py --weeks 2017-10-30,2017-11-06

The jobs' durations are the trace's; their predictions are the replay's (true duration x
log-normal error, pipelines/philly.py), so the figures hold for that error model.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import typer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.philly_replays import WEEKS  # noqa: E402

BUCKETS = ((1.0, 1.5), (1.5, 2.0), (2.0, 4.0), (4.0, np.inf))  # elapsed / predicted


def residuals(week: str, gpus: int, seed: int) -> tuple[float, np.ndarray]:
    """(share of the week's jobs that overrun, rows of (elapsed / predicted, residual /
    elapsed) for every step an overrunning job runs past its prediction)."""
    from pipelines.philly import PhillyConfig, philly_world

    world = philly_world(PhillyConfig(start=week, gpus=gpus, seed=seed))
    rows = [(e / job.predicted_steps, (job.true_steps - e) / e)
            for job in world.jobs if job.true_steps > job.predicted_steps
            for e in range(job.predicted_steps, job.true_steps)]
    overrun = sum(job.true_steps > job.predicted_steps for job in world.jobs) / len(world.jobs)
    return overrun, np.asarray(rows, dtype=float).reshape(-1, 2)


def main(weeks: str = typer.Option(",".join(WEEKS), "--weeks", help="the weeks' Mondays"),
         gpus: int = typer.Option(16, "--gpus", help="cluster size (jobs larger are dropped)"),
         seed: int = typer.Option(7, "--seed", help="the prediction errors' seed")) -> None:
    print("| week | jobs overrunning | steps past prediction | median residual / elapsed | "
          + " | ".join(f"at {lo:g}-{hi:g}x" for lo, hi in BUCKETS) + " |")
    print("|---" * (4 + len(BUCKETS)) + "|")
    for week in weeks.split(","):
        share, rows = residuals(week, gpus, seed)
        cells = []
        for lo, hi in BUCKETS:
            pick = rows[(rows[:, 0] >= lo) & (rows[:, 0] < hi), 1]
            cells.append(f"{np.median(pick):.2f} ({len(pick)})" if len(pick) else "-")
        whole = f"{np.median(rows[:, 1]):.2f}" if len(rows) else "-"
        print(f"| {week} | {100 * share:.1f}% | {len(rows)} | {whole} | " + " | ".join(cells)
              + " |")


if __name__ == "__main__":
    typer.run(main)
