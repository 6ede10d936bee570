"""Real jobs: stated GPU counts, jobs that fit nowhere, GPU spellings and the user's
catalogue, the physics prior, and the bundled models on published fine-tuning runs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from allocator.core.errors import InputError
from benchmarks.real_runs import as_queue, ratio_summary, real_runs
from forecasting import gpu_catalog
from forecasting.history import clean_training
from forecasting.memory import fitting_gpus, memory_fixes, min_training_gpus
from forecasting.prior import prior_log_hours
from forecasting.published import PUBLISHED_BATCH, batch_table
from forecasting.scoring import score_queue_full
from forecasting.store import load_estimators
from tests.forecast_fixtures import MODELS, job


@pytest.fixture(scope="module")
def estimators():
    return load_estimators(MODELS)


def queue(*rows: dict) -> pd.DataFrame:
    """Training rows as a queue file reads them (text cells)."""
    df = pd.DataFrame([{"id": f"j{i}", "kind": "training", "priority": 1, **r}
                       for i, r in enumerate(rows)])
    return df.astype(str).replace({"nan": ""})


FULL_7B = job(variant="full-sft", lora_rank=0, lora_targets=0, zero_stage=0)
LORA_32B = job(params_b=32.0, active_params_b=32.0, n_layers=64, hidden_size=5120,
               gradient_checkpointing=0)


def test_full_7b_at_zero_0_does_not_fit_one_a100_by_zero_layout_but_is_scored(estimators):
    df = pd.DataFrame([FULL_7B, LORA_32B])
    assert (min_training_gpus(df) == 0).all()  # data parallel replicates 16 B/param
    assert (fitting_gpus(df) >= 2).all()  # the layer-split layout holds them
    result = score_queue_full(queue(FULL_7B, LORA_32B), estimators)
    assert result.rejects.empty and len(result.scored) == 2
    assert (result.scored["gpus"].astype(int) >= 2).all()


def test_a_stated_gpu_count_is_kept_with_a_warning_when_memory_says_too_few(estimators):
    result = score_queue_full(queue({**FULL_7B, "gpus": 1}, {**job(), "gpus": 4},
                                    {**FULL_7B, "gpus": 2}), estimators)
    assert result.rejects.empty
    assert result.scored["gpus"].astype(int).tolist() == [1, 4, 2]  # 2 hold it split
    assert result.warnings["id"].tolist() == ["j0"]
    line = result.warnings["reason"].iloc[0]
    assert "asks for 1 GPU" in line and "GB per GPU on 1" in line and "A100-80GB" in line
    report = result.report()
    assert report["level"].tolist() == ["warning"]


def test_a_job_that_fits_nowhere_gets_the_numbers_and_a_fix_not_a_field(estimators):
    long = job(seq_len=131072, avg_tokens_per_sample=100000, gradient_checkpointing=0,
               flash_attention=0)
    result = score_queue_full(queue(long), estimators)
    assert result.scored.empty
    reason = result.rejects["reason"].iloc[0]
    assert result.rejects["field"].iloc[0] == "memory"
    assert "GB per GPU" in reason and "GB usable on a A100-80GB" in reason
    assert "fits with gpu_type H200-141GB and gradient_checkpointing 1 and " \
        "flash_attention 1 (1 GPU)" in reason
    fixed = {**long, "flash_attention": 1, "gradient_checkpointing": 1}
    assert fitting_gpus(pd.DataFrame([{**fixed, "gpu_type": "H200-141GB"}]))[0] == 1
    assert fitting_gpus(pd.DataFrame([fixed]))[0] == 0  # the larger GPU is needed too


def test_the_fixes_offered_do_fit():
    tight = job(variant="full-sft", params_b=70.0, active_params_b=70.0, n_layers=80,
                hidden_size=8192, lora_rank=0, lora_targets=0, seq_len=32768,
                avg_tokens_per_sample=30000, gradient_checkpointing=0, flash_attention=1,
                gpu_type="L4-24GB")
    short = job(seq_len=32768, avg_tokens_per_sample=30000, gradient_checkpointing=0)
    lines = memory_fixes(pd.DataFrame([tight, short]))
    assert lines[0].startswith("does not fit in memory")
    assert "20 GB usable on a L4-24GB" in lines[0]
    assert "fits with gpu_type A100-80GB and gradient_checkpointing 1" in lines[0]
    changed = {**tight, "gpu_type": "A100-80GB", "gradient_checkpointing": 1}
    assert fitting_gpus(pd.DataFrame([changed]))[0] > 0
    assert "fits with gradient_checkpointing 1 (1 GPU), or gpu_type B200-192GB" in lines[1]
    assert fitting_gpus(pd.DataFrame([{**short, "gradient_checkpointing": 1}]))[0] == 1


@pytest.mark.parametrize(("spelling", "name"), [
    ("H100", "H100-80GB"), ("h100-sxm", "H100-80GB"), ("A100", "A100-80GB"),
    ("A100-80G", "A100-80GB"), ("NVIDIA A100-SXM4-40GB", "A100-40GB"),
    ("H100 PCIe", "H100-PCIE-80GB"), ("l40s", "L40S-48GB")])
def test_gpu_spellings_map_to_catalogue_entries(spelling, name):
    assert gpu_catalog.canonical(pd.Series([spelling])).iloc[0] == name


def test_an_h100_row_scores_and_an_unknown_gpu_lists_the_known_ones(estimators):
    result = score_queue_full(queue(job(gpu_type="H100"), job(gpu_type="Gaudi3")), estimators)
    assert result.scored["id"].tolist() == ["j0"]
    reason = result.rejects["reason"].iloc[0]
    assert "unknown GPU type" in reason and "H100-80GB" in reason
    assert "GPUPLAN_GPU_CATALOG" in reason


def test_a_users_catalogue_adds_a_type(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text("gpu_type,memory_gb,bf16_tflops,fp8_tflops,aliases,source\n"
                    "Gaudi3-128GB,128,1835,1835,Gaudi3,vendor datasheet\n")
    gpus, keys = gpu_catalog.load_catalog(path)
    assert gpus["Gaudi3-128GB"].memory_gb == 128 and keys["GAUDI3"] == "Gaudi3-128GB"
    assert "H100-80GB" in gpus  # the bundled types stay
    path.write_text("gpu_type,memory_gb,bf16_tflops,fp8_tflops\nX,0,1,1\n")
    with pytest.raises(InputError, match="memory_gb"):
        gpu_catalog.load_catalog(path)


def test_prior_charges_lora_two_thirds_of_full_flops_and_more_for_bigger_models():
    base = dict(gradient_checkpointing=0, dataset_samples=1_000_000, packing=1)
    full = job(variant="full-sft", lora_rank=0, lora_targets=0, **base)
    lora = job(**base)
    big = job(params_b=70.0, active_params_b=70.0, n_layers=80, hidden_size=8192, **base)
    from forecasting.synth import training_flops

    flops, _ = training_flops(pd.DataFrame([full, lora]))
    assert flops[1] / flops[0] == pytest.approx(2 / 3, rel=0.02)
    h = np.exp(prior_log_hours(clean_training(pd.DataFrame([lora, big])), np.ones(2)))
    assert 5 < h[1] / h[0] < 15


def test_an_unseen_gpu_type_extrapolates_through_the_prior(estimators):
    """B200 is in no history: the estimate follows its peak, below the H100's."""
    est = estimators["training"]
    rows = pd.DataFrame([job(gpu_type="H100-80GB"), job(gpu_type="B200-192GB")])
    hours = est.predict(rows)
    assert np.all(np.isfinite(hours)) and hours[1] < hours[0]


def test_bundled_models_on_published_runs_meet_the_targets(estimators):
    """Scored as `gpuplan score` scores them: none rejected, and on the report half
    (never used for fitting) at least 90% within 2x and a median ratio in 0.8-1.25."""
    runs = real_runs()
    for keep in (True, False):
        result = score_queue_full(as_queue(runs, keep_gpus=keep).astype(str), estimators)
        assert result.rejects.empty
        s = result.scored[["id", "gpu_hours_p50"]].merge(runs, on="id")
        s = s[s["split"] == "report"]
        summary = ratio_summary(s["gpu_hours_p50"].astype(float), s["gpu_hours"])
        assert summary["runs"] == 51
        assert summary["within_2x"] >= 0.9
        assert 0.8 <= summary["median_ratio"] <= 1.25


def test_the_report_runs_are_not_in_the_calibration_history():
    from benchmarks.real_runs import HISTORY_OUT

    cal = pd.read_csv(HISTORY_OUT)
    runs = real_runs()
    assert set(cal["id"]) == set(runs.loc[runs["split"] == "calibration", "id"])
    assert not set(cal["id"]) & set(runs.loc[runs["split"] == "report", "id"])


@pytest.mark.parametrize("source", [row[0] for row in PUBLISHED_BATCH])
def test_no_batch_inference_reservation_below_a_published_throughput(source):
    row = batch_table().set_index("source").loc[source]
    assert row["reserved_p90_gpu_h"] >= row["published_gpu_h"], source
