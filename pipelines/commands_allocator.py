"""Allocator commands: plan, check, show, scenarios (their work: pipelines/plan_one.py); bench
and bench-compare run the checkout's benchmarks package (pipelines/checkout.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from allocator.core.errors import InputError
from allocator.policies.refine import REFINE_BELOW
from allocator.scenario_io import load_scenario_dir
from pipelines.checkout import benchmarks
from pipelines.cliutil import (
    defer_trials_option,
    finite,
    hops_option,
    input_errors,
    pin_trials_option,
    trial_passes_option,
)
from pipelines.home import bundled
from pipelines.home import out_dir as out_dir_default

if TYPE_CHECKING:  # rich loads only for the bench's progress display
    from rich.console import Console

DEFAULT_SCENARIOS = bundled("data/scenarios")  # wherever gpuplan is run from


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)
    app.command("check")(check)
    app.command("show")(show)
    app.command("scenarios")(scenarios)
    app.command("bench")(bench)
    app.command("bench-compare")(bench_compare)


def plan(
    scenario: Path = typer.Argument(..., help="Scenario JSON (MODEL.md's format)."),
    policy: str = typer.Option("fast", "--policy", "-p",
                               help="fast | full | fifo | priority"),
    out: Path = typer.Option(..., "--out", "-o", help="Where to write the plan JSON."),
    png: Path | None = typer.Option(None, "--png", help="Also draw the grid as a PNG."),
    time_limit: float = typer.Option(30.0, "--time-limit", callback=finite,
                                     help="full: solver time limit, seconds."),
    solver: str = typer.Option("highs", "--solver", help="full: highs | cbc."),
    lp_bound: bool = typer.Option(False, "--lp-bound",
                                  help="full: also report the LP-relaxation bound."),
    search: int | None = typer.Option(None, "--search", min=0, max=10_000_000,
                                      help="fast: order-search budget in job placements "
                                           "(default scales with the cluster; 0 = none)."),
    clear_blocks: bool = typer.Option(False, "--clear-blocks",
                                      help="fast: also move services out of delayed jobs' "
                                           "windows (one-shot plans <= 16 GPUs; off: it "
                                           "lowers realized value in the rolling replay)."),
    pin_trials: int | None = pin_trials_option(None),
    defer_trials: int | None = defer_trials_option(None),
    trial_passes: int = trial_passes_option(1),
    hops: int = hops_option(0),
    mirror: bool = typer.Option(False, "--mirror",
                                help="fast: also try realtime stacked at the bottom, the plan "
                                     "made without it kept where better (twice fast's time; "
                                     "better one-shot plans; off: it lowers realized value "
                                     "in the rolling replay)."),
    exchange: bool = typer.Option(False, "--exchange",
                                  help="fast: services hand GPU runs to each other where "
                                       "the objective rises (better one-shot plans; off: "
                                       "it lowers realized value in the rolling replay)."),
    light_rounds: bool = typer.Option(True, "--light-rounds/--no-light-rounds",
                                      help="fast: from 10 to 16 GPUs, two light rounds of "
                                           "realtime hops (and at 15-16 an evacuation) "
                                           "where no --hops or trials run (on: better plans "
                                           "and realized value; off: a looser layout, less "
                                           "realtime shortfall when a job overruns)."),
    rebuilds: bool | None = typer.Option(None, "--rebuilds/--no-rebuilds",
                                         help="fast: the window rebuilds last, the batch "
                                              "jobs under each 12-step window placed again "
                                              "around the rest, then the services' "
                                              "moves shifted (default: 9-16 GPUs; "
                                              "--rebuilds: at any size, better one-shot "
                                              "plans for a few ms more past 16 GPUs; "
                                              "--no-rebuilds: never)."),
    relayout: bool = typer.Option(False, "--relayout",
                                  help="fast: from 17 to 64 GPUs, lay the first realtime "
                                       "layout out twice more with the plan in view "
                                       "(better one-shot plans; off: it lowered realized "
                                       "value in the Philly replay)."),
    bound: bool | None = typer.Option(None, "--bound/--no-bound",
                                      help="Prove an upper bound on the objective (default: "
                                           "where it is cheap; --bound: always)."),
    block_bound: float | None = typer.Option(None, "--block-bound", callback=finite, min=0.1,
                                             help="Also solve the tighter block-capacity "
                                                  "relaxation (a MILP) for this many seconds."),
    refine_below: float = typer.Option(100 * REFINE_BELOW, "--refine-below", callback=finite,
                                       min=0.0, max=100.0,
                                       help="fast: a plan below this percent of its proven "
                                            "bound is made again, once with its block "
                                            "evacuations by a second rule and with "
                                            "plan-day's trials and hops (up to 64 GPUs, "
                                            "2,500 queued jobs x steps and 63 steps), the "
                                            "best plan kept (about 40-500 ms more on the "
                                            "plans it refines; needs the bound; 0 = "
                                            "never)."),
) -> None:
    """Plan one scenario with one policy; exit 2 on bad input, writing nothing."""
    from pipelines.plan_one import PlanArgs, plan_file

    args = PlanArgs(scenario=scenario, policy=policy, out=out, png=png, time_limit=time_limit,
                    solver=solver, lp_bound=lp_bound, search=search,
                    clear_blocks=clear_blocks, pin_trials=pin_trials, bound=bound,
                    block_bound=block_bound, mirror=mirror, exchange=exchange,
                    defer_trials=defer_trials, hops=hops, relayout=relayout,
                    light_rounds=light_rounds, trial_passes=trial_passes, rebuilds=rebuilds,
                    refine_below=refine_below / 100.0)
    with input_errors():
        result = plan_file(args)
    m = result.metrics
    proven = result.extras.get("bound") or {}
    ceiling = (f", {proven['summary']} (bound {proven['value']:.2f})"
               if proven.get("value") is not None else "")
    refined = result.extras.get("refined")
    if refined:  # the first plan, and which run lifted it
        ceiling += (f"; refined from {100 * refined['first_share']:.1f}% of it"
                    + (f" by the {refined['lifted_by']}" if refined["lifted"]
                       else ", not lifted"))
    typer.echo(f"{policy}: utilization {100 * m.utilization:.1f}%, value {m.value:g}, "
               f"completed {m.completed}, realtime shortfall {m.rt_shortfall}, "
               f"objective {m.objective:.2f}{ceiling}, {result.latency_ms:.2f} ms -> {out}")


def check(
    scenario: Path = typer.Argument(..., help="Scenario JSON."),
    plan_file: Path = typer.Argument(..., help="Plan JSON to check against it."),
) -> None:
    """The outside checker: legality of the grid, and its metrics recomputed from it alone."""
    from pipelines.plan_one import check_plan

    with input_errors():
        problems = check_plan(scenario, plan_file)
    if problems:
        for p in problems:
            typer.echo(f"illegal: {p}", err=True)
        raise typer.Exit(1)
    typer.echo(f"{plan_file}: legal, metrics agree")


def show(
    plans: list[Path] = typer.Argument(..., help="Plan JSON files, drawn top to bottom."),
    png: Path = typer.Option(..., "--png", help="Output PNG."),
) -> None:
    """Draw plans: GPUs as rows by node, time as columns, one labelled box per job."""
    from pipelines.plan_one import show_plans

    with input_errors():
        show_plans(plans, png)
    typer.echo(f"wrote {png}")


def scenarios(
    out_dir: Path = typer.Option(DEFAULT_SCENARIOS, "--out-dir", help="Where to write them."),
    seed: int = typer.Option(7, "--seed", min=0, max=2**32 - 1, help="Generator seed."),
) -> None:
    """(Re)generate the seven benchmark scenarios (allocator/scenarios.py documents them)."""
    from pipelines.plan_one import write_scenarios

    for path in write_scenarios(out_dir, seed):
        typer.echo(f"wrote {path}")


def load_dir(directory: Path) -> list:
    with input_errors():
        return load_scenario_dir(directory)


def bench(
    scenario_dir: Path = typer.Option(DEFAULT_SCENARIOS, "--scenarios",
                                      help="Directory of scenario JSON files."),
    out_dir: Path = typer.Option(out_dir_default("bench"), "--out-dir",
                                 help="Where to write tables (default: under gpuplan's home)."),
    repeats: int = typer.Option(30, "--repeats", min=1, max=10_000,
                                help="Latency: calls per policy (median)."),
    png: bool = typer.Option(True, "--png/--no-png", help="Draw fast above fifo per scenario."),
    full: bool = typer.Option(False, "--full", help="Also solve each scenario with the MILP."),
    time_limit: float = typer.Option(30.0, "--time-limit", callback=finite, min=0.01, max=604_800.0,
                                     help="--full: seconds per solve."),
    scale: bool = typer.Option(False, "--scale",
                               help="Instead: latency growth from 8 to 4096 GPUs."),
    max_gpus: int = typer.Option(4096, "--max-gpus", min=1, max=4096,
                                 help="--scale: largest cluster to run."),
    bound_seconds: float = typer.Option(60.0, "--bound-seconds", callback=finite,
                                        min=0.01, max=604_800.0,
                                        help="--scale: time for each upper bound."),
    bound_max_gpus: int = typer.Option(1024, "--bound-max-gpus", min=1, max=4096,
                                       help="--scale: largest cluster to bound."),
    record_dir: Path = typer.Option(Path("benchmarks/scale"), "--record-dir",
                                    help="--scale: where each run's record is kept."),
    quality: str | None = typer.Option(None, "--quality",
                                       help="Instead: fast against full mode on the wider "
                                            "family's seeds ('tuning' to 'tuning4' "
                                            "or 'test')."),
    quality_gpus: int = typer.Option(16, "--quality-gpus",
                                     help="--quality: 16 (8-16 GPUs), 64 or 256."),
    quality_count: int | None = typer.Option(None, "--quality-count",
                                             help="--quality: the first N seeds only."),
) -> None:
    """Every policy on the benchmark scenarios: the article's table, as Markdown and CSV."""
    with input_errors():
        benchlib = benchmarks("bench")
    if quality is not None:
        with input_errors():
            bench_quality = benchmarks("bench_quality")
            if quality not in bench_quality.SEED_SETS:
                raise InputError(f"--quality takes {', '.join(bench_quality.SEED_SETS)}",
                                 field="--quality")
        command = (f"gpuplan bench --quality {quality} --quality-gpus {quality_gpus}"
                   + (f" --quality-count {quality_count}" if quality_count else "")
                   + f" --time-limit {time_limit:g}" + (" --full" if full else ""))
        bench_quality.print_report(quality, quality_gpus, quality_count, time_limit,
                                   with_full=full, command=command)
        return
    from rich.console import Console

    console = Console()
    if scale:
        _bench_scale(console, out_dir, max_gpus, bound_seconds, bound_max_gpus, record_dir)
        return
    loaded = load_dir(scenario_dir)
    with input_errors():
        report = benchlib.write_bench(out_dir, loaded, repeats, full=full, time_limit=time_limit,
                                      png=png, status=console.status)
    console.print(report)
    console.print(f"wrote {out_dir / 'bench.md'} and {out_dir / 'bench.csv'}")


def _bench_scale(console: Console, out_dir: Path, max_gpus: int, bound_seconds: float,
                 bound_max_gpus: int, record_dir: Path) -> None:
    from rich.progress import Progress

    with input_errors():
        bench_scale = benchmarks("bench_scale")
    with Progress(console=console) as progress:
        task = progress.add_task("scale benchmark", total=None)
        text, kept = bench_scale.run_and_record(
            out_dir, record_dir, max_gpus, bound_seconds, bound_max_gpus,
            progress=lambda case: progress.advance(task),
            started=lambda n: progress.update(task, total=n))
    console.print(text)
    console.print(f"wrote {out_dir / 'scale.md'}, scale.csv, scale.png and the record {kept}")


def bench_compare(
    new: Path | None = typer.Argument(None, help="A scale record (default: the newest)."),
    old: Path | None = typer.Argument(None, help="An earlier record (default: the one before)."),
    record_dir: Path = typer.Option(Path("benchmarks/scale"), "--record-dir"),
) -> None:
    """Latency ratio of one scale record to an earlier one (> 1 means slower)."""
    with input_errors():
        bench_scale = benchmarks("bench_scale")
    records = sorted(record_dir.glob("*.json"))
    if new is None or old is None:
        with input_errors(str(record_dir)):
            if len(records) < 2:
                raise InputError("need two records to compare")
        new, old = new or records[-1], old or records[-2]
    with input_errors():
        a, b = bench_scale.load_record(new), bench_scale.load_record(old)
    typer.echo(f"{new} ({a['machine']})\n  vs {old} ({b['machine']})")
    for row in bench_scale.compare(a, b):
        ratios = ", ".join(f"{k.removesuffix('_ratio')} x{v}" for k, v in row.items()
                           if k != "case")
        typer.echo(f"{row['case']}: {ratios}")
