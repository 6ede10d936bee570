"""CLI for the real-time demand profile: `profile`, `profile-servegen`; `profile-eval` and
`profile-clients` run the checkout's replays (benchmarks/, loaded by pipelines/checkout.py)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import typer

from allocator.core import limits
from allocator.core.atomic import write_text
from allocator.core.errors import InputError
from pipelines.checkout import benchmarks
from pipelines.cliutil import finite, input_errors
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
    quantile: float = typer.Option(0.95, "--quantile", callback=finite, min=0.5, max=0.999,
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
    quantile: float = typer.Option(0.95, "--quantile", callback=finite, min=0.5, max=0.999),
    select: bool = typer.Option(False, "--select",
                                help="Also run the hyper-parameter grid on week 1 only."),
    compare: bool = typer.Option(False, "--compare",
                                 help="Also compare day-ahead with Holt-Winters and STL."),
    bench: bool = typer.Option(False, "--bench",
                               help="Only time fitting and updating 100 services; no replay."),
) -> None:
    """Fit on the first week, replay the rest hour by hour; write table and plot."""
    with input_errors():
        ev = benchmarks("profile_eval")
        if bench:
            ev.write_speed(out_dir, typer.echo)
            return
        ev.write_eval(traffic, services, out_dir, fit_days=fit_days, quantile=quantile,
                      with_select=select, with_compare=compare, echo=typer.echo)
    typer.echo(f"wrote {out_dir}/profile_eval.md, .csv, .png")


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
    quantile: float = typer.Option(0.975, "--quantile", callback=finite, min=0.5, max=0.999,
                                   help="Service level of the profile's upper curve."),
    floor: float = typer.Option(0.05, "--floor", callback=finite, min=0.0,
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
    with input_errors():
        ce = benchmarks("client_eval")
        stem = ce.write_clients(clients, which, pools=pools, quantile=quantile, floor=floor,
                                day_ahead=day_ahead, lift_ceiling=lift_ceiling,
                                out_dir=out_dir, traffic=DEFAULT_TRAFFIC,
                                services=DEFAULT_SERVICES, echo=typer.echo)
    typer.echo(f"wrote {stem}.md, .csv")
