"""`gpuplan slurm ...`: history, snapshot, apply, release-all (see docs/slurm.md)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import typer

from allocator.core.errors import InputError
from pipelines.cliutil import input_errors

slurm_app = typer.Typer(name="slurm", no_args_is_help=True,
                        help="gpuplan above Slurm: read history, queue and nodes; apply a plan.")
EXIT_SLURM = 1  # a Slurm command failed: not bad input, but nothing (more) was done
MAX_LISTED = 30


def register(app: typer.Typer) -> None:
    app.add_typer(slurm_app, name="slurm")


def _fail(message: str) -> typer.Exit:
    print(f"gpuplan: error: {message}", file=sys.stderr)
    return typer.Exit(EXIT_SLURM)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror}", file=str(path)) from None


def _source(file: Path | None, name: str, *args: str) -> tuple[str, str]:
    """(text, where it came from): a saved file when given, else the live command."""
    from pipelines.slurm.run import SlurmError, run

    if file is not None:
        return _read(file), str(file)
    try:
        return run(name, *args), f"{name} {' '.join(args)}"
    except SlurmError as err:
        raise _fail(str(err)) from None


def _parsed(parse, text: str, where: str):
    try:
        return parse(text)
    except InputError as err:
        raise err.located(where) from None


@slurm_app.command("history")
def history(
    out: Path = typer.Option(..., "--out", help="Training history CSV to write."),
    since: str = typer.Option("2000-01-01", "--since", help="sacct -S: jobs since this date."),
    quantization_out: Path | None = typer.Option(
        None, "--quantization-out", help="Also write the quantization jobs' history here."),
    features: Path | None = typer.Option(
        None, "--features", help="JSON {job id or name: {feature: value}}, on top of comments."),
    sacct: Path | None = typer.Option(
        None, "--sacct", help="Read saved `sacct --json` or `sacct -X -P` output instead."),
    text: bool = typer.Option(False, "--text", help="Ask sacct for -P text, not JSON."),
) -> None:
    """Finished GPU jobs from accounting -> a history `gpuplan train` accepts."""
    from allocator.core.atomic import atomic_path
    from pipelines.slurm.history import build_history
    from pipelines.slurm.parse import SACCT_FORMAT, parse_sacct

    with input_errors():
        extra = {}
        if features is not None:
            try:
                extra = json.loads(_read(features))
            except ValueError as err:
                raise InputError(f"not valid JSON: {err}", file=str(features)) from None
            if not isinstance(extra, dict) or not all(isinstance(v, dict)
                                                      for v in extra.values()):
                raise InputError("expected {job id or name: {feature: value}}",
                                 file=str(features))
            extra = {str(k): v for k, v in extra.items()}
        args = ("-X", "-a", "-S", since) + (("-P", f"--format={SACCT_FORMAT}") if text
                                            else ("--json",))
        raw, where = _source(sacct, "sacct", *args)
        jobs = _parsed(parse_sacct, raw, where)
        hist = build_history(jobs, extra)
    with atomic_path(out) as tmp:
        hist.training.to_csv(tmp, index=False)
    print(f"wrote {out}: {len(hist.training)} training jobs")
    if quantization_out is not None:
        with atomic_path(quantization_out) as tmp:
            hist.quantization.to_csv(tmp, index=False)
        print(f"wrote {quantization_out}: {len(hist.quantization)} quantization jobs")
    if hist.unusable:
        print(f"{len(hist.unusable)} jobs not usable:", file=sys.stderr)
        for u in hist.unusable[:MAX_LISTED]:
            print(f"  {u.id} ({u.name}): {u.reason}", file=sys.stderr)
        if len(hist.unusable) > MAX_LISTED:
            print(f"  ... and {len(hist.unusable) - MAX_LISTED} more", file=sys.stderr)


@slurm_app.command("snapshot")
def snapshot(
    out_dir: Path = typer.Option(..., "--out-dir", help="Where queue.csv, running.json and "
                                 "cluster.json go."),
    step_minutes: int = typer.Option(60, "--step-minutes", min=1, help="Plan step length."),
    steps: int | None = typer.Option(None, "--steps", min=1, help="Steps (default: a day)."),
    squeue: Path | None = typer.Option(None, "--squeue", help="Saved `squeue --json` output."),
    sinfo: Path | None = typer.Option(None, "--sinfo", help="Saved `sinfo --json` output."),
) -> None:
    """The scheduler now -> plan-day's queue, running jobs and cluster files."""
    from allocator.core.atomic import atomic_path, write_text
    from pipelines.slurm.parse import parse_sinfo, parse_squeue
    from pipelines.slurm.snapshot import take_snapshot

    with input_errors():
        jobs = _parsed(parse_squeue, *_source(squeue, "squeue", "--json"))
        nodes = _parsed(parse_sinfo, *_source(sinfo, "sinfo", "--json"))
        snap = take_snapshot(jobs, nodes, time.time(), step_minutes, steps)
    queue, running, cluster = out_dir / "queue.csv", out_dir / "running.json", \
        out_dir / "cluster.json"
    with atomic_path(queue) as tmp:
        snap.queue.to_csv(tmp, index=False)
    write_text(running, json.dumps(snap.running, indent=1) + "\n")
    write_text(cluster, json.dumps(snap.cluster, indent=1) + "\n")
    c = snap.cluster["cluster"]
    print(f"wrote {queue} ({len(snap.queue)} pending), {running} "
          f"({len(snap.running['jobs'])} running), {cluster} ({len(snap.cluster['nodes'])} "
          f"nodes of {c['node_size']} GPUs)")
    for job, why in snap.skipped[:MAX_LISTED]:
        print(f"  skipped {job}: {why}", file=sys.stderr)
    if len(snap.skipped) > MAX_LISTED:
        print(f"  ... and {len(snap.skipped) - MAX_LISTED} more skipped", file=sys.stderr)


def _scontrol(argv: tuple[str, ...]) -> None:
    from pipelines.slurm.run import run

    run("scontrol", *argv)


def _live_state():
    from pipelines.slurm.parse import parse_reservations, parse_sinfo, parse_squeue

    jobs = _parsed(parse_squeue, *_source(None, "squeue", "--json"))
    nodes = _parsed(parse_sinfo, *_source(None, "sinfo", "--json"))
    resv = parse_reservations(_source(None, "scontrol", "-o", "show", "reservation")[0])
    return jobs, nodes, resv


def _report(outcome, dry_run: bool, actions) -> None:
    if dry_run:
        for a in actions:
            print(a.line())
        print(f"dry run: {len(actions)} commands, nothing changed")
        return
    for a in outcome.applied:
        print(f"applied: {a.line()}")
    if outcome.failed is not None:
        print(f"FAILED: {outcome.failed.line()}: {outcome.error}", file=sys.stderr)
        for a in [outcome.failed, *outcome.not_applied]:
            print(f"not applied: {a.line()}", file=sys.stderr)
        print(f"{len(outcome.applied)} applied, {len(outcome.not_applied) + 1} not applied; "
              "rerun the same command to complete it", file=sys.stderr)
        raise typer.Exit(EXIT_SLURM)
    print(f"{len(outcome.applied)} commands applied" if outcome.applied
          else "nothing to change: Slurm already follows the plan")


@slurm_app.command("apply")
def apply(
    plan: Path = typer.Argument(..., help="plan.json from `gpuplan plan-day`."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the scontrol commands only."),
    log: Path | None = typer.Option(None, "--log", help="JSON-lines action log "
                                    "(default: slurm-apply.log beside the plan)."),
) -> None:
    """Make Slurm follow the plan's committed hour: start now on the planned nodes, begin
    times for later jobs, holds for unplaced ones, whole-node reservations."""
    from pipelines.slurm.apply import execute, plan_actions, read_plan

    with input_errors():
        try:
            view = read_plan(json.loads(_read(plan)))
        except ValueError as err:
            raise InputError(f"not valid JSON: {err}", file=str(plan)) from None
        except InputError as err:
            raise err.located(str(plan)) from None
        jobs, nodes, resv = _live_state()
        try:
            actions, notes = plan_actions(view, jobs, nodes, resv, time.time())
        except InputError as err:
            raise err.located(str(plan)) from None
    for note in notes:
        print(f"note: {note}")
    outcome = None
    if not dry_run:
        outcome = execute(actions, _scontrol, log or plan.parent / "slurm-apply.log",
                          view.label)
    _report(outcome, dry_run, actions)


@slurm_app.command("release-all")
def release_all(
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the scontrol commands only."),
    log: Path | None = typer.Option(None, "--log", help="JSON-lines action log."),
) -> None:
    """Undo gpuplan: pending jobs it changed go back to Slurm's own scheduling; its
    reservations are deleted. Running jobs are never touched."""
    from pipelines.slurm.apply import execute, release_actions

    with input_errors():
        jobs, _, resv = _live_state()
    actions = release_actions(jobs, resv)
    outcome = None if dry_run else execute(actions, _scontrol, log, "release-all")
    _report(outcome, dry_run, actions)
