"""The embedded store: where it lives, registering and loading by alias, failing quietly once."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression

from pipelines import tracking


@pytest.fixture
def embedded(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPUPLAN_HOME", str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("GPUPLAN_TRACKING", "on")  # the suite's fixture turns tracking off
    lines: list[str] = []
    return tracking.Tracker(warn=lines.append), lines


def test_store_is_in_gpuplan_home_and_registers_champions(embedded, tmp_path):
    tracker, lines = embedded
    assert tracker.uri == f"sqlite:///{tmp_path.resolve()}/mlruns/mlflow.db"
    # nothing registered yet: models/ serves, without a warning
    model, ref = tracker.load_champion("training", lambda: "from models/", "models/t")
    assert model == "from models/" and ref.source == "local" and ref.uri == "models/t"
    X = np.arange(8.0).reshape(-1, 1)
    for slope in (2.0, 3.0):
        with tracker.run("estimators", "train") as run:
            run.params({"slope": slope})
            run.metrics({"mdape": 0.1, "skipped": float("nan"), "text": "not a number"})
            ref = run.register("training", LinearRegression().fit(X, slope * X[:, 0]))
    assert ref is not None and ref.version == "2" and ref.source == "registry"
    model, loaded = tracker.load_champion("training", lambda: None)
    assert loaded.uri == "models:/gpuplan-training-cost/2"
    assert model.predict([[1.0]])[0] == pytest.approx(3.0)
    assert (tmp_path / "mlruns" / "mlflow.db").exists()
    assert (tmp_path / "mlruns" / "artifacts" / "gpuplan-estimators").is_dir()
    assert lines == []


def test_a_broken_store_warns_once_and_runs_the_body_anyway(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUPLAN_TRACKING", "on")
    lines: list[str] = []
    blocked = tmp_path / "file"
    blocked.write_text("a file where the store's directory should be")
    tracker = tracking.Tracker(f"sqlite:///{blocked}/sub/mlflow.db", warn=lines.append)
    ran = []
    for _ in range(2):
        with tracker.run("plans", "plan-day") as run:
            run.params({"a": 1})
            run.metrics({"b": 2})
            assert run.register("training", object()) is None
            ran.append(run.run_id)
    model, ref = tracker.load_champion("training", lambda: "local")
    assert ran == [None, None] and model == "local" and ref.source == "local"
    assert len(lines) == 1 and lines[0].startswith("gpuplan: warning: MLflow tracking")


def test_tests_leave_the_project_store_alone(tmp_path):
    """The suite's fixture: tracking off and no inherited store, whatever the caller exported."""
    import os
    from pathlib import Path

    assert os.environ["GPUPLAN_TRACKING"] == "off"
    assert "MLFLOW_TRACKING_URI" not in os.environ
    # no other GPUPLAN_* setting of the caller's shell (catalog, Slurm path, debug) gets in
    inherited = {n for n in os.environ if n.startswith("GPUPLAN_")}
    assert inherited <= {"GPUPLAN_TRACKING", "GPUPLAN_HOME", "GPUPLAN_PIN_PLANS"}
    assert Path.cwd() == Path(__file__).resolve().parents[1]
    lines: list[str] = []
    assert not tracking.Tracker(warn=lines.append).enabled and lines == []
    # and with tracking on, the default store is the working directory's, nothing inherited
    assert tracking.default_uri(tmp_path) == f"sqlite:///{tmp_path.resolve()}/mlruns/mlflow.db"


def test_silenced_by_the_environment(monkeypatch):
    monkeypatch.setenv("GPUPLAN_TRACKING", "off")
    lines: list[str] = []
    tracker = tracking.Tracker("http://127.0.0.1:9", warn=lines.append)
    assert not tracker.enabled and lines == []


def test_table_metrics_flattens_report_tables():
    import pandas as pd

    frame = pd.DataFrame({"variant": ["lora-sft", "overall"], "mdape": [0.1, 0.2],
                          "met": [True, False]})
    assert tracking.table_metrics(frame, "variant", "training") == {
        "training.lora-sft.mdape": 0.1, "training.overall.mdape": 0.2}


def test_a_call_failing_mid_run_warns_once_and_the_pipeline_goes_on(monkeypatch):
    monkeypatch.setenv("GPUPLAN_TRACKING", "on")
    import types

    import mlflow

    lines: list[str] = []
    tracker = tracking.Tracker("sqlite:////nonexistent/never-opened.db", warn=lines.append)
    tracker._ready = True  # as if connected; then the store starts failing
    monkeypatch.setattr(tracker, "experiment_id", lambda key: "1")
    fake = types.SimpleNamespace(info=types.SimpleNamespace(run_id="r1"))
    monkeypatch.setattr(mlflow, "start_run", lambda **kw: fake)
    monkeypatch.setattr(mlflow, "end_run", lambda **kw: None)

    def broken(*args, **kwargs):
        raise RuntimeError("database is locked")

    monkeypatch.setattr(mlflow, "log_params", broken)
    monkeypatch.setattr(mlflow, "log_metrics", broken)
    reached = []
    with tracker.run("plans", "plan-day") as run:
        run.params({"a": 1})
        run.metrics({"b": 2.0})
        run.artifact(__file__)
        reached.append(True)
    assert reached == [True]
    assert len(lines) == 1 and "database is locked" in lines[0]


def test_a_live_server_answering_busy_once_keeps_tracking_on(monkeypatch):
    """A tracking server that answers one request with a 503 (a busy SQLite store, a
    restarting worker) is retried, not switched off for the rest of the run; one that
    keeps failing still is, with the one warning."""
    import http.server
    import json
    import threading

    monkeypatch.setenv("GPUPLAN_TRACKING", "on")
    for key in tracking._HTTP_DEFAULTS:  # the tracker's own defaults, restored afterwards
        monkeypatch.setenv(key, "unset")
        monkeypatch.delenv(key)
    busy_answers = {"left": 0}

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            if self.path.startswith("/health"):
                status, body = 200, b"OK"
            elif busy_answers["left"] > 0:
                busy_answers["left"] -= 1
                status, body = 503, b'{"error_code": "TEMPORARILY_UNAVAILABLE"}'
            else:
                status, body = 200, json.dumps({"experiments": []}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args) -> None:  # quiet
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        busy_answers["left"] = 1
        lines: list[str] = []
        assert tracking.Tracker(url, warn=lines.append).enabled
        assert lines == [] and busy_answers["left"] == 0
        busy_answers["left"] = 10**6  # a server that never recovers
        lines = []
        assert not tracking.Tracker(url, warn=lines.append).enabled
        assert len(lines) == 1 and "is off" in lines[0]
    finally:
        server.shutdown()
        server.server_close()
