"""Where fast loses against full's best plan: the realtime layout, or the batch order.

For each scenario of a seed set, full's plan (run for `--time-limit` seconds) is taken
apart: its realtime cells are kept as they are, and fast's batch placement (value orders,
order search and pair step) fills the rest, once with fast's default search budget and
once with `--search-factor` times it. Set beside fast itself, this splits fast's loss:

- fast -> "full's layout": what fast's realtime layouts cost;
- "full's layout" -> "with more search": what the order search's budget costs;
- what is left: batch moves no order reaches (delays the greedy decoder never makes).

    python benchmarks/loss_anatomy.py --set tuning --gpus 16 --time-limit 30
    python benchmarks/loss_anatomy.py --set tuning --gpus 64 --count 8 --time-limit 60
    python benchmarks/loss_anatomy.py --philly 14,32 --starts 2017-11-06 --hours 84,156
    python benchmarks/loss_anatomy.py --set tuning5 --seeds 3068,3139,3156,3235,3242,3247

`--seeds` takes only those seeds of the set, in that order (the ones a hunt listed:
benchmarks/worst_against_bound.py).

`--philly` takes the real Philly replans instead (benchmarks/real_snapshots.py: the
snapshots of the weeks from `--starts`, every `--every` hours, or only those `--hours`).

A diagnosis, not a target: the test seeds stay out of it (BENCHMARKS.md).
"""

from __future__ import annotations

import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import typer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from allocator import grid as gridlib  # noqa: E402
from allocator import reservations  # noqa: E402
from allocator.model import RealtimeJob  # noqa: E402
from allocator.policies import fast as fastlib  # noqa: E402
from allocator.policies.decoder import Jobs  # noqa: E402
from allocator.policies.full import full  # noqa: E402
from benchmarks.bench_quality import Case, cases_for, only_seeds, scenario_for  # noqa: E402


def anatomy(case: Case | Any, time_limit: float, factor: int) -> dict[str, Any]:
    """fast, full, and fast's batch placement on full's realtime layout, for one case (a
    family case, or a scenario itself)."""
    scenario = scenario_for(case) if isinstance(case, Case) else case
    fast_grid = fastlib.fast(scenario)
    result = full(scenario, time_limit=time_limit)
    score = gridlib.Scorer(scenario)
    best = max(score(result.grid), score(fast_grid))
    realtime = [i for i, job in enumerate(scenario.jobs) if isinstance(job, RealtimeJob)]
    layout = gridlib.empty(scenario)
    gridlib.pin_running(scenario, layout)
    cells = np.isin(result.grid, realtime)
    layout[cells] = result.grid[cells]
    held = reservations.holds(scenario)
    jobs, orders = Jobs.of(scenario), fastlib.value_orders(scenario, held)
    search = fastlib.default_search(scenario)
    on_layout = [score(fastlib.place_batch(scenario, layout, None, s, held=held, jobs=jobs,
                                           orders=orders))
                 for s in (search, factor * search)]
    if best <= 0:  # shortfall outweighs every reward: a ratio says nothing there
        return {"name": scenario.name, "G": scenario.G, "status": "negative"}
    return {"name": scenario.name, "G": scenario.G, "status": result.solve.status
            if result.solve else "", "fast": score(fast_grid) / best,
            "layout": on_layout[0] / best, "search": max(on_layout) / best}


def main(which: str = typer.Option("tuning", "--set", help="a tuning set (tuning .. replan)"),
         gpus: int = typer.Option(16, "--gpus", help="16: the small family; 64 or 256"),
         count: int | None = typer.Option(None, "--count", help="first N seeds of the set"),
         seeds: str = typer.Option("", "--seeds", help="only these seeds of the set, "
                                                      "comma-separated"),
         time_limit: float = typer.Option(30.0, "--time-limit", help="full: seconds each"),
         factor: int = typer.Option(20, "--search-factor", help="the larger search budget"),
         workers: int = typer.Option(2, "--workers"),
         philly: str = typer.Option("", "--philly", help="the Philly replans at these sizes "
                                                         "instead, comma-separated"),
         starts: str = typer.Option("2017-10-30,2017-11-06", "--starts",
                                    help="--philly: the weeks' first days"),
         every: int = typer.Option(12, "--every", help="--philly: hours between snapshots"),
         hours: str = typer.Option("", "--hours", help="--philly: only these hours")) -> None:
    """The table of the three shares per scenario, then their means."""
    from benchmarks.bench_quality import SEED_SETS

    if which.startswith("test") or which not in SEED_SETS:
        raise typer.BadParameter("a tuning set (the test seeds stay out of diagnosis)",
                                 param_hint="--set")
    cases: list[Any] = [] if philly else cases_for(which, gpus, count)
    if seeds and not philly:
        cases = only_seeds(which, cases, seeds)
    if philly:
        from benchmarks.real_snapshots import snapshots

        wanted = {int(h) for h in hours.split(",") if h}
        for size in (int(x) for x in philly.split(",")):
            for start in starts.split(","):
                cases += [s for s in snapshots(size, start, every, 0.3)
                          if not wanted or int(s.name.rsplit("@", 1)[1]) in wanted]
        which = f"Philly {philly} GPUs from {starts}"

    with ProcessPoolExecutor(workers) as pool:
        rows = list(pool.map(anatomy, cases, [time_limit] * len(cases),
                             [factor] * len(cases)))
    print(f"| scenario | GPUs | full | fast | fast's batch on full's layout | "
          f"with {factor}x search |")
    print("|---|---:|---|---:|---:|---:|")
    skipped = [r["name"] for r in rows if r["status"] == "negative"]
    rows = [r for r in rows if r["status"] != "negative"]
    for r in rows:
        print(f"| {r['name']} | {r['G']} | {r['status']} | {100 * r['fast']:.2f}% | "
              f"{100 * r['layout']:.2f}% | {100 * r['search']:.2f}% |")
    mean = {k: 100 * statistics.fmean(r[k] for r in rows)
            for k in ("fast", "layout", "search")}
    low = [r for r in rows if r["fast"] < 0.97]
    if skipped:
        print(f"\nleft out, best objective <= 0: {', '.join(map(str, skipped))}")
    print(f"\n{which}, {len(rows)} scenarios, of full's best plan (mean): fast "
          f"{mean['fast']:.2f}%, fast's batch on full's realtime layout {mean['layout']:.2f}%, "
          f"with {factor}x search {mean['search']:.2f}%")
    if low:
        low_mean = {k: 100 * statistics.fmean(r[k] for r in low)
                    for k in ("fast", "layout", "search")}
        print(f"the {len(low)} where fast is below 97%: fast {low_mean['fast']:.2f}%, on full's "
              f"layout {low_mean['layout']:.2f}%, with more search {low_mean['search']:.2f}%")


if __name__ == "__main__":
    typer.run(main)
