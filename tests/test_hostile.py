"""Hostile input at every command, through the real entry point (`pipelines.cli.main`).

Each case must end with exit 0 or 2, never a traceback; on exit 2 stderr is one line and
no output was written; every JSON written is standard JSON (no NaN, no Infinity). A table
of hand-written cases (one per way a command once broke, and more) and hypothesis-made
scenarios; the kill test (slow) interrupts plan-day and train at random points by pid.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines import tracking
from pipelines.cli import main
from tests.pipeline_fixtures import as_new_process, scored_queue, write_inputs

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "data" / "scenarios" / "mixed-control.json"
QUEUE = ROOT / "data" / "queue" / "sample_queue.csv"
HISTORY = ROOT / "data" / "history" / "training.csv"
MODELS = ROOT / "models"


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str


def gpuplan(*args: object) -> Outcome:
    """One run of the command line, in this process (untracked: the suite's fixture)."""
    as_new_process()
    out, err = io.StringIO(), io.StringIO()
    argv = ["gpuplan", *(str(a) for a in args)]
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                _argv(argv):
            main()
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    return Outcome(code, out.getvalue(), err.getvalue())


@contextlib.contextmanager
def _argv(argv: list[str]):
    saved = sys.argv
    sys.argv = argv
    try:
        yield
    finally:
        sys.argv = saved


def _no_constants(name: str) -> object:
    raise AssertionError(f"non-standard JSON literal {name}")


def strict_json(path: Path) -> object:
    return json.loads(path.read_text(encoding="utf-8"), parse_constant=_no_constants)


def assert_clean(result: Outcome, code: int) -> None:
    """Exit `code`; no traceback; on exit 2 exactly one line, the error line (exit 1 is
    only the checker's verdict: an illegal plan)."""
    assert result.code == code, result
    assert "Traceback" not in result.err, result.err
    if code == 2:
        lines = [ln for ln in result.err.splitlines() if ln.strip()]
        assert len(lines) == 1, result.err
        assert lines[0].startswith("gpuplan: error: "), result.err


# ---------------------------------------------------------------- the inputs


def scenario_with(path: Path, change: Callable[[dict], None]) -> Path:
    body = json.loads(SCENARIO.read_text())
    change(body)
    path.write_text(json.dumps(body))
    return path


def _job(body: dict, kind: str) -> dict:
    return next(j for j in body["jobs"] if j["kind"] == kind)


def _set(keys: str, value: object) -> Callable[[dict], None]:
    def change(body: dict) -> None:
        node = body
        parts = keys.split(".")
        for part in parts[:-1]:
            if isinstance(node, list):
                node = next(j for j in node if isinstance(j, dict) and j.get("kind") == part)
            else:
                node = node[part]
        node[parts[-1]] = value
    return change


@dataclass
class World:
    """The valid inputs every case starts from; a case breaks one thing."""

    root: Path
    inputs: dict[str, Path] = field(default_factory=dict)

    def path(self, name: str) -> Path:
        return self.root / name

    def write(self, name: str, text: str | bytes) -> Path:
        p = self.root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            p.write_bytes(text)
        else:
            p.write_text(text)
        return p


@pytest.fixture
def w(tmp_path: Path) -> World:
    world = World(tmp_path, write_inputs(tmp_path / "in"))
    world.inputs["queue"] = scored_queue(tmp_path / "in" / "queue.csv")
    shutil.copy(SCENARIO, tmp_path / "scenario.json")
    return world


def _plan_file(w: World, grid_change: Callable[[list], object] | None = None) -> Path:
    result = gpuplan("plan", w.path("scenario.json"), "--out", w.path("good-plan.json"))
    assert result.code == 0, result
    body = json.loads(w.path("good-plan.json").read_text())
    if grid_change is not None:
        body = grid_change(body)
    return w.write("plan.json", json.dumps(body) if not isinstance(body, str) else body)


def _cell_object(body: dict) -> dict:
    body["grid"][0][0] = {"id": "x"}
    return body


def _ragged(body: dict) -> dict:
    body["grid"][1] = body["grid"][1][:-1]
    return body


def _day(w: World, *extra: object) -> list[object]:
    i = w.inputs
    return ["plan-day", "--queue", i["queue"], "--cluster", i["cluster"], "--traffic",
            i["traffic"], "--services", i["services"], "--running", i["running"],
            "--out-dir", w.path("day"), *extra]


def _traffic_row(w: World, offset: str = "+05:30") -> Path:
    """The same traffic, naive (UTC) but one row written in another zone (same instant)."""
    frame = pd.read_csv(w.inputs["traffic"])
    frame["timestamp"] = frame["timestamp"].str.removesuffix("Z")
    row = len(frame) // 4
    stamp = pd.Timestamp(frame.loc[row, "timestamp"]).tz_localize("UTC").tz_convert(offset)
    frame.loc[row, "timestamp"] = stamp.isoformat()
    path = w.path("traffic-offset.csv")
    frame.to_csv(path, index=False)
    return path


def _traffic_requests(w: World, value: str) -> Path:
    frame = pd.read_csv(w.inputs["traffic"], dtype=str)
    frame.loc[len(frame) // 3, "requests"] = value
    path = w.path("traffic-requests.csv")
    frame.to_csv(path, index=False)
    return path


def _queue_row(w: World, column: str, value: object, scored: bool = False) -> Path:
    frame = pd.read_csv(QUEUE if not scored else w.inputs["queue"], dtype=str)
    row = frame.index[frame["kind"] == "training"][0] if not scored else 2
    frame.loc[row, column] = str(value)
    path = w.path("queue-edit.csv")
    frame.to_csv(path, index=False)
    return path


def _huge(w: World, name: str) -> Path:
    """A sparse file past the 64 MiB JSON limit: no disk is used."""
    path = w.path(name)
    with open(path, "wb") as fh:
        fh.truncate(65 << 20)
    return path


def _record(w: World, body: str, name: str = "a") -> Path:
    return w.write(f"records/{name}.json", body)


def _services(w: World, **change: object) -> Path:
    doc = json.loads(w.inputs["services"].read_text())
    doc["services"][0].update(change)
    return w.write("services-edit.json", json.dumps(doc))


def _running(w: World, realtime: dict) -> Path:
    doc = json.loads(w.inputs["running"].read_text())
    doc["realtime"] = realtime
    return w.write("running-edit.json", json.dumps(doc))


def _cluster(w: World, **change: object) -> Path:
    doc = json.loads(w.inputs["cluster"].read_text())
    doc["cluster"].update(change)
    return w.write("cluster-edit.json", json.dumps(doc))


# Each case: (id, arguments given the world, exit code, outputs that must not exist).
P = "p.json"
CASES: list[tuple[str, Callable[[World], list[object]], int, tuple[str, ...]]] = [
    # plan: limits on every scenario number
    ("plan-gpus-2^31", lambda w: ["plan", scenario_with(w.path("s.json"),
     _set("cluster.gpus", 2**31)), "--out", w.path(P)], 2, (P,)),
    ("plan-gpus-2^40", lambda w: ["plan", scenario_with(w.path("s.json"),
     _set("cluster.gpus", 2**40)), "--out", w.path(P)], 2, (P,)),
    ("plan-horizon-1e9", lambda w: ["plan", scenario_with(w.path("s.json"),
     _set("cluster.horizon_steps", 10**9)), "--out", w.path(P)], 2, (P,)),
    ("plan-cells-4096x672", lambda w: ["plan", scenario_with(w.path("s.json"), lambda b: (
        b["cluster"].update(gpus=4096, horizon_steps=672), b.update(jobs=[]))),
        "--out", w.path(P)], 2, (P,)),
    ("plan-demand-1e30", lambda w: ["plan", scenario_with(w.path("s.json"), lambda b: (
        _job(b, "realtime")["demand"].__setitem__(3, 10**30))), "--out", w.path(P)], 2, (P,)),
    ("plan-swap-1e30", lambda w: ["plan", scenario_with(w.path("s.json"),
     _set("jobs.realtime.swap_limit", 10**30)), "--out", w.path(P)], 2, (P,)),
    ("plan-priority-1e308", lambda w: ["plan", scenario_with(w.path("s.json"),
     _set("jobs.training.priority", 1e308)), "--out", w.path(P)], 2, (P,)),
    ("plan-duration-1e12", lambda w: ["plan", scenario_with(w.path("s.json"),
     _set("jobs.training.duration_steps", 10**12)), "--out", w.path(P)], 2, (P,)),
    ("plan-running-block-2^33", lambda w: ["plan", scenario_with(w.path("s.json"), lambda b:
     _job(b, "training").update(gpus=2**33, running={"first_gpu": 0, "remaining_steps": 1})),
        "--out", w.path(P)], 2, (P,)),
    ("plan-5001-jobs", lambda w: ["plan", scenario_with(w.path("s.json"), lambda b: b.update(
        jobs=[{"id": f"j{i}", "kind": "training", "priority": 1, "gpus": 1,
               "duration_steps": 1} for i in range(5001)])), "--out", w.path(P)], 2, (P,)),
    ("plan-file-65MiB", lambda w: ["plan", _huge(w, "big.json"), "--out", w.path(P)], 2,
     (P,)),
    ("plan-time-limit-nan", lambda w: ["plan", w.path("scenario.json"), "--policy", "full",
                                       "--time-limit", "nan", "--out", w.path(P)], 2, (P,)),
    ("plan-time-limit-negative", lambda w: ["plan", w.path("scenario.json"), "--policy",
                                            "full", "--time-limit", "-5", "--out", w.path(P)],
     2, (P,)),
    ("plan-solver-gurobi", lambda w: ["plan", w.path("scenario.json"), "--policy", "full",
                                      "--solver", "gurobi", "--out", w.path(P)], 2, (P,)),
    ("plan-out-is-a-directory", lambda w: ["plan", w.path("scenario.json"), "--out",
                                           w.root], 2, ()),
    ("plan-out-below-a-file", lambda w: ["plan", w.path("scenario.json"), "--out",
                                         w.path("scenario.json") / "p.json"], 2, ()),
    ("plan-out-in-dev-null", lambda w: ["plan", w.path("scenario.json"), "--out",
                                        "/dev/null/p.json"], 2, ()),
    ("plan-png-is-a-directory", lambda w: ["plan", w.path("scenario.json"), "--out",
                                           w.path(P), "--png", w.root], 2, (P,)),
    ("plan-out-is-the-input", lambda w: ["plan", w.path("scenario.json"), "--out",
                                         w.path("scenario.json")], 2, ()),
    ("plan-priority-at-the-limit", lambda w: ["plan", scenario_with(w.path("s.json"),
     _set("jobs.training.priority", 1e6)), "--out", w.path(P)], 0, ()),
    ("plan-good-with-png", lambda w: ["plan", w.path("scenario.json"), "--out", w.path(P),
                                      "--png", w.path("p.png")], 0, ()),
    # check and show: hostile plan files
    ("check-cell-is-an-object", lambda w: ["check", w.path("scenario.json"),
                                           _plan_file(w, _cell_object)], 2, ()),
    ("check-plan-is-an-array", lambda w: ["check", w.path("scenario.json"),
                                          w.write("plan.json", "[1, 2]")], 2, ()),
    ("check-plan-has-nan", lambda w: ["check", w.path("scenario.json"), _plan_file(
        w, lambda b: json.dumps(b).replace('"latency_ms": ', '"latency_ms": NaN, "x": '))],
     2, ()),
    ("check-grid-is-ragged", lambda w: ["check", w.path("scenario.json"),
                                        _plan_file(w, _ragged)], 1, ()),  # illegal: exit 1
    ("check-good", lambda w: ["check", w.path("scenario.json"), _plan_file(w)], 0, ()),
    ("show-plan-is-an-array", lambda w: ["show", w.write("plan.json", "[]"), "--png",
                                         w.path("s.png")], 2, ("s.png",)),
    ("show-cell-is-an-object", lambda w: ["show", _plan_file(w, _cell_object), "--png",
                                          w.path("s.png")], 2, ("s.png",)),
    ("show-png-is-a-directory", lambda w: ["show", _plan_file(w), "--png", w.root], 2, ()),
    ("show-png-is-the-plan", lambda w: ["show", _plan_file(w), "--png",
                                        w.path("plan.json")], 2, ()),
    ("show-good", lambda w: ["show", _plan_file(w), "--png", w.path("s.png")], 0, ()),
    # bench-compare: hostile records
    ("bench-compare-empty-object", lambda w: ["bench-compare", _record(w, "{}"),
                                              _record(w, "{}", "b")], 2, ()),
    ("bench-compare-array", lambda w: ["bench-compare", _record(w, "[]"),
                                       _record(w, "[]", "b")], 2, ()),
    ("bench-compare-empty-file", lambda w: ["bench-compare", _record(w, ""),
                                            _record(w, "", "b")], 2, ()),
    ("bench-compare-text-latency", lambda w: ["bench-compare", _record(
        w, '{"rows": [{"case": "a", "fast_ms": "x"}]}'), _record(w, '{"rows": []}', "b")], 2,
     ()),
    ("bench-compare-no-records", lambda w: ["bench-compare", "--record-dir",
                                            w.path("none")], 2, ()),
    # score: numeric options, outputs equal to inputs, hostile queues
    ("score-step-minutes-nan", lambda w: ["score", QUEUE, "--out", w.path("q.csv"),
                                          "--step-minutes", "nan"], 2, ("q.csv",)),
    ("score-step-minutes-negative", lambda w: ["score", QUEUE, "--out", w.path("q.csv"),
                                               "--step-minutes", "-5"], 2, ("q.csv",)),
    ("score-step-minutes-inf", lambda w: ["score", QUEUE, "--out", w.path("q.csv"),
                                          "--step-minutes", "inf"], 2, ("q.csv",)),
    ("score-out-is-the-queue", lambda w: ["score", w.write("q.csv", QUEUE.read_text()),
                                          "--out", w.path("q.csv")], 2, ()),
    ("score-rejects-is-the-queue", lambda w: ["score", w.write("q.csv", QUEUE.read_text()),
                                              "--out", w.path("o.csv"), "--rejects",
                                              w.path("q.csv")], 2, ("o.csv",)),
    ("score-out-is-a-directory", lambda w: ["score", QUEUE, "--out", w.root], 2, ()),
    ("score-semicolons", lambda w: ["score", w.write("semi.csv", QUEUE.read_text().replace(
        ",", ";")), "--out", w.path("q.csv")], 2, ("q.csv",)),
    ("score-empty-file", lambda w: ["score", w.write("e.csv", ""), "--out", w.path("q.csv")],
     2, ("q.csv",)),
    ("score-dataset-samples-1e15", lambda w: ["score", _queue_row(w, "dataset_samples",
                                                                  "1e15"),
                                              "--out", w.path("q.csv")], 0, ()),
    # train: bad paths fail before the evaluation runs
    ("train-models-is-a-file", lambda w: ["train", HISTORY, "--models",
                                          w.write("m", "x")], 2, ()),
    ("train-empty-history", lambda w: ["train", w.write("h.csv", ""), "--models",
                                       w.path("m")], 2, ("m",)),
    ("train-history-semicolons", lambda w: ["train", w.write("h.csv", "a;b\n1;2\n"),
                                            "--models", w.path("m")], 2, ("m",)),
    ("train-gpu-hours-nan", lambda w: ["train", w.write("h.csv", HISTORY.read_text().replace(
        "\n", "\n", 1).splitlines()[0] + "\n" + ",".join(
        ["nan"] * len(HISTORY.read_text().splitlines()[0].split(","))) + "\n"),
        "--models", w.path("m")], 2, ("m",)),
    ("train-report-is-the-history", lambda w: ["train", w.write("h.csv", "x\n"), "--report",
                                               w.path("h.csv"), "--models", w.path("m")],
     2, ("m",)),
    ("train-test-fraction-nan", lambda w: ["train", HISTORY, "--test-fraction", "nan",
                                           "--models", w.path("m")], 2, ("m",)),
    # plan-day: limits, times, blame, places
    ("plan-day-steps-1e8", lambda w: _day(w, "--steps", 100_000_000), 2, ("day",)),
    ("plan-day-steps-text", lambda w: _day(w, "--steps", "1e8"), 2, ("day",)),
    ("plan-day-time-limit-nan", lambda w: _day(w, "--time-limit", "nan"), 2, ("day",)),
    ("plan-day-start-9999", lambda w: _day(w, "--start", "9999-12-31T23:00Z"), 2, ("day",)),
    ("plan-day-cluster-2^40", lambda w: [*_day(w), "--cluster", _cluster(w, gpus=2**40)], 2,
     ("day",)),
    ("plan-day-service-not-in-services", lambda w: [*_day(w), "--running",
                                                   _running(w, {"ghost": [15]})], 2,
     ("day",)),
    ("plan-day-out-dir-is-a-file", lambda w: [*_day(w), "--out-dir", w.write("f", "x")], 2,
     ()),
    ("plan-day-queue-semicolons", lambda w: [*_day(w), "--queue", w.write(
        "semi.csv", w.inputs["queue"].read_text().replace(",", ";"))], 2, ("day",)),
    ("plan-day-priority-1e308", lambda w: [*_day(w), "--queue", _queue_row(
        w, "priority", "1e308", scored=True)], 0, ()),
    ("plan-day-duration-1e13", lambda w: [*_day(w), "--queue", _queue_row(
        w, "duration_steps", "18000000000000", scored=True)], 0, ()),
    ("plan-day-unscored-dataset-samples-1e15", lambda w: [*_day(w), "--queue", _queue_row(
        w, "dataset_samples", "1e15"), "--models", MODELS], 0, ()),
    ("plan-day-offset-row", lambda w: [*_day(w), "--traffic", _traffic_row(w)], 0, ()),
    ("plan-day-rate-1e-300", lambda w: [*_day(w), "--services",
                                        _services(w, requests_per_gpu_hour=1e-300)], 2,
     ("day",)),
    # profile, profile-eval, profile-servegen
    ("profile-start-9999", lambda w: ["profile", w.inputs["traffic"], "--services",
                                      w.inputs["services"], "--start", "9999-12-31T23:00Z",
                                      "--out", w.path(P)], 2, (P,)),
    ("profile-steps-1e6", lambda w: ["profile", w.inputs["traffic"], "--services",
                                     w.inputs["services"], "--start", "2026-11-30",
                                     "--steps", 1_000_000, "--out", w.path(P)], 2, (P,)),
    ("profile-rate-1e-300", lambda w: ["profile", w.inputs["traffic"], "--services",
                                       _services(w, requests_per_gpu_hour=1e-300), "--start",
                                       "2026-11-30", "--out", w.path(P)], 2, (P,)),
    ("profile-requests-1e300", lambda w: ["profile", _traffic_requests(w, "1e300"),
                                          "--services", w.inputs["services"], "--start",
                                          "2026-11-30", "--out", w.path(P)], 2, (P,)),
    ("profile-offset-row", lambda w: ["profile", _traffic_row(w),
                                      "--services", w.inputs["services"], "--start",
                                      "2026-11-30", "--out", w.path(P)], 0, ()),
    ("profile-eval-empty-traffic", lambda w: ["profile-eval", "--traffic",
                                              w.write("t.csv", ""), "--services",
                                              w.inputs["services"], "--out-dir",
                                              w.path("pe")], 2, ("pe",)),
    ("profile-servegen-anchor-9999", lambda w: ["profile-servegen", "--anchor", "9999-01-01",
                                                "--out", w.path("sg.csv")], 2, ("sg.csv",)),
    ("profile-servegen-start-1e300", lambda w: ["profile-servegen", w.write(
        "sg-in.csv", "window_start_s,m-large_rate_rps,m-mid_rate_rps,m-small_rate_rps\n"
        "0,1,1,1\n1e300,1,1,1\n"), "--out", w.path("sg.csv")], 2, ("sg.csv",)),
    ("profile-servegen-rate-nan", lambda w: ["profile-servegen", w.write(
        "sg-in.csv", "window_start_s,m-large_rate_rps,m-mid_rate_rps,m-small_rate_rps\n"
        "0,1,1,1\n600,nan,1,1\n"), "--out", w.path("sg.csv")], 2, ("sg.csv",)),
    ("profile-servegen-empty", lambda w: ["profile-servegen", w.write("sg-in.csv", ""),
                                          "--out", w.path("sg.csv")], 2, ("sg.csv",)),
    # simulate: each option blamed by name, caps
    ("simulate-days-100000", lambda w: ["simulate", "--world", "low-00", "--days", 100000,
                                        "--out", w.path("sim")], 2, ("sim",)),
    ("simulate-max-seconds", lambda w: ["simulate", "--world", "low-00", "--days", 1,
                                        "--max-seconds", "1e-9", "--out", w.path("sim")], 2,
     ("sim",)),
    ("simulate-max-seconds-nan", lambda w: ["simulate", "--world", "low-00", "--max-seconds",
                                            "nan", "--out", w.path("sim")], 2, ("sim",)),
    ("simulate-workers-0", lambda w: ["simulate", "--world", "low-00", "--workers", 0,
                                      "--out", w.path("sim")], 2, ("sim",)),
    ("simulate-margin-nan", lambda w: ["simulate", "--world", "low-00", "--margin", "nan",
                                       "--out", w.path("sim")], 2, ("sim",)),
    ("simulate-sweep-decay-nan", lambda w: ["simulate", "--world", "low-00",
                                            "--sweep-horizon", "2", "--sweep-decay", "nan",
                                            "--out", w.path("sim")], 2, ("sim",)),
    ("simulate-gpus-2^40", lambda w: ["simulate", "--philly", "--gpus", 2**40, "--out",
                                      w.path("sim")], 2, ("sim",)),
    ("simulate-philly-csv-empty", lambda w: ["simulate", "--philly", "--philly-csv",
                                             w.write("ph.csv", ""), "--out", w.path("sim")],
     2, ("sim",)),
    ("simulate-philly-start-9999", lambda w: ["simulate", "--philly", "--philly-start",
                                              "9999-12-31", "--out", w.path("sim")], 2,
     ("sim",)),
    # synth-history
    ("synth-history-sigma-nan", lambda w: ["synth-history", "--out", w.path("h"), "--sigma",
                                           "nan"], 2, ("h",)),
    ("synth-history-format-xml", lambda w: ["synth-history", "--out", w.path("h"),
                                            "--format", "xml"], 2, ("h",)),
    ("synth-history-out-is-a-file", lambda w: ["synth-history", "--out", w.write("h", "x"),
                                               "--training", 10, "--quantization", 10], 2, ()),
    ("unknown-command", lambda w: ["no-such-command"], 2, ()),
    ("bench-repeats-0", lambda w: ["bench", "--repeats", 0, "--out-dir", w.path("b")], 2,
     ("b",)),
    ("bench-time-limit-nan", lambda w: ["bench", "--full", "--time-limit", "nan", "--out-dir",
                                        w.path("b")], 2, ("b",)),
    ("bench-quality-unknown-set", lambda w: ["bench", "--quality", "tuning9", "--out-dir",
                                             w.path("b")], 2, ("b",)),
    ("synth-history-seed-negative", lambda w: ["synth-history", "--seed", -1, "--out",
                                               w.path("h")], 2, ("h",)),
    ("plan-search-1e18", lambda w: ["plan", w.path("scenario.json"), "--search", 10**18,
                                    "--out", w.path(P)], 2, (P,)),
]

MESSAGES = {  # what the one line must name, where the case is about blame
    "simulate-max-seconds": "nothing written",
    "simulate-workers-0": "--workers",
    "simulate-margin-nan": "--margin",
    "plan-day-service-not-in-services": "running-edit.json",
    "score-semicolons": "semicolon",
    "plan-day-queue-semicolons": "semicolon",
    "plan-day-start-9999": "1900-2199",
    "profile-start-9999": "1900-2199",
    "plan-solver-gurobi": "--solver",
    "score-out-is-the-queue": "q.csv",
    "train-models-is-a-file": "not a directory",
}


@pytest.mark.parametrize(("name", "build", "code", "absent"), CASES,
                         ids=[c[0] for c in CASES])
def test_hostile_case(name: str, build: Callable[[World], list[object]], code: int,
                      absent: tuple[str, ...], w: World) -> None:
    args = build(w)
    inputs = {p: p.read_bytes() for p in map(Path, map(str, args))
              if p.is_file() and p.stat().st_size < (1 << 20)}
    existing = set(w.root.rglob("*"))
    result = gpuplan(*args)
    assert_clean(result, code)
    if name in MESSAGES:
        assert MESSAGES[name] in result.err, result.err
    for rel in absent:
        assert not w.path(rel).exists(), f"{rel} written by a failed run"
    for path, before in inputs.items():  # no input was overwritten
        assert path.read_bytes() == before, f"{path} changed"
    leftovers = [p for p in w.root.rglob(".*") if p.name.endswith(".tmp") or ".set-" in p.name]
    assert not leftovers, leftovers
    if code == 1:
        assert result.err.startswith("illegal: "), result.err
    for written in set(w.root.rglob("*.json")) - existing:  # what gpuplan wrote: standard JSON
        strict_json(written)


def test_plan_day_rejects_a_row_beyond_the_limits_and_plans_the_rest(w: World) -> None:
    queue = _queue_row(w, "duration_steps", "18000000000000", scored=True)
    result = gpuplan(*_day(w), "--queue", queue)
    assert_clean(result, 0)
    plan = strict_json(w.path("day") / "plan.json")
    reasons = {r["id"]: r["reason"] for r in plan["rejected"]}
    assert "limit" in reasons["q-02"]
    assert plan["starts"], "the other rows are planned"
    from pipelines.outset import verify

    assert verify(w.path("day")) is not None  # the set is whole


def test_score_rejects_a_duration_beyond_the_limit(w: World) -> None:
    result = gpuplan("score", _queue_row(w, "dataset_samples", "1e15"), "--out", w.path("q.csv"))
    assert_clean(result, 0)
    scored = pd.read_csv(w.path("q.csv"))
    assert scored["duration_steps"].between(1, 100_000).all()
    rejects = pd.read_csv(w.path("q.rejects.csv"))
    assert "duration_steps" in set(rejects["field"]) or "dataset_samples" in set(rejects["field"])


def test_an_offset_on_one_row_moves_only_that_row() -> None:
    from allocator.core.timeparse import parse_times

    stamps = pd.Series(["2026-01-01T00:00:00", "2026-01-01T06:30:00+05:30",
                        "2026-01-01T02:00:00", "2026-01-01T03:00:00Z"])
    got = parse_times(stamps, "timestamp").dt.strftime("%H:%M").tolist()
    assert got == ["00:00", "01:00", "02:00", "03:00"]


def test_debug_prints_the_traceback(w: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """An internal fault is exit 1, one line; --debug adds the traceback before it."""
    from allocator import plan as planlib

    def broken(*_a: object, **_k: object) -> object:
        raise RuntimeError("a bug")

    monkeypatch.setattr(planlib.policies, "get", lambda _name: broken)
    quiet = gpuplan("plan", w.path("scenario.json"), "--out", w.path(P))
    assert quiet.code == 1 and "Traceback" not in quiet.err
    assert quiet.err.strip().splitlines() == [quiet.err.strip()]
    assert "internal error: RuntimeError: a bug" in quiet.err
    loud = gpuplan("--debug", "plan", w.path("scenario.json"), "--out", w.path(P))
    assert loud.code == 1 and "Traceback" in loud.err
    assert not w.path(P).exists()


# ---------------------------------------------------------------- hypothesis

HOSTILE_VALUES = st.one_of(
    st.none(), st.booleans(), st.text(max_size=5),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 2**31, 2**33, 2**53, 10**30, 4096, 4097, 672, 673, 10**6]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e308, 1e-300, -0.0, 0.5]),
    st.lists(st.integers(min_value=-3, max_value=2**40), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
FIELDS = ["cluster.gpus", "cluster.horizon_steps", "cluster.node_size", "cluster.step_minutes",
          "weights.decay", "weights.realtime_penalty", "jobs.training.priority",
          "jobs.training.gpus", "jobs.training.duration_steps", "jobs.training.arrival_step",
          "jobs.training.running", "jobs.realtime.swap_limit", "jobs.realtime.demand",
          "jobs.realtime.current_gpus", "jobs.realtime.priority", "jobs"]


@settings(max_examples=40)
@given(changes=st.lists(st.tuples(st.sampled_from(FIELDS), HOSTILE_VALUES), min_size=1,
                        max_size=3))
def test_hypothesis_scenarios_never_break_plan(tmp_path_factory: pytest.TempPathFactory,
                                               changes: list[tuple[str, object]]) -> None:
    root = tmp_path_factory.mktemp("hyp")

    def change(body: dict) -> None:
        for keys, value in changes:
            with contextlib.suppress(StopIteration, KeyError, TypeError, IndexError):
                _set(keys, value)(body)  # an earlier change may have removed the path

    try:
        scenario = scenario_with(root / "s.json", change)
    except (ValueError, OverflowError):
        return  # json.dumps itself refuses (NaN is written, 2**70 too): covered elsewhere
    result = gpuplan("plan", scenario, "--out", root / "p.json")
    assert result.code in (0, 2), result
    assert_clean(result, result.code)
    if result.code == 0:
        plan = strict_json(root / "p.json")
        check = gpuplan("check", scenario, root / "p.json")
        assert check.code == 0, (plan["metrics"], check)
    else:
        assert not (root / "p.json").exists()


@settings(max_examples=40)
@given(offsets=st.lists(st.one_of(st.none(), st.integers(min_value=-14 * 60, max_value=14 * 60)),
                        min_size=1, max_size=8))
def test_hypothesis_each_row_keeps_its_own_offset(offsets: list[int | None]) -> None:
    """Naive is UTC, an offset is honoured per row, whatever the other rows carry."""
    from allocator.core.timeparse import parse_times

    base = pd.Timestamp("2026-03-01T12:00:00")
    texts, want = [], []
    for k, minutes in enumerate(offsets):
        local = base + pd.Timedelta(hours=k)
        if minutes is None:
            texts.append(local.strftime("%Y-%m-%dT%H:%M:%S"))
            want.append(local.tz_localize("UTC"))
        else:
            sign = "+" if minutes >= 0 else "-"
            text = f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
            texts.append(local.strftime("%Y-%m-%dT%H:%M:%S") + text)
            want.append((local - pd.Timedelta(minutes=minutes)).tz_localize("UTC"))
    got = parse_times(pd.Series(texts), "timestamp")
    assert list(got) == want


def test_one_row_with_an_offset_shifts_nothing(w: World) -> None:
    """The same instants written in two zones give the same profile (once a 5.5 h shift)."""
    docs = []
    for traffic in (w.inputs["traffic"], _traffic_row(w)):
        out = w.path(f"profile-{len(docs)}.json")
        result = gpuplan("profile", traffic, "--services", w.inputs["services"], "--start",
                         "2026-11-30", "--out", out)
        assert_clean(result, 0)
        docs.append(strict_json(out))
    assert docs[0]["fitted_through"] == docs[1]["fitted_through"]
    assert [s["demand"] for s in docs[0]["services"]] == [s["demand"] for s in docs[1]["services"]]


# ---------------------------------------------------------------- kill -9 at random points


def _spawn(*args: object) -> subprocess.Popen:
    env = dict(os.environ, GPUPLAN_TRACKING="off", PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-m", "pipelines.cli", *map(str, args)],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


def _run_whole(*args: object) -> float:
    began = time.monotonic()
    proc = _spawn(*args)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err.decode()
    return time.monotonic() - began


def _kill_at_random(args: list[object], span: float, rng: random.Random,
                    check: Callable[[], None], times: int = 3) -> None:
    """Start the command, kill -9 it (by pid) somewhere inside its run time, check."""
    for _ in range(times):
        proc = _spawn(*args)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=rng.uniform(0.05, span))
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        check()


@pytest.mark.slow
def test_a_killed_plan_day_leaves_the_old_set_or_the_new(w: World) -> None:
    from pipelines.outset import verify

    out = w.path("day")
    starts = ("2026-11-30T00:00:00Z", "2026-12-01T00:00:00Z")
    span = _run_whole(*_day(w, "--start", starts[0]))
    old = verify(out)
    assert old is not None

    def whole() -> None:
        assert verify(out) is not None, "a set mixing two runs"
        plan = strict_json(out / "plan.json")
        assert plan["start"] in starts
        stamps = (out / "grid.csv").read_text().splitlines()[1].split(",")[1]
        assert stamps == plan["start"]  # the grid is the plan's own
        day = pd.Timestamp(plan["start"]).strftime("%a %d %b %Y")
        assert day in (out / "report.md").read_text().splitlines()[0]  # the report's own

    _kill_at_random(_day(w, "--start", starts[1]), span, random.Random(7), whole)
    _run_whole(*_day(w, "--start", starts[1]))
    whole()
    assert strict_json(out / "plan.json")["start"] == starts[1]
    assert not [p for p in w.root.iterdir() if ".set-" in p.name], "stale sets left"


@pytest.mark.slow
def test_a_killed_train_leaves_the_old_models_or_the_new(w: World) -> None:
    from forecasting.store import load_estimators
    from pipelines.outset import verify

    made = gpuplan("synth-history", "--out", w.path("hist"), "--training", 400,
                   "--quantization", 0, "--seed", 3)
    assert_clean(made, 0)
    models = w.path("models")
    args: list[object] = ["train", w.path("hist") / "training.csv", "--models", models]
    span = _run_whole(*args, "--seed", 1)
    first = verify(models)
    assert first is not None

    def whole() -> None:
        assert verify(models) is not None, "a set mixing two runs"
        manifest = json.loads((models / "manifest.json").read_text())
        assert set(load_estimators(models)) == {k for k in manifest if k != "versions"}

    _kill_at_random([*args, "--seed", 2], span, random.Random(11), whole)
    _run_whole(*args, "--seed", 2)
    whole()
    assert not [p for p in w.root.iterdir() if ".set-" in p.name], "stale sets left"


# ---------------------------------------------------------------- MLflow under concurrency


def _spawn_tracked(uri: str, *args: object) -> subprocess.Popen:
    env = dict(os.environ, GPUPLAN_TRACKING="on", MLFLOW_TRACKING_URI=uri,
               PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-m", "pipelines.cli", *map(str, args)],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


@pytest.mark.slow
def test_concurrent_first_runs_on_a_new_store_record_every_run(w: World) -> None:
    """Three plan-day runs start together on a store that does not exist yet."""
    uri = f"sqlite:///{w.path('mlruns')}/mlflow.db"
    procs = [_spawn_tracked(uri, *_day(w), "--out-dir", w.path(f"day{k}")) for k in range(3)]
    errs = [p.communicate(timeout=900)[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], errs
    assert not any("warning" in e for e in errs), errs
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name(tracking.EXPERIMENTS["plans"])
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 3


@pytest.mark.slow
def test_a_broken_store_is_one_warning_line(w: World) -> None:
    store = w.path("mlruns")
    store.mkdir()
    (store / "mlflow.db").write_text("not a database, " * 100)
    proc = _spawn_tracked(f"sqlite:///{store}/mlflow.db", *_day(w))
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err.decode()
    lines = [ln for ln in err.decode().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("gpuplan: warning: MLflow"), lines
    assert (w.path("day") / "plan.json").exists()


# ---------------------------------------------------------------- hypothesis: plans, queues

JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**64), max_value=2**64),
              st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=4)),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=12)


@settings(max_examples=40)
@given(grid=st.one_of(JSON_VALUES, st.lists(st.lists(st.one_of(
           st.none(), st.sampled_from(["chat", "sft-7b", "nope"]), JSON_VALUES), max_size=9),
           max_size=25)),
       metrics=JSON_VALUES, body_is_object=st.booleans())
def test_hypothesis_plans_never_break_check_or_show(
        tmp_path_factory: pytest.TempPathFactory, grid: object, metrics: object,
        body_is_object: bool) -> None:
    root = tmp_path_factory.mktemp("hplan")
    body = {"grid": grid, "metrics": metrics} if body_is_object else grid
    plan = root / "plan.json"
    plan.write_text(json.dumps(body))
    checked = gpuplan("check", SCENARIO, plan)
    assert checked.code in (0, 1, 2) and "Traceback" not in checked.err, checked
    if checked.code == 2:
        assert_clean(checked, 2)
    shown = gpuplan("show", plan, "--png", root / "p.png")
    assert shown.code in (0, 2), shown
    assert_clean(shown, shown.code)
    assert (root / "p.png").exists() == (shown.code == 0)


QUEUE_CELLS = st.one_of(
    st.sampled_from(["", "nan", "inf", "-inf", "1e308", "1e-308", "-1", "0", "1e15", "x",
                     "9" * 400, "1,5", '"', "\x00", "２"]),
    st.floats().map(str), st.integers(min_value=-(2**70), max_value=2**70).map(str))


@settings(max_examples=15)
@given(cells=st.lists(st.tuples(st.integers(min_value=0, max_value=47),
                                st.sampled_from(["priority", "params_b", "dataset_samples",
                                                 "gpus", "arrival_step", "epochs", "requests",
                                                 "bits", "kind", "id", "seq_len"]),
                                QUEUE_CELLS), min_size=1, max_size=6))
def test_hypothesis_queues_never_break_score(tmp_path_factory: pytest.TempPathFactory,
                                             cells: list[tuple[int, str, str]]) -> None:
    root = tmp_path_factory.mktemp("hqueue")
    frame = pd.read_csv(QUEUE, dtype=str)
    for row, column, value in cells:
        if column in frame.columns:
            frame.loc[row % len(frame), column] = value
    queue = root / "queue.csv"
    frame.to_csv(queue, index=False)
    result = gpuplan("score", queue, "--out", root / "scored.csv")
    assert result.code in (0, 2) and "Traceback" not in result.err, result
    if result.code == 2:
        assert_clean(result, 2)
        assert not (root / "scored.csv").exists()
        return
    scored = pd.read_csv(root / "scored.csv")
    assert scored["duration_steps"].between(1, 100_000).all()
    assert scored["gpus"].between(1, 4096).all()


def test_what_a_killed_run_left_is_cleaned_by_the_next(tmp_path: Path) -> None:
    """A dead writer's temporary file and staging directory go; a set moved aside between
    the two renames of the fallback swap comes back."""
    from allocator.core import atomic
    from pipelines import outset

    dead = 2**22 + 12345  # beyond pid_max on Linux: no such process
    stale = tmp_path / f".plan.json.{dead}.abcd.tmp"
    stale.write_text("half")
    live = tmp_path / f".plan.json.{os.getpid()}.efgh.tmp"
    live.write_text("mine")
    atomic.write_text(tmp_path / "plan.json", "{}")
    assert not stale.exists() and live.exists()
    staging = tmp_path / f".day.set-{dead}-xyz"
    staging.mkdir()
    (staging / "plan.json").write_text("half")
    aside = tmp_path / f".day.set-{dead}-old1.old"
    aside.mkdir()
    (aside / "plan.json").write_text("the old set")
    outset.recover(tmp_path / "day")
    assert not staging.exists() and not aside.exists()
    assert (tmp_path / "day" / "plan.json").read_text() == "the old set"


@pytest.mark.slow
def test_a_read_only_store_is_one_warning_line(w: World) -> None:
    """A store made immutable (chattr +i: read-only even to root) after its first run."""
    store = w.path("mlruns")
    uri = f"sqlite:///{store}/mlflow.db"
    first = _spawn_tracked(uri, *_day(w, "--out-dir", w.path("first")))
    _, err = first.communicate(timeout=600)
    assert first.returncode == 0, err.decode()
    frozen = [store / "mlflow.db", store]
    if subprocess.run(["chattr", "+i", *map(str, frozen)], capture_output=True).returncode:
        pytest.skip("chattr +i is not available here")
    try:
        proc = _spawn_tracked(uri, *_day(w))
        _, err = proc.communicate(timeout=600)
    finally:
        subprocess.run(["chattr", "-i", *map(str, frozen)], check=True)
    assert proc.returncode == 0, err.decode()
    lines = [ln for ln in err.decode().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("gpuplan: warning: MLflow"), lines
    assert (w.path("day") / "plan.json").exists()
