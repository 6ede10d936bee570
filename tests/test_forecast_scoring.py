"""Scoring a queue: every scorable row scored, bad rows reported by id and reason."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from allocator.core.errors import InputError
from forecasting.batch_inference import estimate_batch
from forecasting.columns import SCORED
from forecasting.history import read_table
from forecasting.scoring import score_queue
from forecasting.store import load_estimators
from tests.forecast_fixtures import MODELS, QUEUE


@pytest.fixture(scope="module")
def estimators():
    return load_estimators(MODELS)


def test_bundled_queue_scores_every_row(estimators):
    queue = read_table(QUEUE, as_text=True)
    assert 30 <= len(queue) <= 60 and queue["kind"].nunique() == 3
    scored, rejects = score_queue(queue, estimators)
    assert len(scored) == len(queue) and rejects.empty
    assert set(np.log2(scored["gpus"]) % 1) == {0.0}
    assert (scored["duration_steps"] >= 1).all()
    assert (scored["gpu_hours_p90"] >= scored["gpu_hours_p50"]).all()
    hours = np.ceil(scored["gpu_hours_p90"] / scored["gpus"] - 1e-9).clip(lower=1)
    np.testing.assert_array_equal(scored["duration_steps"], hours)


def test_step_length_and_p50_durations(estimators):
    queue = read_table(QUEUE, as_text=True)
    hourly, _ = score_queue(queue, estimators)
    quarter, _ = score_queue(queue, estimators, step_minutes=15, duration_from="p50")
    expected = np.ceil(quarter["gpu_hours_p50"] / quarter["gpus"] * 4 - 1e-9).clip(lower=1)
    np.testing.assert_array_equal(quarter["duration_steps"], expected)
    assert (quarter["duration_steps"] >= hourly["duration_steps"]).all()


def test_scored_file_keeps_the_input_text(estimators):
    queue = read_table(QUEUE, as_text=True)
    scored, _ = score_queue(queue, estimators)
    kept = [c for c in queue.columns if c not in SCORED]
    pd.testing.assert_frame_equal(scored[kept].reset_index(drop=True), queue[kept])


BAD = [
    ("id", "", "missing id"),
    ("kind", "serving", "must be one of"),
    ("priority", "0", "must be a number > 0"),
    ("arrival_step", "-1", "whole number >= 0"),
    ("gpus", "3", "power of two"),
    ("params_b", "abc", "not a finite number"),
    ("gpu_type", "TPU-v5e", "unknown GPU type; known: A10-24GB, A100-40GB"),
]


@pytest.mark.parametrize(("field", "value", "reason"), BAD)
def test_a_bad_row_is_reported_and_the_rest_still_scored(estimators, field, value, reason):
    queue = read_table(QUEUE, as_text=True)
    queue.loc[5, field] = value
    scored, rejects = score_queue(queue, estimators)
    assert len(scored) == len(queue) - 1
    assert rejects["field"].tolist() == [field]
    assert reason in rejects["reason"].iloc[0]
    assert rejects["row"].iloc[0] == 6


def test_kind_specific_bad_rows(estimators):
    queue = read_table(QUEUE, as_text=True)
    t = queue.index[queue["kind"] == "training"]
    q = queue.index[queue["kind"] == "quantization"]
    b = queue.index[queue["kind"] == "batch_inference"]
    queue.loc[t[0], "variant"] = "full-ppo"
    queue.loc[t[1], ["params_b", "active_params_b", "seq_len", "gradient_checkpointing",
                     "flash_attention"]] = ["405", "405", "262144", "0", "0"]
    queue.loc[q[0], "bits"] = "3"
    queue.loc[b[0], "requests"] = "0"
    queue.loc[t[2], "id"] = queue.loc[t[3], "id"]  # a later duplicate is the bad one
    scored, rejects = score_queue(queue, estimators)
    by_id = dict(zip(rejects["row"], rejects["reason"], strict=True))
    assert len(scored) == len(queue) - 5
    assert "must be one of" in by_id[t[0] + 1]
    assert "does not fit in memory" in by_id[t[1] + 1]
    assert "4 or 8" in by_id[q[0] + 1]
    assert "> 0" in by_id[b[0] + 1]
    assert "duplicate id" in by_id[max(t[2], t[3]) + 1]


@pytest.mark.parametrize("missing", ["id", "priority", "variant", "algorithm", "requests"])
def test_a_missing_column_is_a_bad_file(estimators, missing):
    queue = read_table(QUEUE, as_text=True).drop(columns=[missing])
    with pytest.raises(InputError) as err:
        score_queue(queue, estimators)
    assert err.value.field == missing


def test_training_columns_are_needed_only_when_training_rows_are_queued(estimators):
    queue = read_table(QUEUE, as_text=True)
    queue = queue[queue["kind"] != "training"].drop(columns=["variant", "n_layers"])
    scored, rejects = score_queue(queue, estimators)
    assert len(scored) == len(queue) and rejects.empty


def test_batch_inference_throughput_matches_published_serving_rates():
    """7B on one A100 about 3,300 output tokens/s; a 70B needs four 80 GB GPUs."""
    rows = pd.DataFrame([
        {"params_b": 7.0, "gpu_type": "A100-80GB", "requests": 3600, "avg_input_tokens": 0,
         "avg_output_tokens": 3300},
        {"params_b": 70.0, "gpu_type": "A100-80GB", "requests": 1, "avg_input_tokens": 0,
         "avg_output_tokens": 1},
    ])
    e = estimate_batch(rows)
    assert e["gpus"].tolist() == [1, 4]
    assert e["gpu_hours_p50"].iloc[0] == pytest.approx(1.0 + 0.1, rel=0.05)
    assert (e["gpu_hours_p90"] == 1.5 * e["gpu_hours_p50"]).all()


@pytest.mark.slow
def test_scoring_100k_jobs_scores_every_row(estimators, tmp_path):
    """The 100k-job queue end to end (read, score, write); its speed is measured by
    `python benchmarks/speed_targets.py`, not asserted here."""
    sample = read_table(QUEUE, as_text=True)
    big = sample.iloc[np.arange(100_000) % len(sample)].reset_index(drop=True)
    big["id"] = [f"job-{i}" for i in range(len(big))]
    big.to_csv(tmp_path / "q.csv", index=False)
    queue = read_table(tmp_path / "q.csv", as_text=True)
    scored, rejects = score_queue(queue, estimators)
    scored.to_csv(tmp_path / "s.csv", index=False)
    assert len(scored) == 100_000 and rejects.empty
    assert scored["id"].is_unique
