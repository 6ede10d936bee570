"""Seeded synthetic job history, grounded in docs/sources.md.

Real job histories with all 22 features are not public, so the estimators learn
from a generator whose every constant is a published figure or arithmetic on one:

Training (GPU-hours = model FLOPs / (peak FLOP/s x MFU), plus start-up):
- FLOPs per token ~ 6 x active params for full SFT/CPT (Kaplan et al.): forward
  2N plus attention 2 x layers x hidden x context, backward twice the forward.
  LoRA skips weight gradients of the frozen base, so its backward is one forward.
  Gradient checkpointing recomputes one forward.
- DPO: policy forward+backward on chosen and rejected plus a reference forward
  on both: 16N per pair, ~2.7x SFT (docs/sources.md, derived).
- RLHF/RLVR: `rollouts_per_prompt` samples of ~0.7 x `max_new_tokens` generated
  per prompt at GEN_EFFICIENCY of the training MFU (memory-bound decoding),
  which makes generation ~80% of the time as in OpenRLHF's README; then actor
  training, a reference forward and, for RLHF, a critic trained and a reward
  model run at `reward_model_params_b`.
- MFU: a range per variant (full fine-tuning below pre-training's 38-43%, LoRA
  lower still, docs/sources.md); where a job falls in its range is a deterministic function
  of its size and sequence length, scaled by GPU type, flash attention,
  optimizer, ZeRO stage, scale-out over its GPUs, fp8 (x1.35 where the GPU has
  it) and a 4-bit base (x0.5: ms-swift's int4 LoRA runs at 0.44-0.56 of bf16,
  data/finetune_quant/). Check: a 7B SFT of 87.5k samples on one A100 costs
  16-48 GPU-hours, as ms-swift's benchmark reports (tests/test_forecast_synth.py).
- GPUs: the smallest power of two that holds the job (forecasting.memory) with
  the job's true memory off the formula by log-normal MEMORY_SIGMA.
- Noise: every job's GPU-hours are multiplied by exp(N(0, sigma)); sigma is the
  noise floor: no estimator can beat noise_floor_mdape(sigma) on this history.

Quantization (wall hours x GPUs):
- GPTQ ~1.4 GPU-minutes per billion parameters at 128 x 2048 calibration tokens
  on an A100 (GPTQ paper: 175B in ~4 hours); AWQ 4.5 minutes per billion at its
  default 128 x 512, the 4-8x of its headline that users report (AutoAWQ user
  reports, docs/sources.md); plus 10 minutes to load and save. bitsandbytes is the
  model-load time only.
- Calibration cost scales with the square root of calibration tokens; Hopper
  GPUs take 0.55x the A100 time, L40S 1.1x.
- Noise exp(N(0, quant_sigma)) and a QUANT_OUTLIER_RATE of slow runs at 2-5x
  (docs/sources.md: AQLM, vLLM W8A8 runs of many hours).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
from scipy.stats import norm

from forecasting.columns import GPUS, TRAINING_FEATURES
from forecasting.memory import min_quant_gpus, min_training_gpus

DEFAULT_SIGMA = 0.2
DEFAULT_QUANT_SIGMA = 0.25
MEMORY_SIGMA = 0.04
QUANT_OUTLIER_RATE = 0.02
GEN_EFFICIENCY = 0.025
STARTUP_HOURS = 1.0 / 6.0  # ten minutes of loading and checkpointing, on every GPU
MAX_HISTORY_GPUS = 256

# (params_b, active_params_b, n_layers, hidden_size, weight): open models 0.5B-405B.
MODELS = (
    (0.5, 0.5, 24, 896, 3), (1.5, 1.5, 28, 1536, 4), (3.0, 3.0, 36, 2048, 5),
    (7.0, 7.0, 32, 4096, 12), (8.0, 8.0, 32, 4096, 14), (13.0, 13.0, 40, 5120, 5),
    (14.0, 14.0, 48, 5120, 6), (32.0, 32.0, 64, 5120, 6), (34.0, 34.0, 60, 7168, 2),
    (70.0, 70.0, 80, 8192, 9), (72.0, 72.0, 80, 8192, 4), (405.0, 405.0, 126, 16384, 2),
    (30.5, 3.3, 48, 2048, 4), (46.7, 12.9, 32, 4096, 3), (141.0, 39.0, 56, 6144, 1),
    (235.0, 22.0, 94, 4096, 2),
)
VARIANT_WEIGHTS = {
    "lora-sft": 20, "full-sft": 14, "lora-dpo": 9, "full-dpo": 7, "lora-cpt": 5,
    "full-cpt": 7, "lora-rlhf": 6, "full-rlhf": 6, "lora-rlvr": 7, "full-rlvr": 8,
}
GPU_WEIGHTS = {"A100-40GB": 10, "A100-80GB": 30, "H100-80GB": 30, "H200-141GB": 15,
               "L40S-48GB": 15}
# MFU range (low, high) per variant, against the bf16 peak.
MFU_RANGE = {
    "full-cpt": (0.34, 0.46), "full-sft": (0.30, 0.42), "full-dpo": (0.28, 0.40),
    "full-rlhf": (0.26, 0.38), "full-rlvr": (0.26, 0.38),
    "lora-cpt": (0.24, 0.36), "lora-sft": (0.22, 0.34), "lora-dpo": (0.20, 0.32),
    "lora-rlhf": (0.18, 0.30), "lora-rlvr": (0.18, 0.30),
}
GPU_MFU = {"A100-40GB": 1.0, "A100-80GB": 1.0, "H100-80GB": 0.8, "H200-141GB": 0.85,
           "L40S-48GB": 0.9}
SCALE_OUT_LOSS = {"A100-40GB": 0.03, "A100-80GB": 0.03, "H100-80GB": 0.03,
                  "H200-141GB": 0.03, "L40S-48GB": 0.07}  # per doubling; L40S is PCIe
OPTIMIZER_MFU = {"adamw": 1.0, "adamw-8bit": 0.97, "adafactor": 0.95}
ZERO_MFU = {0: 1.0, 1: 0.99, 2: 0.97, 3: 0.9}
FP8_SPEEDUP = 1.35
INT4_SPEED = 0.5
GEN_FRACTION = 0.7  # generated length over max_new_tokens, on average

# Quantization: GPU-minutes per billion parameters on an A100, and fixed minutes.
QUANT_MIN_PER_B = {"gptq": 1.4, "awq": 4.5}
QUANT_FIXED_MIN = 10.0
# The calibration those rates were reported at: GPTQ paper 128 x 2048, AutoAWQ's default 128 x 512.
QUANT_CALIB_REF = {"gptq": 128 * 2048, "awq": 128 * 512}
QUANT_GPU_SPEED = {"A100-40GB": 1.0, "A100-80GB": 1.0, "H100-80GB": 0.55,
                   "H200-141GB": 0.5, "L40S-48GB": 1.1}
LOAD_GB_PER_S = 2.0  # checkpoint read for bitsandbytes' load-time quantisation


@dataclass(frozen=True)
class SynthConfig:
    """Everything that decides a generated history; written beside it as meta.json."""

    seed: int = 0
    n_training: int = 3000
    n_quantization: int = 1500
    sigma: float = DEFAULT_SIGMA
    quant_sigma: float = DEFAULT_QUANT_SIGMA
    memory_sigma: float = MEMORY_SIGMA


def noise_floor_mdape(sigma: float) -> float:
    """MdAPE of a perfect median forecast under exp(N(0, sigma)) noise: the m with
    P(log(1-m) <= sigma Z <= log(1+m)) = 1/2, by bisection."""
    lo, hi = 0.0, 0.999
    for _ in range(60):
        m = (lo + hi) / 2
        p = norm.cdf(math.log1p(m) / sigma) - norm.cdf(math.log1p(-m) / sigma)
        lo, hi = (m, hi) if p < 0.5 else (lo, m)
    return (lo + hi) / 2


def training_flops(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(training FLOPs, generation FLOPs) per job: the generator's ground truth."""
    v = df["variant"].astype(str)
    lora = v.str.startswith("lora").to_numpy()
    dpo = v.str.endswith("dpo").to_numpy()
    rlhf = v.str.endswith("rlhf").to_numpy()
    rl = rlhf | v.str.endswith("rlvr").to_numpy()
    na = df["active_params_b"].to_numpy(float) * 1e9
    r = df["reward_model_params_b"].to_numpy(float) * 1e9
    layers = df["n_layers"].to_numpy(float)
    hidden = df["hidden_size"].to_numpy(float)
    seq = df["seq_len"].to_numpy(float)
    avg = np.minimum(df["avg_tokens_per_sample"].to_numpy(float), seq)
    packing = df["packing"].to_numpy(int) == 1
    samples = df["dataset_samples"].to_numpy(float) * df["epochs"].to_numpy(float)
    rollouts = df["rollouts_per_prompt"].to_numpy(float)
    gen_len = GEN_FRACTION * df["max_new_tokens"].to_numpy(float)
    # Without packing a micro-batch is padded to its longest sample.
    length = np.where(packing | rl, avg, np.minimum(seq, 1.25 * avg))
    length = np.where(rl, np.minimum(seq, avg + gen_len), length)
    context = np.where(packing, seq, length)
    fwd = 2.0 * na + 2.0 * layers * hidden * context  # per token
    adapters = (df["lora_rank"].to_numpy(float) * df["lora_targets"].to_numpy(float)
                * layers * 2.0 * hidden)
    train = np.where(lora, 2.0 * fwd + 6.0 * adapters, 3.0 * fwd)
    train = train + fwd * (df["gradient_checkpointing"].to_numpy(int) == 1)
    tokens = samples * length
    per_token = np.where(dpo, 2.0 * train + 2.0 * fwd, train)
    per_token = np.where(rl, train + fwd + rlhf * (8.0 * r + 2.0 * r), per_token)
    tokens = np.where(rl, tokens * rollouts, tokens)
    gen = np.where(rl, samples * rollouts * gen_len * 2.0 * na, 0.0)
    return tokens * per_token, gen


def training_mfu(df: pd.DataFrame, gpus: np.ndarray) -> np.ndarray:
    """Deterministic MFU per job (against the bf16 peak): see the module docstring."""
    v = df["variant"].astype(str)
    lo = v.map(lambda x: MFU_RANGE[x][0]).to_numpy(float)
    hi = v.map(lambda x: MFU_RANGE[x][1]).to_numpy(float)
    size = np.clip(np.log(df["active_params_b"].to_numpy(float) / 0.5) / math.log(810), 0, 1)
    length = np.clip(np.log2(df["avg_tokens_per_sample"].to_numpy(float) / 256) / 7, 0, 1)
    mfu = lo + (hi - lo) * (0.6 * size + 0.4 * length)
    gpu = df["gpu_type"].astype(str)
    mfu = mfu * gpu.map(GPU_MFU).to_numpy(float)
    mfu = mfu * np.where(df["flash_attention"].to_numpy(int) == 1, 1.0, 0.75)
    mfu = mfu * df["optimizer"].astype(str).map(OPTIMIZER_MFU).to_numpy(float)
    mfu = mfu * df["zero_stage"].map(ZERO_MFU).to_numpy(float)
    mfu = mfu * (1.0 - gpu.map(SCALE_OUT_LOSS).to_numpy(float) * np.log2(np.maximum(gpus, 1)))
    prec = df["precision"].astype(str).to_numpy()
    has_fp8 = gpu.map(lambda g: GPUS[g].fp8_tflops > GPUS[g].bf16_tflops).to_numpy(bool)
    mfu = mfu * np.where((prec == "fp8") & has_fp8, FP8_SPEEDUP, 1.0)
    return mfu * np.where(prec == "int4", INT4_SPEED, 1.0)


def expected_gpu_hours(df: pd.DataFrame, gpus: np.ndarray) -> np.ndarray:
    """Noise-free GPU-hours of each job on `gpus` GPUs."""
    train, gen = training_flops(df)
    peak = df["gpu_type"].astype(str).map(lambda g: GPUS[g].bf16_tflops).to_numpy(float) * 1e12
    mfu = training_mfu(df, gpus)
    seconds = train / (peak * mfu) + gen / (peak * mfu * GEN_EFFICIENCY)
    return seconds / 3600.0 + STARTUP_HOURS * gpus


def _choice(rng: np.random.Generator, weights: dict, n: int) -> np.ndarray:
    keys = list(weights)
    p = np.array([weights[k] for k in keys], float)
    return np.array(keys, dtype=object)[rng.choice(len(keys), size=n, p=p / p.sum())]


def _candidate_jobs(rng: np.random.Generator, n: int) -> pd.DataFrame:
    """Draw n job configurations (some will not fit and are redrawn by the caller)."""
    models = np.array([m[:4] for m in MODELS], float)
    w = np.array([m[4] for m in MODELS], float)
    m = models[rng.choice(len(MODELS), size=n, p=w / w.sum())]
    variant = _choice(rng, VARIANT_WEIGHTS, n)
    kind = np.array([x.split("-")[1] for x in variant])
    lora = np.array([x.startswith("lora") for x in variant])
    rl = np.isin(kind, ["rlhf", "rlvr"])
    gpu = _choice(rng, GPU_WEIGHTS, n)
    hopper_like = np.isin(gpu, ["H100-80GB", "H200-141GB", "L40S-48GB"])
    u = rng.random(n)
    precision = np.where(lora & (u < 0.2), "int4",
                         np.where(hopper_like & (u > 0.8), "fp8", "bf16"))
    seq = rng.choice([1024, 2048, 4096, 8192, 16384, 32768], size=n,
                     p=[0.1, 0.3, 0.3, 0.2, 0.07, 0.03])
    frac = np.where(kind == "cpt", rng.uniform(0.6, 1.0, n),
                    np.where(kind == "dpo", rng.uniform(0.2, 0.6, n), rng.uniform(0.15, 0.8, n)))
    avg = np.where(rl, rng.uniform(100, 1000, n), frac * seq)
    avg = np.maximum(np.round(np.minimum(avg, seq)), 32)
    log_lo = {"sft": 3.0, "cpt": 4.0, "dpo": 3.5, "rlhf": 3.0, "rlvr": 3.0}
    log_hi = {"sft": 5.5, "cpt": 6.0, "dpo": 5.0, "rlhf": 4.5, "rlvr": 4.7}
    lo = np.array([log_lo[k] for k in kind])
    hi = np.array([log_hi[k] for k in kind])
    samples = np.round(10 ** rng.uniform(lo, hi))
    epochs = np.where(kind == "cpt", rng.choice([0.5, 1.0], n),
                      np.where(rl, 1.0, rng.choice([1.0, 2.0, 3.0], n)))
    max_new = np.where(rl, rng.choice([256, 512, 1024, 2048], n), 0)
    rollouts = np.where(rl, rng.choice([4, 8, 16], n), 0)
    reward = np.where(kind == "rlhf", np.minimum(m[:, 0], rng.choice([1.5, 7.0, 8.0, 70.0], n)), 0)
    big = m[:, 0] >= 30
    zero_full = rng.choice([0, 1, 2, 3], n, p=[0.1, 0.1, 0.3, 0.5])
    zero_lora = rng.choice([0, 2, 3], n, p=[0.5, 0.2, 0.3])
    return pd.DataFrame({
        "variant": variant, "params_b": m[:, 0], "active_params_b": m[:, 1],
        "n_layers": m[:, 2].astype(int), "hidden_size": m[:, 3].astype(int),
        "seq_len": seq, "dataset_samples": samples.astype(int),
        "avg_tokens_per_sample": avg.astype(int), "epochs": epochs,
        "global_batch_size": rng.choice([16, 32, 64, 128, 256, 512], n),
        "lora_rank": np.where(lora, rng.choice([8, 16, 32, 64, 128], n), 0),
        "lora_targets": np.where(lora, rng.choice([2, 4, 7], n), 0),
        "precision": precision, "gpu_type": gpu,
        "gradient_checkpointing": np.where(big | (rng.random(n) < 0.8), 1, 0),
        "optimizer": _choice(rng, {"adamw": 7, "adamw-8bit": 2, "adafactor": 1}, n),
        "zero_stage": np.where(lora, zero_lora, zero_full),
        "flash_attention": (rng.random(n) < 0.9).astype(int),
        "packing": np.where(np.isin(kind, ["sft", "cpt"]) & (rng.random(n) < 0.5), 1, 0),
        "rollouts_per_prompt": rollouts, "max_new_tokens": max_new,
        "reward_model_params_b": reward,
    })


def synth_training(n: int, *, seed: int = 0, sigma: float = DEFAULT_SIGMA,
                   memory_sigma: float = MEMORY_SIGMA) -> pd.DataFrame:
    """n training jobs with outcomes `gpus` and `gpu_hours`, in FORECASTING.md's columns.

    memory_sigma bounds GPU-count accuracy: the noise-free memory formula itself gets
    about 94% of counts right at the default 0.04 (docs/estimators.md)."""
    rng = np.random.default_rng(seed)
    if n == 0:
        return pd.DataFrame(columns=["id", *TRAINING_FEATURES, "gpus", "gpu_hours"])
    parts, have = [], 0
    while have < n:
        cand = _candidate_jobs(rng, 2 * (n - have) + 16)
        # A job that does not fit at its ZeRO stage is run at ZeRO-3, as users do.
        scale = np.exp(rng.normal(0.0, memory_sigma, len(cand)))
        gpus = min_training_gpus(cand, scale)
        cand.loc[gpus == 0, "zero_stage"] = 3
        gpus = min_training_gpus(cand, scale)
        cand["gpus"] = gpus
        # It ran, so it fit; keep only jobs that the published formula says fit too.
        keep = (gpus >= 1) & (gpus <= MAX_HISTORY_GPUS) & (min_training_gpus(cand) > 0)
        parts.append(cand[keep])
        have += int(keep.sum())
    df = pd.concat(parts, ignore_index=True).iloc[:n].copy()
    gpus = df["gpus"].to_numpy()
    hours = expected_gpu_hours(df, gpus) * np.exp(rng.normal(0.0, sigma, n))
    df["gpu_hours"] = np.round(hours, 4)
    df.insert(0, "id", [f"train-{i:05d}" for i in range(n)])
    return df[["id", *TRAINING_FEATURES, "gpus", "gpu_hours"]]


def expected_quant_hours(df: pd.DataFrame) -> np.ndarray:
    """Noise-free wall hours of each quantization job (see the module docstring)."""
    n = df["params_b"].to_numpy(float)
    algo = df["algorithm"].astype(str).to_numpy()
    tokens = df["calibration_samples"].to_numpy(float) * df["calibration_seq_len"].to_numpy(float)
    ref = np.where(algo == "gptq", QUANT_CALIB_REF["gptq"], QUANT_CALIB_REF["awq"])
    calib = np.sqrt(np.maximum(tokens, 1.0) / ref)
    rate = np.where(algo == "gptq", QUANT_MIN_PER_B["gptq"], QUANT_MIN_PER_B["awq"])
    speed = df["gpu_type"].astype(str).map(QUANT_GPU_SPEED).to_numpy(float)
    minutes = QUANT_FIXED_MIN + rate * n * calib * speed
    load = n * 2.0 / LOAD_GB_PER_S / 60.0 + 2.0
    return np.where(algo == "bitsandbytes", load, minutes) / 60.0


def synth_quantization(n: int, *, seed: int = 0,
                       sigma: float = DEFAULT_QUANT_SIGMA) -> pd.DataFrame:
    """n quantization jobs with outcomes `gpus` and `gpu_hours`."""
    rng = np.random.default_rng(seed + 1_000_003)
    sizes = np.array([m[0] for m in MODELS], float)
    w = np.array([m[4] for m in MODELS], float)
    params = sizes[rng.choice(len(sizes), size=n, p=w / w.sum())]
    algo = _choice(rng, {"awq": 4, "gptq": 4, "bitsandbytes": 2}, n)
    bits = np.where(algo == "awq", 4, rng.choice([4, 8], n, p=[0.7, 0.3]))
    calib = algo != "bitsandbytes"
    df = pd.DataFrame({
        "params_b": params, "algorithm": algo, "bits": bits,
        "gpu_type": _choice(rng, GPU_WEIGHTS, n),
        "calibration_samples": np.where(calib, rng.choice([128, 256, 512], n, p=[.6, .2, .2]), 0),
        "calibration_seq_len": np.where(
            calib, np.where(algo == "awq", rng.choice([512, 2048, 4096], n, p=[.6, .3, .1]),
                            rng.choice([512, 2048, 4096], n, p=[.2, .6, .2])), 0),
    })
    gpus = min_quant_gpus(df)
    noise = np.exp(rng.normal(0.0, sigma, n))
    noise = noise * np.where(rng.random(n) < QUANT_OUTLIER_RATE, rng.uniform(2, 5, n), 1.0)
    df["gpus"] = gpus
    df["gpu_hours"] = np.round(expected_quant_hours(df) * gpus * noise, 4)
    df.insert(0, "id", [f"quant-{i:05d}" for i in range(n)])
    return df


def synth_history(config: SynthConfig) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """(training history, quantization history, meta.json text) for one configuration."""
    train = synth_training(config.n_training, seed=config.seed, sigma=config.sigma,
                           memory_sigma=config.memory_sigma)
    quant = synth_quantization(config.n_quantization, seed=config.seed, sigma=config.quant_sigma)
    meta = {**asdict(config), "generator": "forecasting.synth",
            "noise_floor_mdape": round(noise_floor_mdape(config.sigma), 4)}
    return train, quant, json.dumps(meta, indent=2) + "\n"


def synth_queue(n: int, *, seed: int = 0) -> pd.DataFrame:
    """A queue of n jobs in FORECASTING.md's queue format: about half training, a quarter
    each quantization and batch inference; one training job in ten asks for twice the
    GPUs it needs. Columns a row's kind does not use are left blank."""
    rng = np.random.default_rng(seed + 2_000_003)
    kinds = rng.choice(["training", "quantization", "batch_inference"], n, p=[0.5, 0.25, 0.25])
    n_t, n_q = int((kinds == "training").sum()), int((kinds == "quantization").sum())
    n_b = n - n_t - n_q
    train = synth_training(n_t, seed=seed + 11).drop(columns=["id", "gpu_hours"])
    asks = rng.random(n_t) < 0.1
    train["gpus"] = np.where(asks, train["gpus"] * 2, np.nan)
    quant = synth_quantization(n_q, seed=seed + 13).drop(columns=["id", "gpu_hours", "gpus"])
    sizes = np.array([m[0] for m in MODELS if m[0] == m[1]], float)
    batch = pd.DataFrame({
        "params_b": rng.choice(sizes, n_b), "gpu_type": _choice(rng, GPU_WEIGHTS, n_b),
        "requests": np.round(10 ** rng.uniform(3, 6, n_b)).astype(int),
        "avg_input_tokens": np.round(rng.uniform(200, 4000, n_b)).astype(int),
        "avg_output_tokens": np.round(rng.uniform(50, 1000, n_b)).astype(int),
    })
    parts = {"training": train, "quantization": quant, "batch_inference": batch}
    rows = pd.concat([parts[k].assign(kind=k) for k in parts], ignore_index=True)
    order = np.concatenate([np.flatnonzero(kinds == k) for k in parts])
    rows.index = order
    rows = rows.sort_index()
    rows.insert(0, "id", [f"job-{i:05d}" for i in range(n)])
    rows.insert(2, "priority", rng.choice([1, 2, 3, 5, 8, 10], n))
    rows.insert(3, "arrival_step", rng.integers(0, 24, n))
    cols = ["id", "kind", "priority", "arrival_step", *TRAINING_FEATURES, "algorithm", "bits",
            "calibration_samples", "calibration_seq_len", "requests", "avg_input_tokens",
            "avg_output_tokens", "gpus"]
    for col in ("dataset_samples", "n_layers", "hidden_size", "seq_len", "global_batch_size",
                "lora_rank", "lora_targets", "gradient_checkpointing", "zero_stage",
                "flash_attention", "packing", "rollouts_per_prompt", "max_new_tokens", "bits",
                "calibration_samples", "calibration_seq_len", "requests", "avg_input_tokens",
                "avg_output_tokens", "avg_tokens_per_sample", "gpus"):
        rows[col] = rows[col].astype("Int64")
    return rows[cols].reset_index(drop=True)
