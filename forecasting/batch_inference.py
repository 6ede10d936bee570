"""Batch-inference cost: a throughput estimate, no learned model (FORECASTING.md).

GPU-seconds = prompt tokens x 2N / (peak x PREFILL_MFU)
            + generated tokens x 2N / (peak x DECODE_MFU)
with N the parameter count and peak the GPU's dense bf16 FLOP/s. Prefill is
compute-bound (large matrix products); decoding even at large batch stays partly
memory-bound, hence the lower utilisation. For a 7B model on one A100 that is
~3,300 output tokens/s and for a 70B on four A100s ~1,300 tokens/s: the range
vLLM reports for offline batches. Tensor parallelism over g GPUs loses
TP_LOSS per doubling. Every job also pays LOAD_HOURS of model loading per GPU.
p90 = p50 x P90_FACTOR: output lengths and batch fill vary, which no throughput
figure captures.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecasting.columns import GPUS
from forecasting.memory import min_inference_gpus

PREFILL_MFU = 0.40
DECODE_MFU = 0.15
TP_LOSS = 0.05
LOAD_HOURS = 0.1
P90_FACTOR = 1.5


def estimate_batch(df: pd.DataFrame) -> pd.DataFrame:
    """`gpus`, `gpu_hours_p50`, `gpu_hours_p90` per batch-inference row (rows already checked).

    A row's own `gpus` (> 0) is kept; otherwise the smallest power of two holding the
    bf16 weights plus KV cache (0 if none does)."""
    n = df["params_b"].to_numpy(float) * 1e9
    gpus = min_inference_gpus(df)
    if "gpus" in df.columns:
        asked = pd.to_numeric(df["gpus"], errors="coerce").fillna(0).to_numpy()
        gpus = np.where(asked > 0, asked, gpus).astype(np.int64)
    peak = df["gpu_type"].astype(str).map(lambda g: GPUS[g].bf16_tflops).to_numpy(float) * 1e12
    requests = df["requests"].to_numpy(float)
    prefill = requests * df["avg_input_tokens"].to_numpy(float) * 2.0 * n / (peak * PREFILL_MFU)
    decode = requests * df["avg_output_tokens"].to_numpy(float) * 2.0 * n / (peak * DECODE_MFU)
    g = np.maximum(gpus, 1)
    efficiency = 1.0 - TP_LOSS * np.log2(g)
    hours = (prefill + decode) / efficiency / 3600.0 + LOAD_HOURS * g
    return pd.DataFrame({"gpus": gpus, "gpu_hours_p50": hours,
                         "gpu_hours_p90": hours * P90_FACTOR}, index=df.index)
