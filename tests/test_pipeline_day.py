"""plan-day without an MLflow server: outputs, determinism, atomicity, bad input, the report."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from allocator.scenario_io import load_scenario
from allocator.validator import violations
from pipelines import tracking
from pipelines.plan_day import DayArgs, run_day
from pipelines.report import gpu_list, idle_windows
from tests.pipeline_fixtures import scored_queue, write_inputs


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def day_args(tmp_path: Path, out: str = "day", **extra) -> DayArgs:
    inputs = write_inputs(tmp_path / "in")
    queue = scored_queue(tmp_path / "in" / "queue.csv")
    return DayArgs(queue=queue, cluster=inputs["cluster"], traffic=inputs["traffic"],
                   services=inputs["services"], running=inputs["running"],
                   out_dir=tmp_path / out, **extra)


def test_plan_day_writes_a_legal_plan_and_a_report(tmp_path):
    result = run_day(day_args(tmp_path))
    out = result.outputs
    for path in out.all():
        assert path.exists() and path.stat().st_size > 0, path
    assert not list(out.plan.parent.glob(".*.tmp")), "a temporary file was left behind"
    body = json.loads(out.plan.read_text())
    scenario = load_scenario(out.scenario)
    assert violations(scenario, body["grid"]) == []
    assert body["start"] == "2026-11-30T00:00:00Z"  # the hour after the traffic ends
    assert {r["id"] for r in body["rejected"]} == {"q-00", "q-01"}
    report = out.report_md.read_text()
    first = report.index("## Do now")
    for section in ("## Compared with first-come-first-served", "## Hour by hour",
                    "## Realtime coverage risk", "## Idle windows",
                    "## Expected start of every queued job", "## Not placed today"):
        assert report.index(section) > first, section
    assert "needs 64 GPUs; the cluster has 16" in report
    assert "run-a" in report and "![" in report
    assert "<table>" in out.report_html.read_text()
    rows = out.grid_csv.read_text().splitlines()
    assert rows[0].startswith("step,time,gpu0") and len(rows) == 1 + 24


def test_same_inputs_same_plan(tmp_path):
    args = day_args(tmp_path, "a")
    first = run_day(args)
    args.out_dir = tmp_path / "b"
    second = run_day(args)
    a = json.loads(first.outputs.plan.read_text())
    b = json.loads(second.outputs.plan.read_text())
    assert a["grid"] == b["grid"] and a["metrics"] == b["metrics"]
    assert first.outputs.grid_csv.read_text() == second.outputs.grid_csv.read_text()


def test_unreachable_mlflow_warns_once_and_still_writes(tmp_path, monkeypatch):
    monkeypatch.delenv("GPUPLAN_TRACKING", raising=False)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{closed_port()}")
    lines: list[str] = []
    tracker = tracking.Tracker(warn=lines.append)
    result = run_day(day_args(tmp_path), tracker=tracker)
    assert result.run_id is None
    assert result.outputs.plan.exists() and result.outputs.report_md.exists()
    assert len(lines) == 1 and "MLflow tracking" in lines[0] and "still written" in lines[0]


def test_half_step_plans_a_day_in_48_steps(tmp_path):
    result = run_day(day_args(tmp_path, step_minutes=30))
    s = result.plans.day.scenario
    assert s.cluster.step_minutes == 30 and s.T == 48


def test_cli_bad_input_exits_2_and_writes_nothing(tmp_path):
    from pipelines.cli import build_app

    args = day_args(tmp_path)
    args.cluster.write_text('{"cluster": {"gpus": 0}}')
    result = CliRunner().invoke(build_app(), [
        "plan-day", "--queue", str(args.queue), "--cluster", str(args.cluster),
        "--traffic", str(args.traffic), "--services", str(args.services),
        "--out-dir", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert "cluster.gpus" in result.output
    assert not (tmp_path / "out").exists()


def test_idle_windows_keep_only_maximal_blocks():
    from types import SimpleNamespace

    grid = np.zeros((4, 8), dtype=np.int32)
    grid[1:3, 4:8] = -1  # a 4-GPU block free for two steps
    grid[0, 0] = -1  # one GPU free for one step
    plan = SimpleNamespace(grid=grid, scenario=SimpleNamespace(G=8, T=4))
    windows = idle_windows(plan)
    assert (windows[0].size, windows[0].first_gpu, windows[0].start, windows[0].end) == \
        (4, 4, 1, 3)
    assert len(windows) == 2  # the 2- and 1-GPU blocks inside the 4-GPU one are left out


def test_gpu_list_is_compact():
    assert gpu_list([5, 0, 1, 2, 7, 8]) == "0-2, 5, 7-8"
    assert gpu_list([]) == "none"


def test_an_interrupted_write_leaves_whole_files(tmp_path, monkeypatch):
    from pipelines import report

    args = day_args(tmp_path)
    first = run_day(args)
    before = first.outputs.report_md.read_text()

    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(report, "build", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_day(args)
    assert first.outputs.report_md.read_text() == before  # the old report, whole
    json.loads(first.outputs.plan.read_text())  # the plan file parses: whole
    assert not list(args.out_dir.glob(".*.tmp"))


def test_demo_generates_what_is_missing_first(tmp_path, monkeypatch):
    from pipelines import demo

    # no data/: history, queue and traffic are all missing
    monkeypatch.setattr(demo, "HISTORY", tmp_path / "data" / "history")
    monkeypatch.setattr(demo, "QUEUE_DIR", tmp_path / "data" / "queue")
    monkeypatch.setattr(demo, "TRAFFIC", tmp_path / "data" / "traffic" / "t.csv")
    steps = demo.plan_steps(Path("out"), full=True)
    names = [s.args[0] for s in steps]
    assert names == ["synth-history", "train", "score", "profile-servegen", "profile",
                     "plan-day", "plan-day", "bench"]
    assert "--queue-out" in steps[0].args and "--full" in steps[6].args
    inputs = write_inputs(tmp_path / "in")
    assert demo.traffic_end(inputs["traffic"]) == "2026-11-30T00:00:00Z"


def test_pin_trials_give_a_legal_day_plan_worth_at_least_the_plain_one(tmp_path):
    plain = run_day(day_args(tmp_path, out="plain", pin_trials=0))
    tried = run_day(day_args(tmp_path, out="tried"))  # the default trials
    scenario = load_scenario(tried.outputs.scenario)
    body = json.loads(tried.outputs.plan.read_text())
    assert violations(scenario, body["grid"]) == []
    value = {name: json.loads(r.outputs.plan.read_text())["metrics"]["objective"]
             for name, r in (("plain", plain), ("tried", tried))}
    assert value["tried"] >= value["plain"] - 1e-6, value


def test_plan_day_command_defaults_to_the_days_pin_trials() -> None:
    """The command's defaults (from allocator/policies/refine.py: plan_day loads pandas) must stay
    the ones `plan_day` uses."""
    import typer.main

    from pipelines.cli import build_app
    from pipelines.plan_day import DAY_DEFER_TRIALS, DAY_HOPS, DAY_PIN_TRIALS, DAY_TRIAL_PASSES

    command = typer.main.get_command(build_app())
    day = command.commands["plan-day"]  # type: ignore[attr-defined]
    option = next(p for p in day.params if p.name == "pin_trials")
    assert option.default == DAY_PIN_TRIALS == DayArgs.pin_trials
    option = next(p for p in day.params if p.name == "defer_trials")
    assert option.default == DAY_DEFER_TRIALS == DayArgs.defer_trials
    option = next(p for p in day.params if p.name == "hops")
    assert option.default == DAY_HOPS == DayArgs.hops
    option = next(p for p in day.params if p.name == "trial_passes")
    assert option.default == DAY_TRIAL_PASSES == DayArgs.trial_passes
    # and what the benchmarks measure and `gpuplan plan` refines with (allocator/policies/refine.py)
    from allocator.policies.refine import DAY_TRIALS
    assert DAY_TRIALS == {"pin_trials": DAY_PIN_TRIALS, "defer_trials": DAY_DEFER_TRIALS,
                          "hops": DAY_HOPS, "trial_passes": DAY_TRIAL_PASSES}
