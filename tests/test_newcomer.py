"""A newcomer's own data: state in one place, promotion on evidence, --models wins, and a
`score` that fails loudly. Every test sets its own GPUPLAN_HOME and store."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from pipelines import home as homelib
from pipelines import tracking
from tests.forecast_fixtures import MODELS, QUEUE, forecast_app
from tests.pipeline_fixtures import as_new_process

runner = CliRunner()


def run(*args, env: dict[str, str] | None = None):
    as_new_process()
    return runner.invoke(forecast_app(), [str(a) for a in args], env=env or {})


# -- where the state lives -------------------------------------------------------------


def test_home_is_the_env_var_then_the_project_then_a_user_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUPLAN_HOME", str(tmp_path / "state"))
    assert homelib.home().path == (tmp_path / "state").resolve()
    assert tracking.default_uri() == f"sqlite:///{(tmp_path / 'state').resolve()}/mlruns/mlflow.db"
    monkeypatch.delenv("GPUPLAN_HOME")
    monkeypatch.chdir(homelib.project_dir() / "docs")
    assert homelib.home().path == homelib.project_dir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert homelib.home().path == tmp_path / "xdg" / "gpuplan"
    assert homelib.bundled("data/cluster.json").exists()  # whatever the cwd


def test_where_prints_the_home_and_the_store(tmp_path, monkeypatch):
    from pipelines.cli import build_app

    monkeypatch.setenv("GPUPLAN_HOME", str(tmp_path))
    res = runner.invoke(build_app(), ["where"])
    assert res.exit_code == 0, res.output
    assert str(tmp_path) in res.output and "mlruns/mlflow.db" in res.output
    res = runner.invoke(build_app(), ["where", "--uri"])
    assert res.output.strip() == f"sqlite:///{tmp_path.resolve()}/mlruns/mlflow.db"


def test_a_failing_score_outside_the_project_creates_nothing(tmp_path, monkeypatch):
    """No models anywhere: one line naming the store and the directory, and no mlruns/."""
    state = tmp_path / "state"
    monkeypatch.setenv("GPUPLAN_HOME", str(state))
    monkeypatch.setenv("GPUPLAN_TRACKING", "on")
    monkeypatch.setattr(homelib, "bundled_models", lambda: tmp_path / "no-models")
    monkeypatch.chdir(tmp_path)
    res = run("score", QUEUE, "--out", tmp_path / "s.csv")
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1, res.output
    assert "mlruns/mlflow.db" in lines[0] and "MLFLOW_TRACKING_URI" in lines[0]
    assert "--models" in lines[0] and "no-models" in lines[0]
    assert not state.exists() and not (tmp_path / "mlruns").exists()
    assert not (tmp_path / "s.csv").exists()


# -- score's exit codes ----------------------------------------------------------------


def _queue(tmp_path: Path, bad: int, good: int) -> Path:
    frame = pd.read_csv(QUEUE, dtype=str)
    good_rows = frame[frame["kind"] == "training"].head(good)
    bad_rows = frame[frame["kind"] == "training"].iloc[good : good + bad].assign(
        params_b="-1")
    path = tmp_path / "q.csv"
    pd.concat([good_rows, bad_rows]).to_csv(path, index=False)
    return path


def test_score_exits_2_and_writes_no_scored_file_when_every_row_is_rejected(tmp_path):
    queue = _queue(tmp_path, bad=3, good=0)
    res = run("score", queue, "--out", tmp_path / "s.csv", "--models", MODELS)
    assert res.exit_code == 2
    assert not (tmp_path / "s.csv").exists()
    assert len(pd.read_csv(tmp_path / "s.rejects.csv")) == 3
    assert "rejected 3 of 3 rows" in res.output


def test_score_max_reject_share(tmp_path):
    queue = _queue(tmp_path, bad=2, good=3)
    res = run("score", queue, "--out", tmp_path / "s.csv", "--models", MODELS,
              "--max-reject-share", "0.3")
    assert res.exit_code == 2 and not (tmp_path / "s.csv").exists()
    assert "above --max-reject-share 0.3" in res.output
    res = run("score", queue, "--out", tmp_path / "s.csv", "--models", MODELS)  # default 0.5
    assert res.exit_code == 0, res.output
    assert len(pd.read_csv(tmp_path / "s.csv")) == 3


# -- the registry: promotion on evidence, --models wins --------------------------------


@pytest.fixture
def store(tmp_path, monkeypatch):
    """An embedded store in a fresh home, and two synthetic histories: a fair one and a
    tiny one."""
    monkeypatch.setenv("GPUPLAN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GPUPLAN_TRACKING", "on")
    # the tiny history is also noisy (sigma 0.8): with the physics prior, 40 clean rows can
    # beat a 600-row champion on their own held-out rows, so "worse" needs real noise
    for n, name, sigma in ((600, "fair", 0.2), (40, "tiny", 0.8)):
        res = run("synth-history", "--out", tmp_path / name, "--training", n,
                  "--quantization", 0, "--seed", 7 if name == "fair" else 8,
                  "--sigma", sigma)
        assert res.exit_code == 0, res.output
    yield tmp_path
    as_new_process()


def _champion_version() -> str | None:
    as_new_process()
    found = tracking.get_tracker().champion("training")
    return None if found is None else found[1].version


def test_a_worse_version_is_registered_but_not_promoted(store):
    res = run("train", store / "fair" / "training.csv")
    assert res.exit_code == 0, res.output
    assert "no @champion yet" in res.output
    assert (store / "home" / "out" / "models" / "training_cost.joblib").exists()
    assert _champion_version() == "1"

    res = run("train", store / "tiny" / "training.csv")
    assert res.exit_code == 0, res.output
    assert "warning: the training history has 40 completed jobs" in res.output
    assert "not promoted, @champion stays models:/gpuplan-training-cost/1" in res.output
    assert _champion_version() == "1"
    client = tracking.get_tracker().client()
    described = client.get_model_version("gpuplan-training-cost", "2").description
    assert "tiny/training.csv (40 completed jobs" in described
    assert "MdAPE" in described and "not promoted" in described

    res = run("train", store / "tiny" / "training.csv", "--promote")
    assert res.exit_code == 0 and "promoted by --promote" in res.output
    assert _champion_version() == "3"


def test_explicit_models_win_over_the_registry(store, tmp_path):
    res = run("train", store / "tiny" / "training.csv", "--models", tmp_path / "tiny-models")
    assert res.exit_code == 0 and _champion_version() == "1"
    res = run("score", QUEUE, "--out", tmp_path / "a.csv")
    assert "models:/gpuplan-training-cost/1 (registry alias @champion" in res.output
    res = run("score", QUEUE, "--out", tmp_path / "b.csv", "--models", MODELS)
    assert f"{MODELS}/training_cost.joblib (local file)" in res.output
    assert "registry" not in res.output.split("\n")[0]


def test_tests_do_not_inherit_the_callers_state():
    assert "MLFLOW_TRACKING_URI" not in os.environ
    assert homelib.home().path != homelib.project_dir()


# -- the README's own-data example runs as written ------------------------------------


def test_the_examples_score_and_plan_a_day(tmp_path, monkeypatch):
    """data/examples/ through score and plan-day, every path explicit, from another cwd."""
    import json

    from pipelines.cli import build_app

    examples = homelib.bundled("data/examples")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPUPLAN_TRACKING", "off")
    res = run("score", examples / "queue.csv", "--out", tmp_path / "scored.csv",
              "--models", MODELS)
    assert res.exit_code == 0, res.output
    scored = pd.read_csv(tmp_path / "scored.csv")
    assert sorted(scored["kind"]) == ["batch_inference", "quantization", "training"]
    res = runner.invoke(build_app(), [
        "plan-day", "--queue", str(tmp_path / "scored.csv"), "--cluster",
        str(examples / "cluster.json"), "--traffic", str(examples / "traffic.csv"),
        "--services", str(examples / "services.json"), "--running",
        str(examples / "running.json"), "--out-dir", str(tmp_path / "day")])
    assert res.exit_code == 0, res.output
    plan = json.loads((tmp_path / "day" / "plan.json").read_text())
    assert plan["starts"]["run-dpo-13b"] == {"start": 0, "first_gpu": 2, "end": 6}
    assert set(plan["starts"]) >= set(scored["id"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["day", "scored.csv",
                                                          "scored.rejects.csv"]
