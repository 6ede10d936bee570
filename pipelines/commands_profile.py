"""CLI for the real-time demand profile: `profile`, `profile-servegen`; `profile-eval` and
`profile-clients` run the checkout's replays (benchmarks/, loaded by pipelines/checkout.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
import typer

from allocator.core import limits
from allocator.core.atomic import write_text
from allocator.core.errors import InputError
from pipelines.checkout import benchmarks
from pipelines.cliutil import input_errors
from pipelines.home import out_dir as out_dir_default

DEFAULT_TRAFFIC = "data/traffic/servegen_traffic.csv"
DEFAULT_SERVICES = "data/traffic/services.json"
DEFAULT_SERVEGEN = "data/traffic/servegen_language_14d_10min_rate.csv"
DEFAULT_CLIENTS = "data/traffic/clients"


def register(app: typer.Typer) -> None:
    """Add the profile commands to the `gpuplan` app."""
    app.command("profile")(profile)
    app.command("profile-eval")(profile_eval)
    app.command("profile-servegen")(profile_servegen)
    app.command("profile-clients")(profile_clients)


def _parse_start(value: str, field: str = "start") -> pd.Timestamp:
    from allocator.core.timeparse import parse_time

    return parse_time(value, field)


def profile(
    traffic: Path = typer.Argument(..., help="Traffic CSV/Parquet: timestamp,service,requests."),
    services: Path = typer.Option(..., "--services", help="SERVICES.json (per-service configs)."),
    start: str = typer.Option(..., "--start", help="First plan step, ISO 8601 (UTC if no offset)."),
    steps: int = typer.Option(24, "--steps", min=1, help="Plan steps to produce demand for."),
    step_minutes: int = typer.Option(60, "--step-minutes", min=1, help="Minutes per plan step."),
    quantile: float = typer.Option(0.95, "--quantile", min=0.5, max=0.999,
                                   help="Service level: demand covers this traffic quantile."),
    out: Path = typer.Option(..., "--out", help="PROFILE.json to write."),
) -> None:
    """Fit the weekly profile per service and write its GPU demand for a plan (PROFILE.json)."""
    from forecasting.profile_file import profile_for_plan

    with input_errors():
        limits.whole(steps, "--steps", low=1, high=limits.MAX_STEPS)
        limits.whole(step_minutes, "--step-minutes", low=1, high=limits.MAX_STEP_MINUTES)
        limits.finite(quantile, "--quantile", low=0.5, high=0.999)
        warnings: list[str] = []
        doc = profile_for_plan(traffic, services, _parse_start(start), steps, step_minutes,
                               quantile, warn=warnings.append)
    for line in warnings:  # only once the input is known good: bad input stays one line
        typer.echo(line, err=True)
    with input_errors():
        write_text(out, doc.to_json())
    typer.echo(f"wrote {out}: {len(doc.services)} service(s), {steps} steps from {doc.start}")


def profile_eval(
    traffic: Path = typer.Option(DEFAULT_TRAFFIC, "--traffic", help="Traffic to replay."),
    services: Path = typer.Option(DEFAULT_SERVICES, "--services", help="SERVICES.json."),
    out_dir: Path = typer.Option(out_dir_default("profile"), "--out-dir",
                                 help="Where the table (.md, .csv) and plot (.png) go."),
    fit_days: int = typer.Option(7, "--fit-days", min=1, help="Days to fit; the rest replay."),
    quantile: float = typer.Option(0.95, "--quantile", min=0.5, max=0.999),
    select: bool = typer.Option(False, "--select",
                                help="Also run the hyper-parameter grid on week 1 only."),
    compare: bool = typer.Option(False, "--compare",
                                 help="Also compare day-ahead with Holt-Winters and STL."),
    bench: bool = typer.Option(False, "--bench",
                               help="Only time fitting and updating 100 services; no replay."),
) -> None:
    """Fit on the first week, replay the rest hour by hour; write table and plot."""
    from forecasting.profile import DemandProfile
    from forecasting.traffic import hourly, load_services, load_traffic

    with input_errors():
        ev = benchmarks("profile_eval")
    if bench:
        result = ev.bench()
        _write_table(pd.DataFrame([result]), out_dir / "profile_bench")
        for key, value in result.items():
            typer.echo(f"{key}: {value:.4g}" if isinstance(value, float) else f"{key}: {value}")
        return
    with input_errors():
        limits.finite(quantile, "--quantile", low=0.5, high=0.999)
        configs = load_services(services)
        wide = hourly(load_traffic(traffic))
        if not any(name in wide.columns for name in configs):
            raise InputError("no traffic for any configured service", file=str(traffic),
                             field="service")
        if len(wide) <= 24 * fit_days:
            raise InputError(f"{len(wide)} hours of traffic leave nothing to replay after "
                             f"{fit_days} fit days", file=str(traffic), field="timestamp")
        if select and fit_days < 5:
            raise InputError("--select fits 4 days and replays the rest of the fit week: "
                             "needs --fit-days >= 5", field="fit_days")
    from pipelines import outset

    with input_errors(), outset.output_set(out_dir, "profile-eval") as stage:  # one set
        results = ev.replay(wide, configs, fit_hours=24 * fit_days,
                            model=DemandProfile(quantile=quantile))
        table = ev.metrics(results, quantile)
        _write_table(table, stage / "profile_eval", ev.markdown(table, quantile))
        ev.plot(results, str(stage / "profile_eval.png"),
                title=f"{traffic.name}: fit {fit_days} d, replay hour by hour (q={quantile})")
        verdict = ev.targets(table)
        _write_table(verdict, stage / "profile_targets")
        typer.echo(ev.markdown(table, quantile))
        typer.echo(verdict.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        if select:
            grid = ev.select(wide.iloc[: 24 * fit_days], configs, quantile)
            _write_table(grid, stage / "profile_select")
            typer.echo(grid.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
            chosen = ev.best(grid, quantile)
            typer.echo("selected (alpha fixed at 0.1, coverage within a point): " + ", ".join(
                f"{k}={chosen[k]:g}" for k in ev.SELECT_GRID))
        if compare:
            table = ev.compare_methods(wide, quantile, fit_hours=24 * fit_days)
            _write_table(table, stage / "profile_methods")
            typer.echo(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    typer.echo(f"wrote {out_dir}/profile_eval.md, .csv, .png")


def _write_table(table: pd.DataFrame, stem: Path, md: str | None = None) -> None:
    write_text(stem.with_suffix(".csv"), table.to_csv(index=False, float_format="%.10g"))
    if md is not None:
        write_text(stem.with_suffix(".md"), md)


def profile_servegen(
    source: Path = typer.Argument(Path(DEFAULT_SERVEGEN), help="ServeGen 10-minute rate CSV."),
    anchor: str = typer.Option("2025-03-03T00:00:00Z", "--anchor",
                               help="Date of the trace's day 0 (a Monday, see SOURCE.md)."),
    out: Path = typer.Option(Path(DEFAULT_TRAFFIC), "--out", help="Traffic CSV to write."),
) -> None:
    """Derive contract traffic rows (timestamp,service,requests) from ServeGen's pool rates."""
    from forecasting.traffic import read_table, servegen_to_long

    with input_errors(str(source)):
        wide = read_table(source)
        need = ["window_start_s"] + [f"{p}_rate_rps" for p in ("m-large", "m-mid", "m-small")]
        missing = [c for c in need if c not in wide.columns]
        if missing:
            raise InputError("missing ServeGen column", field=missing[0])
        _parse_start(anchor, field="anchor")
        rows = servegen_to_long(wide, anchor)
    write_text(out, rows.to_csv(index=False))
    typer.echo(f"wrote {out}: {len(rows)} rows")


def profile_clients(
    clients: Path = typer.Option(Path(DEFAULT_CLIENTS), "--clients",
                                 help="Folder with servegen_clients.csv, services.json and "
                                      "selection.json."),
    which: str = typer.Option("reported", "--set",
                              help="reported (the evaluation) or tuning (where settings "
                                   "are chosen)."),
    pools: bool = typer.Option(True, "--pools/--no-pools",
                               help="Also replay the three pooled series (reported set only)."),
    quantile: float = typer.Option(0.975, "--quantile", min=0.5, max=0.999,
                                   help="Service level of the profile's upper curve."),
    floor: float = typer.Option(0.05, "--floor", min=0.0,
                                help="Count floor of the log transform, as a share of the "
                                     "median non-zero hour (DemandProfile.floor)."),
    day_ahead: bool = typer.Option(False, "--day-ahead",
                                   help="Plan each day at midnight with `gpuplan profile`'s "
                                        "own path and hold it (no hourly replanning)."),
    lift_ceiling: bool = typer.Option(False, "--lift-ceiling",
                                      help="Treat every client as growing: no ceiling at "
                                           "the trailing-week peak (shows what it prevents)."),
    out_dir: Path = typer.Option(Path("out/profile"), "--out-dir"),
) -> None:
    """Replay days 8-14 of the ServeGen clients hour by hour against static peak,
    seasonal maximum and seasonal naive; write the per-client table and the aggregate."""
    from allocator.core.readers import read_json
    from forecasting.clients import clients_wide, load_clients
    from forecasting.profile import DemandProfile
    from forecasting.traffic import hourly, load_services, load_traffic

    with input_errors():
        ce = benchmarks("client_eval")
        if which not in ("reported", "tuning"):
            raise InputError("expected reported or tuning", field="set")
        selection = read_json(clients / "selection.json")
        names = selection.get(which) if isinstance(selection, dict) else None
        if not isinstance(names, list) or not names:
            raise InputError(f"no {which!r} list", file=str(clients / "selection.json"),
                             field=which)
        configs = load_services(clients / "services.json")
        if lift_ceiling:
            configs = {n: replace(c, growing=True) for n, c in configs.items()}
        unsized = [n for n in names if n not in configs]
        if unsized:
            raise InputError("selected but not in services.json", job=unsized[0],
                             file=str(clients / "services.json"), field="service")
        wide = clients_wide(load_clients(str(clients / "servegen_clients.csv")))
        absent = [n for n in names if n not in wide.columns]
        if absent:
            raise InputError("selected but has no rows", job=absent[0],
                             file=str(clients / "servegen_clients.csv"), field="client")
        pooled = None
        if pools and which == "reported":
            pooled = (hourly(load_traffic(DEFAULT_TRAFFIC)), load_services(DEFAULT_SERVICES))
    def run(frame: pd.DataFrame, sized: dict) -> pd.DataFrame:
        if day_ahead:
            return ce.metrics(ce.replay_day_ahead(frame, sized, quantile=quantile, floor=floor))
        return ce.metrics(ce.replay(frame, sized,
                                    model=DemandProfile(quantile=quantile, floor=floor)))

    table = run(wide[names], {n: configs[n] for n in names})
    summary = ce.aggregate(table)
    text = ce.markdown(table, summary)
    if pooled is not None:
        pool_table = run(pooled[0], pooled[1])
        text += "\nPooled series (" + DEFAULT_TRAFFIC + "):\n\n" + ce.markdown(
            pool_table, ce.aggregate(pool_table))
        table = pd.concat([table, pool_table], ignore_index=True)
    stem = out_dir / f"profile_clients_{which}{'_day_ahead' if day_ahead else ''}"
    _write_table(table, stem, text)
    _write_table(summary, stem.with_name(stem.name + "_summary"))
    typer.echo(text)
    typer.echo(f"wrote {stem}.md, .csv")
