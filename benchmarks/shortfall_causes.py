"""Where the rolling replays' realtime shortfall comes from, GPU-step by GPU-step.

A replay's shortfall has two parts (pipelines/simulate.py, `realized`): demand above the
forecast the plan was given (the forecast's miss, which no plan changes), and demand the
forecast asked for that the service did not get ("not granted"). The second is the one a
planning variant moves, and in net value each of its GPU-steps costs the realtime penalty
times the service's priority, dozens of a replay's few thousand. This replays the real
Philly weeks and, for every not-granted GPU-step, looks at the committed plan's row at that
step: whether it had any slack (a free GPU, or a batch job starting there, which the plan
could have given the service instead) and whether a running job past its predicted end
held GPUs in it:

    python benchmarks/shortfall_causes.py --gpus 14 --weeks 2017-10-30 --seeds 7-16
    python benchmarks/shortfall_causes.py --variants pairs,pairs@0.3 --gpus 16

`NAME@SHARE` replays a variant with the replay's overrun share (`gpuplan simulate
--overrun-share`), as benchmarks/philly_replays.py does.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import typer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.philly_replays import WEEKS, variant_named  # noqa: E402
from benchmarks.replay_seeds import seed_range  # noqa: E402


@contextlib.contextmanager
def watched(rows: dict[str, np.ndarray]) -> Iterator[None]:
    """Record, per committed step, the plan row's slack (free cells and cells of batch jobs
    starting) and the cells of running jobs past their predicted end; the replay's own
    commit runs unchanged."""
    from allocator.model import BatchJob
    from pipelines import simulate as sim

    commit = sim._commit

    def recording(world: Any, rec: Any, scenario: Any, codes: list[int], spots: Any,
                  plan_row: np.ndarray, t: int, t0: int, held: Any) -> None:
        slack = int((plan_row < 0).sum())
        overran = 0
        for p, job in enumerate(scenario.jobs):
            if not isinstance(job, BatchJob):
                continue
            cells = int((plan_row == p).sum())
            if job.running is None:
                slack += cells
            elif t - rec.starts[codes[p]][0] >= world.jobs[codes[p]].predicted_steps:
                overran += cells
        rows["slack"][t], rows["overran"][t] = slack, overran
        commit(world, rec, scenario, codes, spots, plan_row, t, t0, held)

    sim._commit = recording
    try:
        yield
    finally:
        sim._commit = commit


def causes(week: str, gpus: int, seed: int, name: str) -> dict[str, float]:
    """One replay's not-granted GPU-steps, split by the plan row's slack and overruns."""
    from allocator import policies
    from allocator.policies import fast as fastmod
    from pipelines.philly import PhillyConfig, philly_world
    from pipelines.simulate import SimConfig, realized, replay, series

    variant, share = variant_named(name)
    world = philly_world(PhillyConfig(start=week, gpus=gpus, seed=seed))
    rows = {"slack": np.zeros(world.steps, dtype=int),
            "overran": np.zeros(world.steps, dtype=int)}
    policies.register("fast", variant.policy())
    try:
        with variant.applied(), watched(rows):
            rec = replay(world, "fast", SimConfig(overrun_share=share))
    finally:
        policies.register("fast", fastmod.fast)
    per_step = series(rec)  # the replay's own split: what the forecast missed, the rest
    short = per_step["shortfall"] - per_step["forecast_miss"]  # not granted, per step
    m = realized(rec)
    return {"value": m["value"], "net": m["net_value"], "not_granted": float(short.sum()),
            "no_slack": float(short[rows["slack"] == 0].sum()),
            "overrun": float(short[rows["overran"] > 0].sum())}


def main(variants: str = typer.Option("pairs", "--variants",
                                      help="replay_seeds.py's names, NAME@SHARE too"),
         gpus: int = typer.Option(14, "--gpus", help="cluster size"),
         seeds: str = typer.Option("7-11", "--seeds", help="priority seeds, e.g. 7-11"),
         weeks: str = typer.Option(",".join(WEEKS), "--weeks", help="the weeks' Mondays")
         ) -> None:
    print("| week | seed | variant | value | net value | not granted (GPU-steps) | "
          "at steps with no slack | with an overrun in the row |")
    print("|---" * 8 + "|")
    totals: dict[str, dict[str, float]] = {}
    for week in weeks.split(","):
        for seed in seed_range(seeds):
            for name in variants.split(","):
                c = causes(week, gpus, seed, name)
                print(f"| {week} | {seed} | {name} | {c['value']:,.0f} | {c['net']:,.0f} | "
                      f"{c['not_granted']:.0f} | {c['no_slack']:.0f} | {c['overrun']:.0f} |",
                      flush=True)
                total = totals.setdefault(name, {})
                for key, value in c.items():
                    total[key] = total.get(key, 0.0) + value
    for name, t in totals.items():
        print(f"{name}, {gpus} GPUs: {t['not_granted']:.0f} GPU-steps not granted, "
              f"{t['no_slack']:.0f} at steps whose plan row had no slack, {t['overrun']:.0f} "
              f"with a job past its predicted end in the row; value {t['value']:,.0f}, "
              f"net {t['net']:,.0f}")


if __name__ == "__main__":
    typer.run(main)
