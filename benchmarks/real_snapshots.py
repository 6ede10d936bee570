"""fast against full's best plan on the scenarios a real week puts in front of the planner.

The wider family (`benchmarks/bench_quality.py`) is the project's own generator. Here the
scenarios come from real traces instead: the Philly week of `gpuplan simulate --philly`
(Philly jobs, ServeGen traffic; `pipelines/philly.py` states the mapping) is replayed with
fast replanning every hour, and every `--every` hours the scenario fast was given (its
queue, the running jobs where the replay put them, the realtime forecast) is kept. Each
kept scenario is then planned by fast and by `full(time_limit=...)`, and fast's objective
is reported as a share of the best plan full finds (of the proven optimum, where full
proves it), beside a variant of fast (`--against`: any of `benchmarks/replay_seeds.py`'s
variants, several joined by `+` combine), e.g. `static`, realtime's static top-first GPU
order (`realtime.BROKEN_FIRST = False`, fast before it learned to stack services where
running jobs break blocks anyway), `notopup`, no top-up of realtime from the cells a plan
leaves free, `exchange`, any GPU runs handed between services (off by default),
`norefill`, no refill of a service short of its curve onto GPUs other services held at
step 0 and let go, or `evac15`, the light evacuation only from 15 GPUs. With `--day`, fast
and the variant run with plan-day's trials and hops (e.g. `--against norecut`: without
the re-cuts that end them).

Tuning and test apart: the weeks from 2017-10-30 and 2017-11-06 were looked at while
changing fast (four of their 16-GPU snapshots are test cases); the week from 2017-11-13 is
the test week, reported, not tuned on.

    python benchmarks/real_snapshots.py --gpus 16,32 --every 12 --time-limit 30 \
        --against notopup
    python benchmarks/real_snapshots.py --gpus 16,32 --every 6 --time-limit 0 \
        --starts 2017-10-30,2017-11-06 --against exchange
"""

from __future__ import annotations

import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Row:
    name: str
    gpus: int
    week: str
    queued: int
    fast: float
    other: float  # the `--against` variant of fast
    best: float
    status: str
    gap: float | None
    fast_ms: float
    other_ms: float  # the variant's, timed the same way (one call, in the same process)


def queued(scenario: Any) -> int:
    """Batch jobs still waiting to start: what a plan of the snapshot decides."""
    from allocator.model import BatchJob

    return sum(isinstance(j, BatchJob) and j.running is None for j in scenario.jobs)


def snapshots(gpus: int, start: str, every: int, realtime_share: float) -> list[Any]:
    """The scenarios fast planned on at hours 0, every, 2 x every, ... of the Philly week
    from `start`, those with a queued job left (the others have nothing to decide)."""
    from pipelines import simulate
    from pipelines.philly import PhillyConfig, philly_world

    world = philly_world(PhillyConfig(gpus=gpus, start=start, realtime_share=realtime_share))
    seen: dict[str, Any] = {}  # name -> the first scenario of that hour: the replay's plan
    plan = simulate.make_plan

    def keep(scenario: Any, policy: str, **options: Any) -> Any:
        if (policy == "fast" and "@" in scenario.name
                and int(scenario.name.rsplit("@", 1)[1]) % every == 0):
            seen.setdefault(scenario.name, scenario)
        return plan(scenario, policy, **options)

    simulate.make_plan = keep  # this process only: the replay is not changed
    try:
        simulate.replay(world, "fast")
    finally:
        simulate.make_plan = plan
    return [s for s in seen.values() if queued(s)]


def judge(args: tuple[Any, str, float, str, bool]) -> Row:
    from allocator import grid as gridlib
    from allocator.policies.fast import fast
    from allocator.policies.full import full
    from allocator.policies.refine import DAY_TRIALS
    from benchmarks.replay_seeds import combined

    scenario, week, time_limit, against, day = args
    options = dict(DAY_TRIALS) if day else {}  # `--day`: plan-day's trials and hops
    began = time.perf_counter()
    grid = fast(scenario, **options)
    fast_ms = 1000 * (time.perf_counter() - began)
    got = gridlib.objective(scenario, grid)
    variant = combined(against)
    if variant.pin_trials:
        options["pin_trials"] = variant.pin_trials
    with variant.applied():  # this worker process only
        began = time.perf_counter()
        other_grid = variant.policy()(scenario, **options)
        other_ms = 1000 * (time.perf_counter() - began)
        other = gridlib.objective(scenario, other_grid)
    if time_limit <= 0:  # fast against the variant only: "best found" is the better one
        return Row(scenario.name, scenario.G, week, queued(scenario), got, other,
                   max(got, other), "not run", None, fast_ms, other_ms)
    result = full(scenario, time_limit=time_limit)
    best = max(got, other, gridlib.objective(scenario, result.grid))
    report = result.solve
    assert report is not None  # full always reports its solve
    return Row(scenario.name, scenario.G, week, queued(scenario), got, other, best,
               report.status, report.gap, fast_ms, other_ms)


def shares(values: list[float], below: bool = True) -> str:
    """mean / min (/ how many below 97%) of percentages."""
    if not values:
        return "-"
    out = f"{statistics.mean(values):.2f}% / {min(values):.2f}%"
    return out + f" / {sum(v < 97 for v in values)}" if below else out


def summary(gpus: str, week: str, rows: list[Row]) -> list[str]:
    proven = [r for r in rows if r.status == "optimal"]
    return [gpus, week, str(len(rows)), f"{statistics.median(r.queued for r in rows):g}",
            str(len(proven)),
            shares([100 * r.fast / r.best for r in proven]),
            shares([100 * r.other / r.best for r in proven]),
            shares([100 * r.fast / r.best for r in rows], below=False),
            shares([100 * r.other / r.best for r in rows], below=False),
            changed(rows), f"{statistics.median(r.fast_ms for r in rows):.1f}",
            f"{statistics.median(r.other_ms for r in rows):.1f}"]


def changed(rows: list[Row]) -> str:
    """Snapshots fast lifts / lowers against the `--against` variant, and the worst change."""
    rel = [(r.fast - r.other) / max(abs(r.other), 1.0) for r in rows]
    return (f"{sum(x > 1e-9 for x in rel)} / {sum(x < -1e-9 for x in rel)} / "
            f"{100 * min(rel):+.1f}%")


def main(
    gpus: str = typer.Option("16,32", "--gpus", help="cluster sizes, comma-separated"),
    starts: str = typer.Option("2017-10-30,2017-11-06,2017-11-13", "--starts",
                               help="the weeks' first days (the bundled trace: 3 weeks)"),
    every: int = typer.Option(6, "--every", help="keep the scenario every this many hours"),
    time_limit: float = typer.Option(30.0, "--time-limit",
                                     help="full's seconds (0: no full, fast against the "
                                          "variant only)"),
    realtime_share: float = typer.Option(0.3, "--realtime-share",
                                         help="services' summed peaks / cluster"),
    workers: int = typer.Option(2, "--workers"),
    worst: int = typer.Option(5, "--worst", help="how many of the worst to list"),
    against: str = typer.Option("static", "--against",
                                help="the variant of fast beside it "
                                     "(benchmarks/replay_seeds.py's names, e.g. static, "
                                     "norefill, evac15; several joined by +)"),
    day: bool = typer.Option(False, "--day", help="fast and the variant with plan-day's "
                                                  "trials and hops"),
) -> None:
    sys.path.insert(0, str(ROOT))
    from allocator.core.markdown import table
    from benchmarks.replay_seeds import VARIANTS

    if not set(against.split("+")) <= set(VARIANTS):
        raise typer.BadParameter(f"--against: one or more of {sorted(VARIANTS)}, joined by +")
    sizes = [int(g) for g in gpus.split(",")]
    weeks = starts.split(",")
    kept = [(s, start, time_limit, against, day) for g in sizes for start in weeks
            for s in snapshots(g, start, every, realtime_share)]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        rows = list(pool.map(judge, kept))
    print(f"Philly weeks from {starts}, snapshots every {every} h, full {time_limit:g} s, "
          f"realtime share {realtime_share:g}")
    out = []
    for g in sizes:
        for week in [*weeks, "all"]:
            mine = [r for r in rows if r.gpus == g and r.best > 0 and week in ("all", r.week)]
            if mine:
                out.append(summary(f"{g}", week, mine))
    print(table(["GPUs", "week from", "snapshots", "median queued", "proven",
                 "fast / optimum: mean / min / below 97%", f"{against}: the same",
                 "fast / best found, all: mean / min", f"{against}: the same",
                 f"against {against}: up / down / worst", "fast ms, median",
                 f"{against} ms"], out), end="")
    print(f"worst {worst} (fast / best found):")
    for r in sorted(rows, key=lambda r: r.fast / r.best if r.best > 0 else 1.0)[:worst]:
        if r.best > 0:
            gap = "" if r.gap is None else f", gap {100 * r.gap:.2f}%"
            print(f"  {r.name}: {100 * r.fast / r.best:.2f}% ({against} "
                  f"{100 * r.other / r.best:.2f}%; {r.queued} queued; full {r.status}{gap})")


if __name__ == "__main__":
    typer.run(main)
