"""train -> score -> plan-day against a real `mlflow server`, checked through MlflowClient.

The server is a child process on a free 127.0.0.1 port with a temporary SQLite store and
artifact root; it is killed (its whole process group) whatever happens.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipelines import tracking
from tests.pipeline_fixtures import as_new_process, write_inputs

STARTUP_TIMEOUT_S = 120


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def mlflow_server(tmp_path):
    import requests

    port = free_port()
    exe = Path(sys.executable).with_name("mlflow")
    command = [str(exe) if exe.exists() else "mlflow", "server", "--host", "127.0.0.1",
               "--port", str(port), "--workers", "1",
               "--backend-store-uri", f"sqlite:///{tmp_path / 'server.db'}",
               "--artifacts-destination", str(tmp_path / "server-artifacts")]
    env = dict(os.environ, MLFLOW_DISABLE_TELEMETRY="true", DO_NOT_TRACK="true")
    log = open(tmp_path / "server.log", "w")  # noqa: SIM115 - closed in the finally
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail("mlflow server exited:\n" + (tmp_path / "server.log").read_text())
            try:
                if requests.get(url + "/health", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"mlflow server not healthy after {STARTUP_TIMEOUT_S} s")
            time.sleep(0.5)
        yield url
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=5)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)
        log.close()


def small_history(root: Path) -> tuple[Path, Path, Path]:
    from forecasting.synth import SynthConfig, synth_history, synth_queue

    root.mkdir(parents=True, exist_ok=True)
    train_df, quant_df, meta = synth_history(SynthConfig(seed=3, n_training=300,
                                                         n_quantization=150))
    train_df.to_csv(root / "training.csv", index=False)
    quant_df.to_csv(root / "quantization.csv", index=False)
    (root / "meta.json").write_text(meta)
    synth_queue(30, seed=3).to_csv(root / "queue.csv", index=False)
    return root / "training.csv", root / "quantization.csv", root / "queue.csv"


def cli(server_log: Path, *args: str) -> None:
    """One command; it must succeed with tracking on throughout (a tracking failure is only
    a warning line, so the test reads the output, and shows the server's log beside it)."""
    from pipelines.cli import build_app

    result = CliRunner().invoke(build_app(), list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "MLflow tracking at" not in result.output, (
        result.output + "\n--- server log (tail) ---\n" + server_log.read_text()[-4000:])


@pytest.mark.slow
def test_train_score_plan_day_tracked_on_a_server(tmp_path, mlflow_server, monkeypatch):
    from mlflow import MlflowClient

    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    monkeypatch.delenv("GPUPLAN_TRACKING", raising=False)
    # A loaded CI machine answers slowly: generous timeouts, so slowness is not "unreachable".
    monkeypatch.setattr(tracking, "PROBE_TIMEOUT_S", 30.0)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "120")
    as_new_process()
    history, quant, queue = small_history(tmp_path / "history")
    inputs = write_inputs(tmp_path / "in", gpus=32)
    models = tmp_path / "models"

    log = tmp_path / "server.log"
    cli(log, "train", str(history), "--quantization", str(quant), "--models", str(models))
    shutil.rmtree(models)  # from here on, only the registry holds the estimators
    scored = tmp_path / "scored.csv"
    cli(log, "score", str(queue), "--out", str(scored))  # no --models: the registry's champions
    cli(log, "plan-day", "--queue", str(scored), "--cluster", str(inputs["cluster"]),
        "--traffic", str(inputs["traffic"]), "--services", str(inputs["services"]),
        "--running", str(inputs["running"]), "--out-dir", str(tmp_path / "day"))
    assert (tmp_path / "day" / "plan.json").exists()

    client = MlflowClient(tracking_uri=mlflow_server, registry_uri=mlflow_server)

    def runs(key: str):
        exp = client.get_experiment_by_name(tracking.EXPERIMENTS[key])
        assert exp is not None, key
        found = client.search_runs([exp.experiment_id])
        assert found and all(r.info.status == "FINISHED" for r in found), key
        return found

    train_run = runs("estimators")[0]
    assert any(k.startswith("training.overall.") for k in train_run.data.metrics)
    for kind in tracking.ESTIMATOR_KINDS:
        version = client.get_model_version_by_alias(tracking.MODEL_NAMES[kind],
                                                    tracking.CHAMPION)
        assert version.version == "1" and version.run_id == train_run.info.run_id

    score_run = runs("scoring")[0]
    assert score_run.data.params["training_model_source"] == "registry"
    assert score_run.data.params["training_model_uri"] == "models:/gpuplan-training-cost/1"
    assert score_run.data.metrics["scored"] > 0

    plan_run = runs("plans")[0]
    assert plan_run.info.run_name.startswith("test-day ")
    assert " fast (planned " in plan_run.info.run_name
    assert plan_run.data.tags["cluster"] == "test-day" and plan_run.data.tags["policy"] == "fast"
    assert plan_run.data.tags["commit"]
    plans_exp = client.get_experiment_by_name(tracking.EXPERIMENTS["plans"])
    assert plans_exp.tags["mlflow.note.content"] == tracking.EXPERIMENT_NOTES["plans"]
    version = client.get_model_version(tracking.MODEL_NAMES["training"], "1")
    assert "training.csv (300 completed jobs" in version.description
    for key in ("utilization", "value", "rt_shortfall", "completed", "latency_ms",
                "fifo_utilization"):
        assert key in plan_run.data.metrics, key
    assert plan_run.data.params["policy"] == "fast"
    assert plan_run.data.params["realtime_penalty"] == "8.0"
    names = {a.path for a in client.list_artifacts(plan_run.info.run_id, "plan")}
    assert {"plan/plan.json", "plan/grid.csv", "plan/grid.png", "plan/report.md"} <= names


def test_train_score_plan_day_without_a_server_warn_and_write(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{free_port()}")  # closed
    monkeypatch.delenv("GPUPLAN_TRACKING", raising=False)
    as_new_process()
    history, quant, queue = small_history(tmp_path / "history")
    inputs = write_inputs(tmp_path / "in", gpus=32)
    models, scored = tmp_path / "models", tmp_path / "scored.csv"
    from pipelines.cli import build_app

    runner = CliRunner()
    outputs = []
    for args in (["train", history, "--quantization", quant, "--models", models],
                 ["score", queue, "--out", scored, "--models", models],
                 ["plan-day", "--queue", scored, "--cluster", inputs["cluster"],
                  "--traffic", inputs["traffic"], "--services", inputs["services"],
                  "--out-dir", tmp_path / "day"]):
        result = runner.invoke(build_app(), [str(a) for a in args], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        outputs.append(result.output)
    text = "\n".join(outputs)
    assert text.count("gpuplan: warning: MLflow tracking") == 1  # one line per process
    assert "training_cost.joblib (local file)" in outputs[1]
    assert (tmp_path / "day" / "plan.json").exists()
    assert (tmp_path / "day" / "report.md").exists()
    as_new_process()
