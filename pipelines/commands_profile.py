"""CLI for the real-time demand profile: `profile`, `profile-eval`, `profile-servegen`."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import typer

from allocator import limits
from allocator.errors import InputError
from pipelines.atomic import write_text
from pipelines.cliutil import input_errors

DEFAULT_TRAFFIC = "data/traffic/servegen_traffic.csv"
DEFAULT_SERVICES = "data/traffic/services.json"
DEFAULT_SERVEGEN = "data/traffic/servegen_language_14d_10min_rate.csv"


def register(app: typer.Typer) -> None:
    """Add the profile commands to the `gpuplan` app."""
    app.command("profile")(profile)
    app.command("profile-eval")(profile_eval)
    app.command("profile-servegen")(profile_servegen)


def _parse_start(value: str, field: str = "start") -> pd.Timestamp:
    from allocator.timeparse import parse_time

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
    from forecasting.demand import demand_for_services, fit_services

    with input_errors():
        limits.whole(steps, "--steps", low=1, high=limits.MAX_STEPS)
        limits.whole(step_minutes, "--step-minutes", low=1, high=limits.MAX_STEP_MINUTES)
        limits.finite(quantile, "--quantile", low=0.5, high=0.999)
        when = _parse_start(start)
        model, configs = fit_services(traffic, services, quantile)
        demand = demand_for_services(model, configs, when, steps, step_minutes)
    doc = {
        "start": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "step_minutes": step_minutes,
        "quantile": quantile,
        "fitted_through": model.last_hour_.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "services": [
            {
                "service": name,
                "profile": _rounded(model.profile(name)),
                "profile_upper": _rounded(model.profile(name, upper=True)),
                "demand": demand[name],
                "swap_limit": cfg.swap_limit,
                "priority": cfg.priority,
                "fit": model.fit_quality_[name],
            }
            for name, cfg in configs.items()
        ],
    }
    with input_errors():
        write_text(out, json.dumps(doc, indent=1, allow_nan=False) + "\n")
    typer.echo(f"wrote {out}: {len(configs)} service(s), {steps} steps from {doc['start']}")


def _rounded(values: object) -> list[float]:
    return [round(float(v), 1) if math.isfinite(v) else 0.0 for v in values]


def profile_eval(
    traffic: Path = typer.Option(DEFAULT_TRAFFIC, "--traffic", help="Traffic to replay."),
    services: Path = typer.Option(DEFAULT_SERVICES, "--services", help="SERVICES.json."),
    out_dir: Path = typer.Option(Path("out/profile"), "--out-dir",
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
    from forecasting import profile_eval as ev
    from forecasting.profile import DemandProfile
    from forecasting.traffic import hourly, load_services, load_traffic

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
