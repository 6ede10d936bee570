"""plan-day --guard: promises carried from one day's plan to the next, kept or moved earlier."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from allocator.model import Reservation
from allocator.scenario_io import load_scenario
from allocator.validator import violations
from pipelines.day_guard import PreviousPlan, reanchor, waited_steps
from pipelines.plan_day import DayArgs, DayResult, run_day
from tests.pipeline_fixtures import scored_queue, write_inputs


def _args(tmp_path: Path, out: str, **extra) -> DayArgs:
    inputs = write_inputs(tmp_path / "in")
    queue = tmp_path / "in" / "queue.csv"
    if not queue.exists():
        scored_queue(queue)
    return DayArgs(queue=queue, cluster=inputs["cluster"], traffic=inputs["traffic"],
                   services=inputs["services"], running=inputs["running"],
                   out_dir=tmp_path / out, guard=True, **extra)


def _legal(result: DayResult) -> dict:
    body = json.loads(result.outputs.plan.read_text())
    scenario = load_scenario(result.outputs.scenario)
    assert violations(scenario, body["grid"]) == []
    return body


def _running(path: Path, remaining: int) -> None:
    """The fixture's running job, `remaining` steps from its end (a later plan's view)."""
    doc = json.loads(path.read_text())
    doc["jobs"][0]["remaining_steps"] = remaining
    path.write_text(json.dumps(doc))


def test_day_two_keeps_or_moves_day_ones_promise_earlier(tmp_path):
    day1 = run_day(_args(tmp_path, "d1"))
    body1 = _legal(day1)
    assert [r["id"] for r in body1["reservations"]] == ["q-12"]  # the top whole-node job
    promise = body1["reservations"][0]
    got = body1["starts"]["q-12"]
    assert (got["start"], got["first_gpu"]) == (promise["start"], promise["first_gpu"])
    assert "## Promises (starvation guard)" in day1.outputs.report_md.read_text()
    # two hours later: the running job has two steps less to run
    args = _args(tmp_path, "d2", previous_plan=day1.outputs.plan, start="2026-11-30T02:00Z")
    _running(args.running, 1)
    day2 = run_day(args)
    body2 = _legal(day2)
    kept = {r["id"]: r for r in body2["reservations"]}
    assert "q-12" in kept
    assert kept["q-12"]["start"] <= promise["start"] - 2  # the same hour or earlier
    (p,) = [p for p in day2.plans.day.promises if p.id == "q-12"]
    assert p.was == promise["start"] - 2 and p.start <= p.was
    assert "q-12" in day2.outputs.report_md.read_text().split("## Promises")[1]


def test_a_promise_to_a_job_gone_from_the_queue_is_dropped_with_a_warning(tmp_path):
    day1 = run_day(_args(tmp_path, "d1"))
    queue = tmp_path / "in" / "queue.csv"
    frame = pd.read_csv(queue)
    frame[frame["id"] != "q-12"].to_csv(queue, index=False)  # q-12 started elsewhere
    day2 = run_day(_args(tmp_path, "d2", previous_plan=day1.outputs.plan))
    assert any("'q-12'" in w for w in day2.plans.day.warnings)
    body2 = _legal(day2)
    # the other whole-node jobs arrive later in the day: nothing waiting to promise now
    assert body2["reservations"] == []


def test_claims_come_from_submitted_at(tmp_path):
    queue = tmp_path / "in" / "queue.csv"
    queue.parent.mkdir(parents=True)
    scored_queue(queue)
    frame = pd.read_csv(queue)
    frame.loc[frame["id"] == "q-05", "arrival_step"] = 0
    frame["submitted_at"] = "2026-11-29T23:00Z"
    frame.loc[frame["id"] == "q-05", "submitted_at"] = "2026-11-28T00:00Z"  # two days waiting
    frame.to_csv(queue, index=False)
    plain = run_day(_args(tmp_path, "plain", age=0.0))
    aged = run_day(_args(tmp_path, "aged"))
    assert [r["id"] for r in _legal(plain)["reservations"]] == ["q-12"]
    assert [r["id"] for r in _legal(aged)["reservations"]] == ["q-05"]
    waited, note = waited_steps(frame, pd.Timestamp("2026-11-30T00:00Z"), 60, "q.csv")
    assert waited["q-05"] == 48 and waited["q-02"] == 1 and "submitted_at" in note


def test_reanchoring_rounds_down():
    prev = PreviousPlan(Path("p.json"), pd.Timestamp("2026-11-30T00:00Z"), 60,
                        (Reservation("a", 5, 0, 8), Reservation("b", 1, 8, 8)))
    got = reanchor(prev, pd.Timestamp("2026-11-30T02:30Z"), 60)
    assert got == {"a": (2, 0), "b": (-2, 8)}


def test_bad_previous_plan_exits_2_naming_file_and_field(tmp_path):
    from pipelines.cli import build_app

    args = _args(tmp_path, "x")
    bad = tmp_path / "prev.json"
    for text, where in (('{"start": "2026-11-30T00:00Z", "step_minutes": 60, '
                         '"reservations": [{"id": "q-12", "start": -1, "first_gpu": 0, '
                         '"gpus": 8}]}', "reservations.start"),
                        ('{"step_minutes": 60}', "'start'"),
                        ("not json", "prev.json")):
        bad.write_text(text)
        result = CliRunner().invoke(build_app(), [
            "plan-day", "--queue", str(args.queue), "--cluster", str(args.cluster),
            "--traffic", str(args.traffic), "--services", str(args.services), "--guard",
            "--previous-plan", str(bad), "--out-dir", str(tmp_path / "out")])
        assert result.exit_code == 2, result.output
        assert str(bad) in result.output and where in result.output, result.output
        assert not (tmp_path / "out").exists()


def test_hourly_replans_never_move_a_promise_later_and_stay_legal(tmp_path):
    previous = None
    held: dict[str, int] = {}  # job -> promised start, as an absolute hour
    for hour in range(4):
        args = _args(tmp_path, f"h{hour}", previous_plan=previous,
                     start=f"2026-11-30T{hour:02d}:00Z", full=hour == 3, time_limit=10.0)
        doc = json.loads(args.running.read_text())
        if hour < 3:
            _running(args.running, 3 - hour)
        else:  # the running job has ended
            args.running.write_text(json.dumps({"jobs": [], "realtime": doc["realtime"]}))
        result = run_day(args)
        body = _legal(result)
        for r in body["reservations"]:
            if r["id"] in held:
                assert hour + r["start"] <= held[r["id"]], (hour, r)
            held[r["id"]] = hour + r["start"]
        assert "q-12" in {r["id"] for r in body["reservations"]}, hour  # carried each hour
        previous = result.outputs.plan
    assert held["q-12"] <= 3  # promised for 03:00 by the first plan, the last (full) agrees
