"""fast's worst plans against the bound each plan carries, over a whole tuning set: a cheap
hunt for failure shapes where full's runs are not stored (the bound needs no MILP).

A low ratio is a lead, not a loss: the bound is loose on some plans (BENCHMARKS.md, "the
plan's bound"). `--full SECONDS` runs full on the worst few to tell the two apart:

    python benchmarks/worst_against_bound.py --set replan3 --worst 15 --full 30

A diagnosis: the test seeds stay out of it (BENCHMARKS.md).
"""

from __future__ import annotations

import contextlib
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import typer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_quality import SEED_SETS, Case, scenario_for, small_cases  # noqa: E402


def against_bound(case: Case) -> tuple[str, float, float | None, bool]:
    """(name, fast's objective, the plan's bound, whether the plan leaves a service short)
    of one case."""
    from allocator import grid as gridlib
    from allocator.plan import prove_bound
    from allocator.policies.fast import fast

    scenario = scenario_for(case)
    score = gridlib.Scorer(scenario)
    value, lost = score.split(score.counts(fast(scenario)))  # (lost: realtime's shortfall)
    return (case.name, value, (prove_bound(scenario, value, "auto") or {}).get("value"),
            lost > 0)


def as_planned(case: Case) -> float:
    """`gpuplan plan`'s objective on one case: fast, refined where its bound finds it
    wanting."""
    from allocator.plan import make_plan
    from allocator.policies.refine import REFINE_BELOW

    plan = make_plan(scenario_for(case), "fast", bound="auto", refine_below=REFINE_BELOW)
    return float(plan.metrics.objective)


def against_full(case: Case, seconds: float) -> tuple[float, str]:
    """full's objective on one case and its solve status."""
    from allocator import grid as gridlib
    from allocator.policies.full import full

    scenario = scenario_for(case)
    result = full(scenario, time_limit=seconds)
    return gridlib.objective(scenario, result.grid), result.solve.status if result.solve else ""


def main(which: str = typer.Option("replan3", "--set", help="a tuning set"),
         worst: int = typer.Option(15, "--worst", help="how many of the worst to list"),
         seconds: float = typer.Option(0.0, "--full", help="full's seconds on each listed "
                                                          "(0: not run)"),
         variant: str = typer.Option("", "--variant",
                                     help="a variant of benchmarks/replay_seeds.py"),
         workers: int = typer.Option(2, "--workers")) -> None:
    if which.startswith("test") or which not in SEED_SETS:
        raise typer.BadParameter("a tuning set (the test seeds stay out of diagnosis)",
                                 param_hint="--set")
    cases = small_cases(SEED_SETS[which])
    def applied() -> contextlib.AbstractContextManager[object]:
        """The variant's constants set while a pool forks its workers."""
        if not variant:
            return contextlib.nullcontext()
        from benchmarks.replay_seeds import combined

        return combined(variant).applied()

    with applied(), ProcessPoolExecutor(workers) as pool:
        rows = list(pool.map(against_bound, cases, chunksize=8))
    ranked = sorted(((v / b, name, v, b, case) for (name, v, b, _), case in zip(rows, cases,
                                                                                 strict=True)
                     if b is not None and b > 0), key=lambda r: r[0])[:worst]
    with applied(), ProcessPoolExecutor(workers) as pool:
        planned = list(pool.map(as_planned, [r[4] for r in ranked]))
    fulls: list[tuple[float, str] | None] = [None] * len(ranked)
    if seconds > 0:
        with ProcessPoolExecutor(workers) as pool:
            fulls = list(pool.map(against_full, [r[4] for r in ranked],
                                  [seconds] * len(ranked)))
    print(f"| scenario | fast | the plan's bound | fast / bound | gpuplan plan |"
          f"{' full (status) | fast / full | gpuplan plan / full |' if seconds > 0 else ''}")
    print("|---|---:|---:|---:|---:|" + ("---|---:|---:|" if seconds > 0 else ""))
    for (share, name, value, bound, _), plan, got in zip(ranked, planned, fulls, strict=True):
        tail = ""
        if got is not None:
            tail = f" {got[0]:.2f} ({got[1]}) | " + (
                f"{100 * value / got[0]:.1f}% | {100 * plan / got[0]:.1f}% |" if got[0] > 0
                else "- | - |")
        print(f"| {name} | {value:.2f} | {bound:.2f} | {100 * share:.1f}% | {plan:.2f} |"
              f"{tail}")
    shares = [v / b for _, v, b, _ in rows if b is not None and b > 0]
    print(f"\n{which}{f' ({variant})' if variant else ''}: {len(rows)} scenarios, "
          f"{len(shares)} with a positive bound: fast / bound mean "
          f"{100 * statistics.fmean(shares):.2f}%, below 90% {sum(x < 0.9 for x in shares)}, "
          f"below 75% {sum(x < 0.75 for x in shares)}; fast's plan leaves a service short "
          f"on {sum(short for *_, short in rows)}")


if __name__ == "__main__":
    typer.run(main)
