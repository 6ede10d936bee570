"""The generator: seeded, in the contract's columns, and grounded in docs/sources.md figures."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecasting.columns import OUTCOMES, QUANT_FEATURES, TRAINING_FEATURES
from forecasting.history import quant_problems, training_problems
from forecasting.memory import min_training_gpus, training_memory_gb
from forecasting.synth import (
    INT4_SPEED,
    SynthConfig,
    expected_gpu_hours,
    expected_quant_hours,
    noise_floor_mdape,
    synth_history,
    synth_quantization,
    synth_training,
    training_flops,
)
from tests.forecast_fixtures import HISTORY, SWIFT, job


def test_same_seed_same_history_and_columns_follow_the_contract():
    a, b = synth_training(300, seed=5), synth_training(300, seed=5)
    pd.testing.assert_frame_equal(a, b)
    assert not a.equals(synth_training(300, seed=6))
    assert list(a.columns) == ["id", *TRAINING_FEATURES, *OUTCOMES]
    assert not training_problems(a, outcomes=True).bad.any()
    q = synth_quantization(300, seed=5)
    assert set(QUANT_FEATURES) <= set(q.columns)
    assert not quant_problems(q, outcomes=True).bad.any()


def test_history_spans_sizes_variants_and_gpu_types():
    df = synth_training(3000, seed=1)
    assert df["params_b"].min() <= 0.5 and df["params_b"].max() >= 405
    assert (df["active_params_b"] < df["params_b"]).any()  # MoE models
    assert df["variant"].nunique() == 10 and df["gpu_type"].nunique() == 5
    assert set(np.log2(df["gpus"]).round(6) % 1) == {0.0}


def test_bundled_history_is_what_the_command_writes():
    train, quant, _ = synth_history(SynthConfig(seed=2026, n_training=4000, n_quantization=2000))
    assert (HISTORY / "training.csv").read_text() == train.to_csv(index=False)
    assert (HISTORY / "quantization.csv").read_text() == quant.to_csv(index=False)


def test_noise_floor_matches_monte_carlo():
    z = np.random.default_rng(0).normal(0, 0.2, 400_000)
    assert noise_floor_mdape(0.2) == pytest.approx(np.median(np.abs(np.exp(z) - 1)), abs=2e-3)


def test_ms_swift_7b_sft_costs_16_to_48_gpu_hours_on_one_a100():
    """docs/sources.md: full or LoRA SFT of 7B over ~87.5k samples takes 16-48 GPU-hours."""
    df = pd.DataFrame([job(), job(variant="full-sft", lora_rank=0, lora_targets=0)])
    hours = expected_gpu_hours(df, np.array([1, 1]))
    assert np.all((hours >= 16) & (hours <= 48))


def test_flops_follow_6nd_dpo_and_lora_ratios():
    base = job(variant="full-sft", lora_rank=0, lora_targets=0, gradient_checkpointing=0,
               packing=1, seq_len=1024, avg_tokens_per_sample=1024, n_layers=1, hidden_size=1)
    df = pd.DataFrame([base, {**base, "variant": "full-dpo"},
                       {**base, "variant": "lora-sft", "lora_rank": 1, "lora_targets": 1}])
    train, gen = training_flops(df)
    tokens = 87_500 * 1024
    assert train[0] == pytest.approx(6 * 7e9 * tokens, rel=1e-3)  # C ~ 6 N D
    assert train[1] / train[0] == pytest.approx(2.67, abs=0.05)  # DPO ~2.7x per pair
    assert train[2] / train[0] == pytest.approx(4 / 6, abs=0.01)  # LoRA: no weight gradients
    assert not gen.any()


def test_generation_dominates_rlhf_time():
    """OpenRLHF: PPO spends about 80% of its time generating samples."""
    row = job(variant="full-rlhf", lora_rank=0, lora_targets=0, avg_tokens_per_sample=500,
              rollouts_per_prompt=8, max_new_tokens=1024, reward_model_params_b=7.0,
              dataset_samples=10_000)
    df = pd.DataFrame([row])
    train, gen = training_flops(df)
    gen_time = gen / 0.025  # GEN_EFFICIENCY: decoding at 2.5% of the training MFU
    assert 0.65 <= gen_time[0] / (gen_time[0] + train[0]) <= 0.9


def test_int4_slowdown_within_ms_swift_measurements():
    swift = pd.read_csv(SWIFT)
    q = swift[(swift["table"] == "quantization") & (swift["n_gpus"] == 1)]
    bf16 = q[q["quantization"] == "bf16"].set_index("model")["samples_per_s"]
    int4 = q[q["quantization"].str.startswith("int4")]
    ratios = int4["samples_per_s"].to_numpy() / bf16.reindex(int4["model"]).to_numpy()
    ratios = ratios[np.isfinite(ratios)]
    assert ratios.min() <= INT4_SPEED <= ratios.max()


ARCH = {"qwen-1_8b-chat": (24, 2048), "qwen-7b-chat": (32, 4096), "qwen-14b-chat": (40, 5120),
        "qwen-72b-chat": (80, 8192), "chatglm3-6b": (28, 4096), "yi-6b-chat": (32, 4096),
        "yi-34b-chat": (60, 7168), "openbuddy-zephyr-7b-chat": (32, 4096),
        "baichuan2-7b-chat": (32, 4096), "baichuan2-13b-chat": (40, 5120)}
PRECISION = {"bf16": "bf16", "int4 (gptq)": "int4", "int4 (bnb)": "int4", "int8 (gptq)": "fp8"}


def test_memory_never_promises_fewer_gpus_than_ms_swift_needed():
    swift = pd.read_csv(SWIFT)
    rows = []
    for r in swift.itertuples():
        layers, hidden = ARCH[r.model]
        lora = r.sft_type == "lora"
        rows.append(job(variant=f"{r.sft_type}-sft", params_b=float(r.params_B),
                        active_params_b=float(r.params_B), n_layers=layers, hidden_size=hidden,
                        seq_len=int(r.max_length), lora_rank=8 if lora else 0,
                        lora_targets=4 if lora else 0, precision=PRECISION[r.quantization],
                        zero_stage=3))
    ours = min_training_gpus(pd.DataFrame(rows))
    ran = swift["n_gpus"].notna().to_numpy()
    assert np.all(ours[ran] >= swift["n_gpus"].to_numpy()[ran])
    assert np.all(ours[~ran] > 2)  # out of memory on their two A100s
    qlora = (swift["quantization"].str.startswith("int4") & ran).to_numpy()
    assert np.all(ours[qlora] == 1)  # a 4-bit 72B base fits one A100-80GB, as measured


def test_qlora_65b_fits_one_48gb_gpu_and_full_needs_over_780gb():
    qlora = job(variant="lora-sft", params_b=65.0, active_params_b=65.0, n_layers=80,
                hidden_size=8192, lora_rank=16, precision="int4", gpu_type="L40S-48GB")
    full = {**qlora, "variant": "full-sft", "lora_rank": 0, "lora_targets": 0,
            "precision": "bf16"}
    df = pd.DataFrame([qlora, full])
    assert min_training_gpus(df)[0] == 1
    rep, shard = training_memory_gb(df)
    assert rep[1] + shard[1] > 780


def test_quantization_timings_follow_the_papers():
    df = pd.DataFrame([
        {"params_b": 175.0, "algorithm": "gptq", "bits": 4, "gpu_type": "A100-80GB",
         "calibration_samples": 128, "calibration_seq_len": 2048},
        {"params_b": 67.0, "algorithm": "awq", "bits": 4, "gpu_type": "A100-80GB",
         "calibration_samples": 128, "calibration_seq_len": 512},
    ])
    gptq, awq = expected_quant_hours(df)
    assert 3.5 <= gptq <= 5.0  # GPTQ: 175B in ~4 hours on one A100
    assert 4.0 <= awq <= 8.0  # AutoAWQ users: 4-8x the 1-hour headline
