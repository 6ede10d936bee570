"""fast against one stored 30-second run of full per scenario of the wider family, in seconds.

Proving the optima takes minutes per scenario, so each set's run of
`full(scenario, time_limit=30)` is stored in benchmarks/stored/full30-S.json (objective,
status, gap), written by `python benchmarks/quality.py --set S --gpus 16 --time-limit 30
--store benchmarks/stored/full30-S.json`. fast is then judged in one pass on the current
code, or on another checkout:

    python benchmarks/against_stored.py --set tuning2
    python benchmarks/against_stored.py --set test --tree /tmp/before
    python benchmarks/against_stored.py --set tuning --variant evaccost
    python benchmarks/against_stored.py --set tuning,tuning2,tuning3,tuning4 --variant recut \
        --paired

Several sets (comma-separated) are judged in turn, with a line over them all. `--paired`
judges fast's defaults beside the variant and options asked for, in the same process,
scenario by scenario, each side `--repeats` times in alternation (its fastest call timed),
and counts the plans that rose and fell against the defaults: one run, one machine state,
for the ratio of the times too.

Tuning sets (`tuning` to `tuning4`) may be looked at while changing fast; `test` is run
once, on the final code (BENCHMARKS.md, "Quality on a wider family").
"""

from __future__ import annotations

import contextlib
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import typer

ROOT = Path(__file__).resolve().parent.parent
STORED = ROOT / "benchmarks" / "stored"


def main(set_name: str = typer.Option("tuning", "--set",
                                      help="tuning .. tuning4, replan, replan2, test or "
                                           "test-replan; several comma-separated"),
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
                                          "module constants and options, `refine` ones "
                                          "refined as `gpuplan plan` does; several joined "
                                          "by +) instead of fast's defaults"),
         paired: bool = typer.Option(False, "--paired",
                                     help="fast's defaults judged beside, in the same "
                                          "process: the plans that rose and fell"),
         repeats: int = typer.Option(3, "--repeats", min=1,
                                     help="--paired: calls of each side per scenario, "
                                          "alternating (the fastest timed)")
         ) -> None:
    sys.path.insert(0, str(ROOT))  # this checkout's scenarios
    if tree is not None:  # and that checkout's allocator (an editable install's finder
        # would map it back here)
        sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f)]
        sys.path.insert(0, str(tree.resolve()))
    from benchmarks.bench_quality import SEED_SETS

    names = set_name.split(",")
    unknown = [n for n in names if n not in SEED_SETS or not (STORED / f"full30-{n}.json").exists()]
    if unknown:
        raise typer.BadParameter(f"no stored full runs for {', '.join(unknown)}",
                                 param_hint="--set")
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
    applying: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext
    plan = None  # fast itself
    if variant:  # this checkout's variants only: their constants and their policy (its
        # options, and the refinement where the variant asks for it)
        from benchmarks.replay_seeds import combined

        chosen = combined(variant)
        applying, plan = chosen.applied, chosen.policy()
    stored = {n: json.loads((STORED / f"full30-{n}.json").read_text()) for n in names}
    who = f"variant {variant}" if variant else "fast"
    base: list[Judged] = []
    judged: list[Judged] = []
    for n in names:
        if paired:
            defaults, rows = judge_paired(SEED_SETS[n], stored[n], options, plan,
                                          applying, repeats)
            base += defaults
        else:
            with applying():
                rows = judge_all(SEED_SETS[n], stored[n], options, plan)
        print(summary(n, rows, who, repeats if paired else 1))
        judged += rows
    if len(names) > 1:
        print(summary("all", judged, who, repeats if paired else 1))
    if paired:
        print(against_defaults(base, judged))
    for row in sorted((r for r in judged if r.proven is not None),
                      key=lambda r: r.proven or 0.0)[:worst]:
        print(f"  {row.name}: {100 * (row.proven or 0.0):.1f}%")


class Judged(NamedTuple):
    """fast on one stored scenario: its share of the proven optimum (None: not proven), of
    the best plan found (None: no positive reference), its seconds, and a digest of its
    grid (a variant may commit another grid of the same value)."""

    name: str
    proven: float | None
    found: float | None
    seconds: float
    grid: str = ""


def summary(label: str, rows: list[Judged], who: str = "fast", calls: int = 1) -> str:
    """One set's line; `who`: the policy judged (a variant's name, refined or not), its
    time the fastest of `calls` a scenario."""
    shares = [r.proven for r in rows if r.proven is not None]
    found = [r.found for r in rows if r.found is not None]
    return (f"{label}: {who} / proven optimum over {len(shares)} scenarios: mean "
            f"{100 * statistics.fmean(shares):.2f}%, min {100 * min(shares):.2f}%, below 97% "
            f"{sum(s < 0.97 for s in shares)}; / best plan found, all {len(found)}: mean "
            f"{100 * statistics.fmean(found):.2f}%; {who}'s median "
            f"{1000 * statistics.median(r.seconds for r in rows):.1f} ms, mean "
            f"{1000 * statistics.fmean(r.seconds for r in rows):.1f} ms ("
            + ("one call per scenario)" if calls == 1 else
               f"the fastest of {calls} calls per scenario)"))


def against_defaults(base: list[Judged], rows: list[Judged]) -> str:
    """The plans that rose and fell against fast's defaults (by the share of the best
    plan found, the same reference for both), and the two runs' times."""
    pairs = [(b.found, r.found) for b, r in zip(base, rows, strict=True)
             if b.found is not None and r.found is not None]
    up = sum(after > before + 1e-9 for before, after in pairs)
    down = sum(after < before - 1e-9 for before, after in pairs)
    proven = [(b.proven, r.proven) for b, r in zip(base, rows, strict=True)
              if b.proven is not None and r.proven is not None]
    differ = sum(b.grid != r.grid for b, r in zip(base, rows, strict=True))
    return (f"against fast's defaults in the same process: {up} plans rose, {down} fell, "
            f"{differ} of {len(rows)} grids differ; "
            f"mean share of the proven optima {100 * statistics.fmean(b for b, _ in proven):.3f}"
            f"% -> {100 * statistics.fmean(r for _, r in proven):.3f}%; median ms "
            f"{1000 * statistics.median(b.seconds for b in base):.1f} -> "
            f"{1000 * statistics.median(r.seconds for r in rows):.1f}, mean "
            f"{1000 * statistics.fmean(b.seconds for b in base):.1f} -> "
            f"{1000 * statistics.fmean(r.seconds for r in rows):.1f}")


def judge_all(seeds: tuple[int, ...], stored: dict[str, Any], options: dict[str, Any],
              plan: Callable[..., Any] | None = None) -> list[Judged]:
    """`plan` (None: fast) on each stored scenario of the set: its time, its share of
    full's plan."""
    from allocator.policies.fast import fast

    plan = fast if plan is None else plan

    out: list[Judged] = []
    for name, row, scenario in _stored_cases(seeds, stored):
        began = time.perf_counter()
        grid = plan(scenario, **options)
        out.append(_judged(name, row, scenario, grid, time.perf_counter() - began))
    return out


def _stored_cases(seeds: tuple[int, ...], stored: dict[str, Any]
                  ) -> Iterator[tuple[str, dict[str, Any], Any]]:
    """Each case of `seeds` with a stored full run: its name, that run, its scenario."""
    from benchmarks.bench_quality import scenario_for, small_cases

    for case in small_cases(seeds):
        row = stored.get(case.name)
        if row is not None:
            yield case.name, row, scenario_for(case)


def judge_paired(seeds: tuple[int, ...], stored: dict[str, Any], options: dict[str, Any],
                 plan: Callable[..., Any] | None,
                 constants: Callable[[], contextlib.AbstractContextManager[Any]],
                 repeats: int) -> tuple[list[Judged], list[Judged]]:
    """fast's defaults and `plan` (None: fast) under `constants` (a variant's, entered for
    each of its calls) on each stored scenario, alternating `repeats` times, each side's
    fastest call timed: the two times share the machine's state scenario by scenario
    (judged one whole set after the other, the second ran faster on a warmer process)."""
    from allocator.policies.fast import fast

    plan = fast if plan is None else plan
    base: list[Judged] = []
    out: list[Judged] = []
    for name, row, scenario in _stored_cases(seeds, stored):
        grids: list[Any] = [None, None]
        fastest = [float("inf"), float("inf")]
        for _ in range(repeats):
            for side in (0, 1):
                with contextlib.nullcontext() if side == 0 else constants():
                    began = time.perf_counter()
                    grids[side] = fast(scenario) if side == 0 else plan(scenario, **options)
                    fastest[side] = min(fastest[side], time.perf_counter() - began)
        base.append(_judged(name, row, scenario, grids[0], fastest[0], quiet=True))
        out.append(_judged(name, row, scenario, grids[1], fastest[1]))
    return base, out


def _judged(name: str, row: dict[str, Any], scenario: Any, grid: Any, seconds: float,
            quiet: bool = False) -> Judged:
    """One plan's shares of full's stored plan (proven: where full proved it)."""
    import hashlib

    import numpy as np

    from allocator import grid as gridlib

    value = gridlib.objective(scenario, grid)
    digest = hashlib.sha1(np.ascontiguousarray(grid).tobytes()).hexdigest()
    if row["full"] <= 0:  # no share means anything against a reference at or below 0
        if not quiet:
            print(f"  {name}: fast {value:.2f} against full's {row['full']:.2f}, not "
                  "counted")
        return Judged(name, None, None, seconds, digest)
    # a plan at or below 0 against a positive reference counts as 0 (bench_quality)
    found = max(value, 0.0) / max(row["full"], value)
    proven = max(value, 0.0) / row["full"] if row["status"] == "optimal" else None
    return Judged(name, proven, found, seconds, digest)


if __name__ == "__main__":
    typer.run(main)
