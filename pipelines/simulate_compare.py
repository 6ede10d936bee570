"""What `gpuplan simulate` runs: policies compared on worlds, and fast's horizon/decay sweep.

`SimArgs` is the command line as values; `resolve` checks it and builds the worlds;
`run_simulate` replays them, writes every report as one output set (pipelines.outset) and
logs the run to MLflow. `compare` and `sweep` are the two replays a run is made of.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from allocator import policies as registry
from allocator.core import atomic, limits
from allocator.core.errors import InputError
from allocator.core.timeparse import parse_time
from pipelines import outset
from pipelines import simulate_report as report
from pipelines.philly import PhillyConfig, philly_world
from pipelines.simulate import OutOfTime, SimConfig, check_estimate_horizon, run_many
from pipelines.worlds import World, suite, suite_world

Runner = Callable[..., list]  # run_many with the workers, progress and deadline bound


@dataclass(frozen=True)
class SimArgs:
    """What `gpuplan simulate` reads (its options, one field each)."""

    world: str | None
    use_suite: bool
    use_philly: bool
    seed: int
    days: int
    horizon: int
    replan_every: int
    policies: str  # comma-separated
    margin: float
    lead: int
    sweep_horizon: str | None
    sweep_decay: str
    gpus: int
    philly_start: str
    philly_vc: str
    forecaster: str
    philly_csv: Path
    traffic: Path
    out: Path
    workers: int
    guard: bool
    track: bool
    max_seconds: float
    stability: float | None = None  # fast's stability term; None: off
    estimate_horizon: int = SimConfig.estimate_horizon  # long plans for start estimates
    overrun_share: float = SimConfig.overrun_share  # an overrun's remaining time planned


@dataclass(frozen=True)
class SimRequest:
    """The checked run: the worlds built, the policies, the sweep and where it all goes."""

    args: SimArgs
    worlds: list[World]
    name: str  # the output directory's name under --out, and the MLflow run's
    policies: list[str]
    config: SimConfig
    source: object  # {"seed", "days"} for suite worlds, the PhillyConfig for Philly
    horizons: list[int]  # the sweep's; empty: no sweep
    decays: list[float]
    command: str  # how to reproduce it

    @property
    def replays(self) -> int:
        """Replays in the run, for a progress bar."""
        return len(self.worlds) * (len(self.policies) + len(self.horizons) * len(self.decays))


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


def _check_options(a: SimArgs) -> None:
    """Each numeric option inside its documented range, named when it is not."""
    limits.whole(a.days, "--days", low=1, high=limits.MAX_SIM_DAYS)
    limits.whole(a.horizon, "--horizon", low=1, high=96)  # the worlds' look-ahead
    limits.whole(a.replan_every, "--replan-every", low=1, high=a.horizon)
    limits.whole(a.gpus, "--gpus", low=1, high=limits.MAX_GPUS)
    limits.whole(a.workers, "--workers", low=1, high=limits.MAX_WORKERS)
    limits.whole(a.lead, "--lead", low=0, high=96 - a.horizon)
    limits.finite(a.margin, "--margin", low=0, high=10)
    limits.finite(a.overrun_share, "--overrun-share", low=0, high=10)
    limits.finite(a.max_seconds, "--max-seconds", low=0, high=limits.MAX_SECONDS)
    if a.stability is not None:
        limits.finite(a.stability, "--stability", low=0, high=10)
    check_estimate_horizon(a.estimate_horizon, a.horizon)


def _worlds(a: SimArgs) -> tuple[list[World], str, object]:
    """The worlds to replay, the run's name, and where the worlds came from."""
    if a.world is not None:
        try:
            return [suite_world(a.world, a.seed, a.days)], a.world, {"seed": a.seed,
                                                                     "days": a.days}
        except KeyError as err:
            raise InputError(str(err.args[0]), field="--world") from None
    if a.use_suite:
        return suite(a.seed, days=a.days), "suite", {"seed": a.seed, "days": a.days}
    source = PhillyConfig(vc=a.philly_vc, start=a.philly_start, gpus=a.gpus, seed=a.seed,
                          forecaster=a.forecaster, philly_csv=a.philly_csv,
                          servegen_csv=a.traffic)
    worlds = [philly_world(source)]
    return worlds, worlds[0].name, source


def _command(a: SimArgs, policies: list[str]) -> str:
    what = f"--world {a.world}" if a.world else "--suite" if a.use_suite else \
        (f"--philly --gpus {a.gpus} --philly-start {a.philly_start} --philly-vc "
         f"{a.philly_vc} --forecaster {a.forecaster}")
    days_part = "" if a.use_philly else f" --days {a.days}"
    return (f"gpuplan simulate {what} --seed {a.seed}{days_part} --horizon {a.horizon} "
            f"--replan-every {a.replan_every} --policies {','.join(policies)} "
            f"--margin {a.margin:g} --lead {a.lead} --out {a.out}"
            + (" --guard" if a.guard else "")
            + ("" if a.stability is None else f" --stability {a.stability:g}")
            + f" --estimate-horizon {a.estimate_horizon}"
            + (f" --overrun-share {a.overrun_share:g}" if a.overrun_share else ""))


def resolve(a: SimArgs) -> SimRequest:
    """Check every option (InputError naming it) and build the worlds."""
    if sum([a.world is not None, a.use_suite, a.use_philly]) != 1:
        raise InputError("choose exactly one of --world NAME, --suite, --philly",
                         field="--world")
    policies = [p.strip() for p in a.policies.split(",") if p.strip()]
    unknown = [p for p in policies if p not in registry.POLICIES]
    if unknown or not policies:
        raise InputError(f"unknown policy {unknown[0] if unknown else ''!r}; choose from "
                         f"{', '.join(sorted(registry.POLICIES))}", field="--policies")
    _check_options(a)
    if a.use_philly:
        parse_time(a.philly_start, "--philly-start")
    horizons = _ints(a.sweep_horizon, "--sweep-horizon") if a.sweep_horizon else []
    decays = _floats(a.sweep_decay, "--sweep-decay")
    config = SimConfig(horizon=a.horizon, replan_every=a.replan_every, margin=a.margin,
                       lead=a.lead, guard=a.guard, stability=a.stability,
                       estimate_horizon=a.estimate_horizon, overrun_share=a.overrun_share)
    worlds, name, source = _worlds(a)
    if max(horizons, default=0) + a.lead > 96:
        raise InputError("horizon + lead must be <= 96 (the worlds' look-ahead)",
                         field="--sweep-horizon")
    return SimRequest(args=a, worlds=worlds, name=name, policies=policies, config=config,
                      source=source, horizons=horizons, decays=decays,
                      command=_command(a, policies))


def run_simulate(request: SimRequest, progress: Callable[[], None] | None = None) -> list[Path]:
    """Replay, write every report as one set under --out/NAME, log it; the files written
    (the first is the main report). Past --max-seconds: InputError, nothing written."""
    a = request.args
    target = a.out / request.name
    deadline = time.monotonic() + a.max_seconds if a.max_seconds else None
    runner = partial(run_many, workers=a.workers, progress=progress, deadline=deadline)
    with outset.output_set(target, "simulate") as stage:  # every report, or none
        try:
            files, summary = compare(request.worlds, request.policies, request.config,
                                     runner, stage, request.command, request.source)
            if request.horizons:
                more, swept = sweep(request.worlds, request.horizons, request.decays,
                                    request.config, runner, stage / "sweep",
                                    f"{request.command} --sweep-horizon {a.sweep_horizon} "
                                    f"--sweep-decay {a.sweep_decay}")
                files += more
                summary.update(swept)
        except OutOfTime as err:
            raise InputError(f"stopped after {a.max_seconds:g} s ({err}); nothing written",
                             field="--max-seconds") from None
    files = [target / f.relative_to(stage) for f in files]
    if a.track:
        top = [f for f in files if f.parent in (target, target / "sweep")]
        log(request.name, request.config, request.source, summary, top)
    return files


def compare(worlds: list[World], policies: list[str], config: SimConfig, runner: Runner,
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


def sweep(worlds: list[World], horizons: list[int], decays: list[float], config: SimConfig,
          runner: Runner, target: Path, command: str) -> tuple[list[Path], dict]:
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
    text = (f"# Horizon sweep (fast): {label}\n\nReproduce: `{command}`\n\nValue is summed "
            f"over worlds; utilization and churn are means over worlds; churn is the share of "
            f"(queued job, consecutive plans) pairs whose planned start moved.\n\n{table}\n"
            f"![sweep]({png.name})\n")
    files = [target / "report.md", png, target / "sweep.json"]
    atomic.write_text(files[0], text)
    atomic.write_text(files[2], atomic.json_text(rows, indent=1))
    summary = {f"sweep.h{r['horizon']}.d{r['decay']:g}.{k}": r[k]
               for r in rows for k in ("value", "rt_shortfall_pct", "churn_pct")}
    return files, summary


def log(name: str, config: SimConfig, source: object, summary: dict,
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
        print(f"gpuplan: warning: MLflow logging skipped ({err})", file=sys.stderr)
