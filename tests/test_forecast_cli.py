"""The commands: synth-history, train and score, including their bad-input exits."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from forecasting.evaluate import join_histories
from forecasting.history import load_training_history, read_table
from forecasting.quantization import QuantizationCostEstimator
from forecasting.store import load_estimators
from forecasting.training import TrainingCostEstimator
from tests.forecast_fixtures import HISTORY, MODELS, QUEUE, forecast_app
from tests.pipeline_fixtures import as_new_process

REAL_RUNS = HISTORY.parent / "finetune_runs" / "calibration_history.csv"

runner = CliRunner()


def run(*args):
    """Untracked, so that tests never register champions in the working tree's mlruns/
    (MLflow is tested in tests/test_tracking_*.py)."""
    as_new_process()
    return runner.invoke(forecast_app(), [str(a) for a in args],
                         env={"GPUPLAN_TRACKING": "off"})


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A small history written by the command, and models trained on it."""
    root = tmp_path_factory.mktemp("forecast")
    res = run("synth-history", "--out", root / "hist", "--training", 700, "--quantization", 500,
              "--seed", 4, "--queue-out", root / "queue.csv", "--queue-jobs", 40)
    assert res.exit_code == 0, res.output
    res = run("train", root / "hist" / "training.csv", "--quantization",
              root / "hist" / "quantization.csv", "--models", root / "models",
              "--report", root / "report.md")
    assert res.exit_code == 0, res.output
    return root


def test_synth_history_is_seeded_and_writes_parquet_too(small, tmp_path):
    res = run("synth-history", "--out", tmp_path, "--training", 700, "--quantization", 500,
              "--seed", 4, "--format", "parquet")
    assert res.exit_code == 0, res.output
    from_csv = load_training_history(small / "hist" / "training.csv")
    from_parquet = load_training_history(tmp_path / "training.parquet")
    pd.testing.assert_frame_equal(from_csv[0], from_parquet[0])
    np.testing.assert_array_equal(from_csv[2], from_parquet[2])
    assert (tmp_path / "meta.json").read_text() == (small / "hist" / "meta.json").read_text()


def test_train_saves_models_and_writes_the_report(small):
    assert {"training", "baseline", "quantization"} <= set(load_estimators(small / "models"))
    report = (small / "report.md").read_text()
    for part in ("## Training cost", "## Quantization cost", "## One uniform margin",
                 "## Published timings",
                 "## Targets", "Reproduce with `gpuplan train"):
        assert part in report


def test_score_writes_scored_queue_and_rejects(small, tmp_path):
    queue = read_table(small / "queue.csv", as_text=True)
    queue.loc[3, "priority"] = "-2"
    queue.to_csv(tmp_path / "q.csv", index=False)
    res = run("score", tmp_path / "q.csv", "--out", tmp_path / "s.csv", "--models",
              small / "models", "--step-minutes", 30)
    assert res.exit_code == 0, res.output
    scored = pd.read_csv(tmp_path / "s.csv")
    rejects = pd.read_csv(tmp_path / "s.rejects.csv")
    assert len(scored) == len(queue) - 1
    assert rejects["id"].tolist() == [queue.loc[3, "id"]]
    assert f"{queue.loc[3, 'id']}: field 'priority'" in res.output


@pytest.mark.parametrize("drop", ["kind", "gpu_type"])
def test_score_with_a_bad_file_exits_2_and_writes_nothing(tmp_path, drop):
    read_table(QUEUE, as_text=True).drop(columns=[drop]).to_csv(tmp_path / "q.csv", index=False)
    res = run("score", tmp_path / "q.csv", "--out", tmp_path / "s.csv", "--models", MODELS)
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "q.csv" in lines[0] and f"field '{drop}'" in lines[0]
    assert not (tmp_path / "s.csv").exists()


def test_score_without_models_or_with_an_unreadable_queue_exits_2(tmp_path):
    res = run("score", QUEUE, "--out", tmp_path / "s.csv", "--models", tmp_path)
    assert res.exit_code == 2 and "gpuplan train" in res.output
    (tmp_path / "q.txt").write_text("x")
    res = run("score", tmp_path / "q.txt", "--out", tmp_path / "s.csv", "--models", MODELS)
    assert res.exit_code == 2 and "expected a .csv, .csv.gz or .parquet file" in res.output


def test_train_on_a_bad_history_exits_2_naming_file_job_and_field(small, tmp_path):
    hist = pd.read_csv(small / "hist" / "training.csv", dtype={"id": str})
    hist.loc[7, "gpus"] = 3
    hist.to_csv(tmp_path / "bad.csv", index=False)
    res = run("train", tmp_path / "bad.csv", "--models", tmp_path / "m")
    assert res.exit_code == 2
    assert f"bad.csv: job '{hist.loc[7, 'id']}': field 'gpus': must be a power of two" in res.output
    assert not (tmp_path / "m").exists()
    hist.drop(columns=["seq_len"]).to_csv(tmp_path / "bad.csv", index=False)
    res = run("train", tmp_path / "bad.csv", "--models", tmp_path / "m")
    assert res.exit_code == 2 and "field 'seq_len'" in res.output


@pytest.mark.slow
def test_bundled_models_are_what_train_fits_on_the_bundled_history():
    X, g, y = join_histories(load_training_history(HISTORY / "training.csv"),
                             load_training_history(REAL_RUNS))
    hist = pd.read_csv(HISTORY / "quantization.csv")
    bundled = load_estimators(MODELS)
    queue = read_table(QUEUE)
    train_rows = queue[queue["kind"] == "training"]
    fresh = TrainingCostEstimator().fit(X, y, gpus=g)
    pd.testing.assert_frame_equal(fresh.estimate(train_rows),
                                  bundled["training"].estimate(train_rows))
    q = QuantizationCostEstimator().fit(hist.drop(columns=["id", "gpus", "gpu_hours"]),
                                        hist["gpu_hours"], gpus=hist["gpus"])
    quant_rows = queue[queue["kind"] == "quantization"]
    pd.testing.assert_frame_equal(q.estimate(quant_rows),
                                  bundled["quantization"].estimate(quant_rows))
