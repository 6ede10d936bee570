"""`gpuplan demo`: the whole daily pipeline once, as the same `gpuplan` commands a user runs.

Each step is a `gpuplan` command in its own process (its output kept in out/logs/), so the
demo is a script anyone can replay by hand: the commands are printed as they run. MLflow
is probed once here; when it does not answer, the demo warns once and the steps run
untracked (GPUPLAN_TRACKING=off) with every local output still written.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from pipelines import tracking
from pipelines.home import bundled

# The bundled inputs, wherever the demo is run from (pipelines.home).
HISTORY = bundled("data/history")
QUEUE_DIR = bundled("data/queue")
TRAFFIC = bundled("data/traffic/servegen_traffic.csv")
SERVEGEN = bundled("data/traffic/servegen_language_14d_10min_rate.csv")
SERVICES = bundled("data/traffic/services.json")
CLUSTER = bundled("data/cluster.json")
RUNNING = bundled("data/running.json")
SCENARIOS = bundled("data/scenarios")
BENCH_REPEATS = 10


@dataclass
class Step:
    title: str
    args: list[str]


def gpuplan_command() -> list[str]:
    """This very interpreter running the CLI, so the steps use the same environment."""
    return [sys.executable, "-m", "pipelines.cli"]


def bundled_queue() -> Path | None:
    found = sorted(QUEUE_DIR.glob("*.csv")) + sorted(QUEUE_DIR.glob("*.parquet"))
    found = [p for p in found if "scored" not in p.name and "rejects" not in p.name]
    return found[0] if found else None


def traffic_end(path: Path) -> str:
    """The plan starts at the hour after the traffic history ends (same files, same day)."""
    import pandas as pd

    from allocator.core.timeparse import parse_times

    stamps = parse_times(pd.read_csv(path, usecols=["timestamp"])["timestamp"], "timestamp")
    return (stamps.max().floor("h") + pd.Timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")


def extra_history() -> list[str]:
    """The real fine-tuning runs that join the synthetic history (see docs/estimators.md)."""
    real = Path("data/finetune_runs/calibration_history.csv")
    return ["--extra-history", str(real)] if real.exists() else []


def plan_steps(out: Path, full: bool) -> list[Step]:
    """The commands, in order; inputs that are missing are generated first."""
    steps: list[Step] = []
    queue = bundled_queue()
    history = HISTORY / "training.csv"
    if not history.exists() or queue is None:
        args = ["synth-history", "--out", str(HISTORY)]
        if queue is None:
            queue = QUEUE_DIR / "queue.csv"
            args += ["--queue-out", str(queue)]
        steps.append(Step("generate the sample job history", args))
    models = out / "models"
    steps.append(Step("train the estimators (training cost, quantization cost)",
                      ["train", str(history), "--quantization",
                       str(HISTORY / "quantization.csv"), "--models", str(models),
                       *extra_history(),
                       "--report", str(out / "train" / "evaluation.md")]))
    scored = out / "queue" / "scored.csv"
    steps.append(Step("score the queued jobs", ["score", str(queue), "--out", str(scored),
                                                "--models", str(models)]))
    traffic = TRAFFIC
    if not traffic.exists():
        traffic = out / "traffic" / "servegen_traffic.csv"
        steps.append(Step("convert the bundled ServeGen traffic",
                          ["profile-servegen", str(SERVEGEN), "--out", str(traffic)]))
    profile = out / "profile" / "profile.json"
    steps.append(Step("profile the realtime traffic",
                      ["profile", str(traffic), "--services", str(SERVICES), "--start",
                       "@START", "--steps", "24", "--out", str(profile)]))
    day = ["plan-day", "--queue", str(scored), "--profile", str(profile), "--running",
           str(RUNNING), "--cluster", str(CLUSTER), "--models", str(models)]
    steps.append(Step("plan the day (fast)", [*day, "--out-dir", str(out / "day")]))
    if full:
        steps.append(Step("plan the day (full: the MILP review)",
                          [*day, "--full", "--out-dir", str(out / "day-full")]))
    steps.append(Step("run the allocator benchmark",
                      ["bench", "--scenarios", str(SCENARIOS), "--out-dir",
                       str(out / "bench"), "--repeats", str(BENCH_REPEATS)]))
    return steps


def run_step(step: Step, log: Path, env: dict[str, str]) -> tuple[int, str]:
    with open(log, "w", encoding="utf-8") as fh:
        fh.write("$ gpuplan " + shlex.join(step.args) + "\n")
        fh.flush()
        done = subprocess.run([*gpuplan_command(), *step.args], stdout=fh,
                              stderr=subprocess.STDOUT, env=env, check=False)
    return done.returncode, log.read_text(encoding="utf-8", errors="replace")


def _boxed(line: str) -> bool:
    """A row of a rich table (box-drawing characters): not a summary line."""
    return any("\u2500" <= ch <= "\u257f" for ch in line)


def log_bench(out: Path, tracker: tracking.Tracker) -> None:
    """The benchmark's table as one run in gpuplan-bench (metrics per scenario and baseline)."""
    import csv

    table = out / "bench" / "bench.csv"
    if not table.exists():
        return
    with open(table, encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    metrics = {}
    for r in rows:
        for key in ("util_gain_pts", "value_gain_pct", "shortfall_before", "shortfall_after",
                    "completed_before", "completed_after", "fast_ms"):
            if r.get(key) not in (None, ""):
                metrics[f"{r['scenario']}.vs_{r['baseline']}.{key}"] = r[key]
    scenarios = len({r["scenario"] for r in rows})
    with tracker.run("bench", f"bench {scenarios} scenarios", tags=tracking.run_tags()) as run:
        run.params({"repeats": BENCH_REPEATS, "scenarios": len({r["scenario"] for r in rows})})
        run.metrics(metrics)
        run.artifacts(sorted((out / "bench").glob("*")), "bench")


def run_demo(out_dir: Path, full: bool = False) -> None:
    console = Console()
    missing = [p for p in (SERVICES, CLUSTER, RUNNING, SERVEGEN) if not p.exists()]
    if missing:
        from allocator.core.errors import InputError

        raise InputError("a bundled input is missing: gpuplan's demo needs the project's "
                         "data/ folder (a checkout, installed with `pip install -e .`)",
                         file=str(missing[0]))
    began = time.perf_counter()
    out = Path(out_dir)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    tracker = tracking.get_tracker()
    env = dict(os.environ)
    tracked = tracker.enabled  # the probe: one warning line here if MLflow does not answer
    if not tracked:
        env["GPUPLAN_TRACKING"] = "off"
    steps = plan_steps(out, full)
    console.print(f"[bold]gpuplan demo[/bold]: {len(steps)} steps, outputs in {out}/, "
                  f"MLflow store {tracker.uri if tracked else '(off)'}")
    start: str | None = None
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
               TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        overall = progress.add_task("demo", total=len(steps))
        for i, step in enumerate(steps, 1):
            if "@START" in step.args:
                traffic = Path(step.args[1])
                start = traffic_end(traffic)
                step.args[step.args.index("@START")] = start
            progress.update(overall, description=f"[{i}/{len(steps)}] {step.title}")
            t0 = time.perf_counter()
            code, text = run_step(step, out / "logs" / f"{i:02d}-{step.args[0]}.log", env)
            seconds = time.perf_counter() - t0
            if code != 0:
                progress.stop()
                console.print(f"[red]step failed[/red] (exit {code}): gpuplan "
                              f"{shlex.join(step.args)}")
                console.print("\n".join(text.splitlines()[-25:]))
                raise typer.Exit(1)
            last = [ln for ln in text.splitlines()[1:] if ln.strip() and "|" not in ln
                    and not ln.lstrip().startswith(("-", "+")) and not _boxed(ln)][-2:]
            progress.console.print(f"[green]done[/green] {step.title} ({seconds:.1f} s): "
                                   f"gpuplan {shlex.join(step.args)}")
            for line in last:
                progress.console.print(f"    {line.strip()[:150]}")
            progress.advance(overall)
    if tracked:
        log_bench(out, tracker)
    total = time.perf_counter() - began
    report = out / "day" / "report.md"
    console.print()
    console.print(f"[bold]Done in {total:.0f} s.[/bold]")
    console.print(f"  The day's plan, for operators: {report} (or {report.with_suffix('.html')}"
                  f" in a browser); picture {out / 'day' / 'grid.png'}")
    console.print(f"  Estimator evaluation: {out / 'train' / 'evaluation.md'}; "
                  f"benchmark: {out / 'bench' / 'bench.md'}; step logs: {out / 'logs'}/")
    if tracked:
        console.print(f"  MLflow: runs and registered models in {tracker.uri}; browse them "
                      "with `make ui`, then in MLflow 3 click \"Model training\" at the top "
                      "left (http://127.0.0.1:5000/#/experiments?workflowType=machine_learning)")
    else:
        console.print("  MLflow was not reachable: nothing tracked, every file above written.")
