"""fast against one stored 30-second run of full per scenario of the wider family, in seconds.

Proving the optima takes minutes per scenario, so each set's run of
`full(scenario, time_limit=30)` is stored in benchmarks/stored/full30-S.json (objective,
status, gap), written by `python benchmarks/quality.py --set S --gpus 16 --time-limit 30
--store benchmarks/stored/full30-S.json`. fast is then judged in one pass on the current
code, or on another checkout:

    python benchmarks/against_stored.py --set tuning2
    python benchmarks/against_stored.py --set test --tree /tmp/before
    python benchmarks/against_stored.py --set tuning --variant evaccost

Tuning sets (`tuning` to `tuning4`) may be looked at while changing fast; `test` is run
once, on the final code (BENCHMARKS.md, "Quality on a wider family").
"""

from __future__ import annotations

import contextlib
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import typer

ROOT = Path(__file__).resolve().parent.parent
STORED = ROOT / "benchmarks" / "stored"


def main(set_name: str = typer.Option("tuning", "--set",
                                      help="tuning .. tuning4, replan, replan2, test or "
                                           "test-replan"),
         tree: Path | None = typer.Option(None, "--tree", help="another checkout's fast"),
         worst: int = typer.Option(5, "--worst", help="how many of the worst to list"),
         pin_trials: int = typer.Option(0, "--pin-trials", help="fast's pin trials"),
         mirror: bool = typer.Option(False, "--mirror", help="fast's mirrored layout too"),
         defer_trials: int = typer.Option(0, "--defer-trials", help="fast's defer trials"),
         hops: int = typer.Option(0, "--hops", help="fast's rounds of realtime hops"),
         trial_passes: int = typer.Option(1, "--trial-passes",
                                          help="fast's passes of the trials"),
         variant: str = typer.Option("", "--variant",
                                     help="a variant of benchmarks/replay_seeds.py (its "
                                          "module constants) instead of fast's defaults")
         ) -> None:
    sys.path.insert(0, str(ROOT))  # this checkout's scenarios
    if tree is not None:  # and that checkout's allocator (an editable install's finder
        # would map it back here)
        sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f)]
        sys.path.insert(0, str(tree.resolve()))
    from benchmarks.bench_quality import SEED_SETS

    seeds = SEED_SETS[set_name]
    stored = json.loads((STORED / f"full30-{set_name}.json").read_text())
    proven: list[tuple[float, str]] = []
    seconds: list[float] = []
    found: list[float] = []
    constants = contextlib.nullcontext()
    if variant:  # this checkout's variants only
        from benchmarks.replay_seeds import combined

        constants = combined(variant).applied()  # type: ignore[assignment]
    with constants:
        judge_all(seeds, stored, proven, seconds, found, pin_trials, mirror,
                  defer_trials, hops, trial_passes)
    shares = [s for s, _ in proven]
    print(f"{set_name}: fast / proven optimum over {len(shares)} scenarios: mean "
          f"{100 * statistics.fmean(shares):.2f}%, min {100 * min(shares):.2f}%, below 97% "
          f"{sum(s < 0.97 for s in shares)}; / best plan found, all {len(found)}: mean "
          f"{100 * statistics.fmean(found):.2f}%; fast's median "
          f"{1000 * statistics.median(seconds):.1f} ms (one call per scenario)")
    for share, name in sorted(proven)[:worst]:
        print(f"  {name}: {100 * share:.1f}%")


def judge_all(seeds: tuple[int, ...], stored: dict[str, Any],
              proven: list[tuple[float, str]], seconds: list[float], found: list[float],
              pin_trials: int, mirror: bool, defer_trials: int, hops: int,
              trial_passes: int) -> None:
    """fast on each stored scenario of the set: its time, its share of full's plan."""
    from allocator import grid as gridlib
    from allocator.policies.fast import fast
    from benchmarks.bench_quality import scenario_for, small_cases

    for case in small_cases(seeds):
        row = stored.get(case.name)
        if row is None:
            continue
        scenario = scenario_for(case)
        began = time.perf_counter()
        options: dict[str, Any] = {}  # only those given: an older tree's fast may not
        if pin_trials:  # know the newer options
            options["pin_trials"] = pin_trials
        if mirror:
            options["mirror"] = True
        if defer_trials:
            options["defer_trials"] = defer_trials
        if hops:
            options["hops"] = hops
        if trial_passes != 1:
            options["trial_passes"] = trial_passes
        grid = fast(scenario, **options)
        seconds.append(time.perf_counter() - began)
        value = gridlib.objective(scenario, grid)
        if row["full"] <= 0:  # no share means anything against a reference at or below 0
            print(f"  {case.name}: fast {value:.2f} against full's {row['full']:.2f}, not "
                  "counted")
            continue
        # a plan at or below 0 against a positive reference counts as 0 (bench_quality)
        found.append(max(value, 0.0) / max(row["full"], value))
        if row["status"] == "optimal":
            proven.append((max(value, 0.0) / row["full"], case.name))


if __name__ == "__main__":
    typer.run(main)
