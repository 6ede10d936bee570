"""`gpuplan simulate`: rolling-horizon replays of a suite world, the seeded suite or Philly.

Each run writes a report (Markdown table, PNG of utilization and shortfall over time,
metrics and the resolved configuration) atomically under --out, and logs it to MLflow
when tracking is on; `--sweep-horizon` adds the horizon/decay sweep (end-of-world effect).
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path

import typer

from allocator import policies as registry
from allocator.core import atomic, limits
from allocator.core.errors import InputError
from allocator.core.timeparse import parse_time
from pipelines import outset
from pipelines import simulate_report as report
from pipelines.cliutil import input_errors
from pipelines.home import out_dir as out_dir_default
from pipelines.philly import PHILLY_CSV, SERVEGEN_CSV, PhillyConfig, philly_world
from pipelines.simulate import OutOfTime, SimConfig, run_many
from pipelines.worlds import World, suite, suite_world

Runner = Callable[..., list]  # run_many with the workers, progress and deadline bound


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate)


def _ints(text: str, what: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise InputError(f"expected comma-separated integers, got {text!r}", field=what) from None
    if not values or min(values) < 1 or max(values) > 96:
        raise InputError("expected integers from 1 to 96", field=what)
    return values


def _floats(text: str, what: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise InputError(f"expected comma-separated numbers, got {text!r}", field=what) from None
    if not values or not all(0 < v <= 1 for v in values):  # NaN fails this too
        raise InputError("each decay must be in (0, 1]", field=what)
    return values


def _check_options(*, days: int, horizon: int, replan_every: int, gpus: int, workers: int,
                   lead: int, margin: float) -> None:
    """Each numeric option inside its documented range, named when it is not."""
    limits.whole(days, "--days", low=1, high=limits.MAX_SIM_DAYS)
    limits.whole(horizon, "--horizon", low=1, high=96)  # the worlds' look-ahead
    limits.whole(replan_every, "--replan-every", low=1, high=horizon)
    limits.whole(gpus, "--gpus", low=1, high=limits.MAX_GPUS)
    limits.whole(workers, "--workers", low=1, high=limits.MAX_WORKERS)
    limits.whole(lead, "--lead", low=0, high=96 - horizon)
    limits.finite(margin, "--margin", low=0, high=10)


def simulate(
    world: str | None = typer.Option(None, "--world", help="One suite world, e.g. high-03."),
    use_suite: bool = typer.Option(False, "--suite", help="The seeded suite (21 worlds)."),
    use_philly: bool = typer.Option(False, "--philly",
                                    help="A week of Philly jobs with ServeGen demand."),
    seed: int = typer.Option(7, "--seed", min=0, max=2**32 - 1,
                             help="Seed of the suite / Philly priorities."),
    days: int = typer.Option(2, "--days", help="Suite worlds: days replayed."),
    horizon: int = typer.Option(24, "--horizon", help="Steps each plan looks ahead."),
    replan_every: int = typer.Option(1, "--replan-every", help="Steps committed per plan."),
    policy_list: str = typer.Option("fast,fifo,priority", "--policies",
                                    help="Policies to replay, comma-separated."),
    margin: float = typer.Option(0.15, "--margin", help="Headroom on the demand forecast."),
    lead: int = typer.Option(1, "--lead", help="Provision each step for the next LEAD too."),
    sweep_horizon: str | None = typer.Option(None, "--sweep-horizon",
                                             help="Also sweep fast's horizon, e.g. 2,6,12,24,48."),
    sweep_decay: str = typer.Option("0.97,1.0", "--sweep-decay",
                                    help="Decays crossed with --sweep-horizon."),
    gpus: int = typer.Option(32, "--gpus", help="Philly: cluster size."),
    philly_start: str = typer.Option("2017-11-06", "--philly-start", help="Philly: week start."),
    philly_vc: str = typer.Option("6c71a0", "--philly-vc", help="Philly: virtual cluster."),
    forecaster: str = typer.Option("naive", "--forecaster",
                                   help="Philly: naive (hour-of-day median + level) or profile "
                                        "(forecasting.profile's upper band)."),
    philly_csv: Path = typer.Option(PHILLY_CSV, "--philly-csv", help="Philly trace (extract)."),
    traffic: Path = typer.Option(SERVEGEN_CSV, "--traffic", help="ServeGen 10-min pool rates."),
    out: Path = typer.Option(out_dir_default("simulate"), "--out", "-o", help="Output directory."),
    workers: int = typer.Option(2, "--workers", help="Processes for independent replays."),
    guard: bool = typer.Option(False, "--guard/--no-guard",
                               help="Starvation guard for fast/full/backfill: age claims and "
                                    "the top job's reservation (docs/starvation.md)."),
    track: bool = typer.Option(True, "--track/--no-track", help="Log the report to MLflow."),
    max_seconds: float = typer.Option(0.0, "--max-seconds",
                                      help="Stop (exit 2, nothing written) past this many "
                                           "seconds of replay; 0 = no limit but the caps."),
) -> None:
    """Replay with forecast error: plan the horizon, commit the step, compare policies."""
    with input_errors():
        if sum([world is not None, use_suite, use_philly]) != 1:
            raise InputError("choose exactly one of --world NAME, --suite, --philly",
                             field="--world")
        policies = [p.strip() for p in policy_list.split(",") if p.strip()]
        unknown = [p for p in policies if p not in registry.POLICIES]
        if unknown or not policies:
            raise InputError(f"unknown policy {unknown[0] if unknown else ''!r}; choose from "
                             f"{', '.join(sorted(registry.POLICIES))}", field="--policies")
        _check_options(days=days, horizon=horizon, replan_every=replan_every, gpus=gpus,
                       workers=workers, lead=lead, margin=margin)
        limits.finite(max_seconds, "--max-seconds", low=0, high=limits.MAX_SECONDS)
        if use_philly:
            parse_time(philly_start, "--philly-start")
        horizons = _ints(sweep_horizon, "--sweep-horizon") if sweep_horizon else []
        decays = _floats(sweep_decay, "--sweep-decay")
        config = SimConfig(horizon=horizon, replan_every=replan_every, margin=margin, lead=lead,
                           guard=guard)
        source: object = {"seed": seed, "days": days}
        if world is not None:
            try:
                worlds = [suite_world(world, seed, days)]
            except KeyError as err:
                raise InputError(str(err.args[0]), field="--world") from None
            name = world
        elif use_suite:
            worlds, name = suite(seed, days=days), "suite"
        else:
            source = PhillyConfig(vc=philly_vc, start=philly_start, gpus=gpus, seed=seed,
                                  forecaster=forecaster, philly_csv=philly_csv,
                                  servegen_csv=traffic)
            worlds = [philly_world(source)]
            name = worlds[0].name
        if max(horizons, default=0) + lead > 96:
            raise InputError("horizon + lead must be <= 96 (the worlds' look-ahead)",
                             field="--sweep-horizon")
    command = _command(world, use_suite, use_philly, seed, days, horizon, replan_every,
                       policies, margin, lead, gpus, philly_start, philly_vc, forecaster, out)
    if guard:
        command += " --guard"
    target = out / name
    deadline = time.monotonic() + max_seconds if max_seconds else None
    total = len(worlds) * (len(policies) + len(horizons) * len(decays))
    with _progress(total) as tick, input_errors(), \
            outset.output_set(target, "simulate") as stage:  # every report, or none
        runner = partial(run_many, workers=workers, progress=tick, deadline=deadline)
        try:
            files, summary = _compare(worlds, policies, config, runner, stage, command, source)
            if horizons:
                sweep_files, sweep_summary = _sweep(worlds, horizons, decays, config, runner,
                                                    stage / "sweep", command, sweep_horizon,
                                                    sweep_decay)
                files += sweep_files
                summary.update(sweep_summary)
        except OutOfTime as err:
            raise InputError(f"stopped after {max_seconds:g} s ({err}); nothing written",
                             field="--max-seconds") from None
    files = [target / f.relative_to(stage) for f in files]
    if track:
        top = [f for f in files if f.parent in (target, target / "sweep")]
        _log(name, config, source, summary, top)
    typer.echo(f"report -> {files[0]}")


def _command(world: str | None, use_suite: bool, use_philly: bool, seed: int, days: int,
             horizon: int, replan_every: int, policies: list[str], margin: float, lead: int,
             gpus: int, start: str, vc: str, forecaster: str, out: Path) -> str:
    what = f"--world {world}" if world else "--suite" if use_suite else \
        f"--philly --gpus {gpus} --philly-start {start} --philly-vc {vc} --forecaster {forecaster}"
    days_part = "" if use_philly else f" --days {days}"
    return (f"gpuplan simulate {what} --seed {seed}{days_part} --horizon {horizon} "
            f"--replan-every {replan_every} --policies {','.join(policies)} --margin {margin:g} "
            f"--lead {lead} --out {out}")


def _progress(total: int):
    """A progress bar on stderr when it is a terminal; else a no-op tick."""
    if not sys.stderr.isatty():
        return contextlib.nullcontext(lambda: None)
    from rich.console import Console
    from rich.progress import Progress

    @contextlib.contextmanager
    def bar():
        with Progress(console=Console(stderr=True), transient=True) as shown:
            task = shown.add_task("replaying", total=total)
            yield lambda: shown.advance(task)
    return bar()


def _compare(worlds: list[World], policies: list[str], config: SimConfig, runner: Runner,
             target: Path, command: str, source: object) -> tuple[list[Path], dict]:
    """Every policy on every world; one report per world, and a suite page over them."""
    results = runner(worlds, policies, config)
    by_world: dict[str, dict[str, dict[str, float]]] = {}
    replays: dict[str, dict] = {}
    for world_name, policy, metrics, rec in results:
        by_world.setdefault(world_name, {})[policy] = metrics
        replays.setdefault(world_name, {})[policy] = rec
    files: list[Path] = []
    summary: dict[str, float] = {}
    single = len(worlds) == 1
    for world_name, metrics in by_world.items():
        where = target if single else target / world_name
        files += report.write_world_report(where, replays[world_name], metrics, config,
                                           command, source)
        for policy, m in metrics.items():
            for key in ("utilization", "value", "rt_shortfall_pct", "completed", "churn_pct",
                        "violations"):
                summary[f"{world_name}.{policy}.{key}"] = m[key]
    if single:
        return files, summary
    page = [f"# Replay suite: {len(worlds)} worlds\n", f"Reproduce: `{command}`\n"]
    if {"fast", "fifo", "priority"} <= set(policies):
        table, worst = report.suite_table(by_world)
        page += [table, report.targets_text(worst, len(worlds))]
        summary.update({f"worst.{k}": v for k, v in worst.items()})
    page.append("Per-world reports (table and plot): `<world>/report.md`.\n")
    index = target / "report.md"
    atomic.write_text(index, "\n".join(page))
    atomic.write_text(target / "metrics.json", atomic.json_text(by_world, indent=1, sort_keys=True))
    return [index, target / "metrics.json", *files], summary


def _sweep(worlds: list[World], horizons: list[int], decays: list[float], config: SimConfig,
           runner: Runner, target: Path, command: str, sweep_horizon: str | None,
           sweep_decay: str) -> tuple[list[Path], dict]:
    """fast at each (horizon, decay): realized value, shortfall and churn, summed over worlds."""
    rows = []
    for decay in decays:
        for h in horizons:
            cfg = replace(config, horizon=h, decay=decay)
            results = runner(worlds, ["fast"], cfg)
            ms = [m for _, _, m, _ in results]
            demand = sum(m["rt_demand"] for m in ms)
            rows.append({
                "horizon": h, "decay": decay,
                "value": sum(m["value"] for m in ms),
                "utilization": float(sum(m["utilization"] for m in ms) / len(ms)),
                "rt_shortfall_pct": 100 * sum(m["rt_shortfall"] for m in ms) / demand
                if demand else 0.0,
                "churn_pct": float(sum(m["churn_pct"] for m in ms) / len(ms)),
                "plan_ms_mean": float(sum(m["plan_ms_mean"] for m in ms) / len(ms)),
                "violations": sum(m["violations"] for m in ms),
            })
    label = worlds[0].name if len(worlds) == 1 else f"{len(worlds)} worlds"
    png = target / "sweep.png"
    atomic.write_bytes(png, report.plot_sweep(rows, f"fast, horizon sweep: {label}"))
    table = report.markdown(
        ["horizon", "decay", "value", "util %", "rt short %", "churn %", "ms/plan",
         "moved/interrupted"],
        [[r["horizon"], f"{r['decay']:g}", f"{r['value']:g}", f"{100 * r['utilization']:.1f}",
          f"{r['rt_shortfall_pct']:.2f}", f"{r['churn_pct']:.1f}", f"{r['plan_ms_mean']:.1f}",
          f"{r['violations']:g}"] for r in rows])
    text = (f"# Horizon sweep (fast): {label}\n\nReproduce: `{command} --sweep-horizon "
            f"{sweep_horizon} --sweep-decay {sweep_decay}`\n\nValue is summed over worlds; "
            f"utilization and churn are means over worlds; churn is the share of (queued job, "
            f"consecutive plans) pairs whose planned start moved.\n\n{table}\n"
            f"![sweep]({png.name})\n")
    files = [target / "report.md", png, target / "sweep.json"]
    atomic.write_text(files[0], text)
    atomic.write_text(files[2], atomic.json_text(rows, indent=1))
    summary = {f"sweep.h{r['horizon']}.d{r['decay']:g}.{k}": r[k]
               for r in rows for k in ("value", "rt_shortfall_pct", "churn_pct")}
    return files, summary


def _log(name: str, config: SimConfig, source: object, summary: dict,
         files: list[Path]) -> None:
    """One MLflow run per simulation; any failure of MLflow is a warning, never an error."""
    try:
        from pipelines.tracking import get_tracker

        with get_tracker().run("gpuplan-simulate", name) as run:
            params = {f"sim.{k}": v for k, v in report.resolved(config).items()}
            if isinstance(source, dict):
                params.update({f"world.{k}": v for k, v in source.items()})
            else:
                params.update({f"world.{k}": v for k, v in report.resolved(source).items()})
            run.params(params)
            run.metrics(summary)
            run.artifacts([f for f in files if f.suffix in (".md", ".png", ".json")],
                          "simulate")
    except Exception as err:  # tracking is a side channel
        typer.echo(f"gpuplan: warning: MLflow logging skipped ({err})", err=True)
