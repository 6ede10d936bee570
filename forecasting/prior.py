"""The physics prior of training cost: GPU-hours from FLOPs, the GPU's peak and a prior MFU.

GPU-hours = train FLOPs / (peak x MFU) + generated FLOPs / (peak x MFU x GEN_EFFICIENCY)
          + micro-steps x STEP_SECONDS_PER_B x active params (B), + start-up per GPU,
with the FLOPs of forecasting.synth.training_flops (6N per token for full fine-tuning,
4N for LoRA, whose frozen base gets no weight gradients, one more forward under
gradient checkpointing; DPO, RL generation and critics as documented there), peak the
GPU's dense bf16 peak from the catalogue, and MFU a constant per method (full, LoRA)
times x1.35 for fp8 where the GPU has it, x0.75 without flash
attention, less SCALE_OUT_LOSS per doubling of GPUs. The per-step term is what short
unpacked samples at micro-batch 1 pay whatever their FLOPs (kernel launches, optimizer
and data handling): one micro-step per sample unpacked, per seq_len tokens packed. A
4-bit base and ZeRO-3 add their own per-step cost (dequantising, gathering the
weights): Qwen's profile shows Q-LoRA 2.5x slower than LoRA at 256 tokens and as fast
at 8192, a per-step cost, not a lower MFU.

The constants were set on the calibration half of the real runs (benchmarks/real_runs.py,
`python -m benchmarks.real_runs --calibrate`), never on the report half. The
estimator learns the log-residual over this prior, so a job outside its history
(a new size, packing, a new GPU type) falls back to the physics rather than to the
nearest leaf of a tree.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecasting.gpu_catalog import GPUS

# Set by `python -m benchmarks.real_runs --calibrate` on the calibration runs.
MFU_FULL = 0.3499
MFU_LORA = 0.6254
STEP_SECONDS_PER_B = 0.0287  # every micro-step, per billion active parameters
INT4_STEP_SECONDS_PER_B = 0.0087  # dequantising a 4-bit base, every micro-step
ZERO3_STEP_SECONDS_PER_B = 0.0029  # gathering ZeRO-3 shards, every micro-step
CONSTANTS = ("MFU_FULL", "MFU_LORA", "STEP_SECONDS_PER_B", "INT4_STEP_SECONDS_PER_B",
             "ZERO3_STEP_SECONDS_PER_B")
FP8_SPEEDUP = 1.35
NO_FLASH = 0.75
GEN_EFFICIENCY = 0.025
SCALE_OUT_LOSS = 0.03
STARTUP_HOURS = 1.0 / 6.0
A100_TFLOPS = 312.0


def prior_mfu(frame: pd.DataFrame, gpus: np.ndarray, mfu_full: float = MFU_FULL,
              mfu_lora: float = MFU_LORA) -> np.ndarray:
    """MFU against the bf16 peak, per job."""
    lora = frame["variant"].astype(str).str.startswith("lora").to_numpy()
    mfu = np.where(lora, mfu_lora, mfu_full)
    prec = frame["precision"].astype(str).to_numpy()
    gpu = frame["gpu_type"].astype(str)
    bf16 = gpu.map(lambda g: GPUS[g].bf16_tflops).to_numpy(float)
    fp8 = gpu.map(lambda g: GPUS[g].fp8_tflops).to_numpy(float)
    mfu = mfu * np.where((prec == "fp8") & (fp8 > bf16), FP8_SPEEDUP, 1.0)
    mfu = mfu * np.where(frame["flash_attention"].to_numpy(int) == 1, 1.0, NO_FLASH)
    return mfu * (1.0 - SCALE_OUT_LOSS * np.log2(np.maximum(gpus, 1)))


def micro_steps(frame: pd.DataFrame) -> np.ndarray:
    """Forward/backward calls: one per sample (per rollout in RL) unpacked, one per
    seq_len tokens packed."""
    samples = frame["dataset_samples"].to_numpy(float) * frame["epochs"].to_numpy(float)
    avg = np.minimum(frame["avg_tokens_per_sample"], frame["seq_len"]).to_numpy(float)
    packed = samples * avg / frame["seq_len"].to_numpy(float)
    steps = np.where(frame["packing"].to_numpy(int) == 1, np.ceil(packed), samples)
    return steps * np.maximum(frame["rollouts_per_prompt"].to_numpy(float), 1.0)


def prior_log_hours(frame: pd.DataFrame, gpus: np.ndarray, constants: dict | None = None
                    ) -> np.ndarray:
    """log GPU-hours of each job on `gpus` GPUs under the prior (`constants` overrides
    the module's, by name: what the calibration searches over)."""
    from forecasting.synth import training_flops  # the published FLOPs rules, one copy

    c = {name: globals()[name] for name in CONSTANTS} | (constants or {})
    train, gen = training_flops(frame)
    peak = frame["gpu_type"].astype(str).map(lambda g: GPUS[g].bf16_tflops)
    peak = peak.to_numpy(float) * 1e12
    mfu = prior_mfu(frame, np.asarray(gpus, float), c["MFU_FULL"], c["MFU_LORA"])
    seconds = train / (peak * mfu) + gen / (peak * mfu * GEN_EFFICIENCY)
    # The per-step terms were measured on A100s: faster GPUs shorten them in proportion.
    per_step = (c["STEP_SECONDS_PER_B"]
                + c["INT4_STEP_SECONDS_PER_B"] * (frame["precision"].astype(str) == "int4")
                + c["ZERO3_STEP_SECONDS_PER_B"] * (frame["zero_stage"] == 3)).to_numpy(float)
    seconds = seconds + micro_steps(frame) * per_step * \
        frame["active_params_b"].to_numpy(float) * (A100_TFLOPS * 1e12 / peak)
    return np.log(seconds / 3600.0 + STARTUP_HOURS * np.maximum(gpus, 1))
