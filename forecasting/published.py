"""Published quantization timings (docs/sources.md), as rows the estimator can score.

Each is a real run or claim; the reservation must never fall below it. Where a
source names no GPU, the row uses an A100-80GB, the GPTQ paper's reference GPU.
"""

from __future__ import annotations

import pandas as pd

PUBLISHED_TIMINGS = (
    # (source, params_b, algorithm, gpu_type, gpus, calibration_seq_len, GPU-hours)
    ("GPTQ paper: 175B in ~4 h on one A100", 175.0, "gptq", "A100-80GB", 1, 2048, 4.0),
    ("AutoAWQ README: 70B in ~1 h", 70.0, "awq", "A100-80GB", 1, 512, 1.0),
    ("AutoAWQ user report: Mixtral (46.7B) 4 h", 46.7, "awq", "A100-80GB", 1, 512, 4.0),
    ("AutoAWQ user report: 67B 8 h", 67.0, "awq", "A100-80GB", 1, 512, 8.0),
    ("AutoAWQ user report: 32B ~1 h on 2x H100", 32.0, "awq", "H100-80GB", 2, 512, 2.0),
    ("LLM Compressor: GPTQ of 8B ~30 min", 8.0, "gptq", "A100-80GB", 1, 2048, 0.5),
    ("LLM Compressor: AWQ of 8B ~30 min", 8.0, "awq", "A100-80GB", 1, 512, 0.5),
)


def published_frame() -> pd.DataFrame:
    """The timings as quantization rows (4-bit, 128 calibration samples) with `gpu_hours`."""
    rows = [{"source": s, "params_b": p, "algorithm": a, "bits": 4, "gpu_type": g, "gpus": n,
             "calibration_samples": 128, "calibration_seq_len": L, "gpu_hours": h}
            for s, p, a, g, n, L, h in PUBLISHED_TIMINGS]
    return pd.DataFrame(rows)


# Published vLLM output throughputs (tokens/s, one GPU, bf16), as collected on
# https://www.morphllm.com/vllm-benchmarks (third-party benchmarks of 2025-2026). A
# job of 1,000 requests x 1,000 output tokens and no prompt at that rate is the
# fastest the published run allows; the reservation (p90) must not fall below it.
# The page's Llama 3.1 70B on one H100 ran FP8 weights, which the batch-inference
# columns cannot state (no precision), so it is not checked.
PUBLISHED_BATCH = (
    # (source, params_b, gpu_type, output tokens/s)
    ("Llama 3.1 8B (bf16), 1x H100 80GB: ~12,500 tok/s", 8.03, "H100-80GB", 12500.0),
    ("DeepSeek-R1-Distill-Qwen-7B, 1x A100 80GB: 3,363 tok/s", 7.62, "A100-80GB", 3363.0),
    ("DeepSeek-R1-Distill-Qwen-14B, 1x A100 80GB: 3,004 tok/s", 14.77, "A100-80GB", 3004.0),
    ("DeepSeek-R1-Distill-Qwen-32B, 1x A100 80GB: 577 tok/s", 32.76, "A100-80GB", 577.0),
)
BATCH_REQUESTS, BATCH_OUTPUT_TOKENS = 1000, 1000


def published_batch_frame() -> pd.DataFrame:
    """The throughputs as batch-inference rows on one GPU, with the published GPU-hours."""
    return pd.DataFrame([
        {"source": s, "params_b": p, "gpu_type": g, "gpus": 1, "requests": BATCH_REQUESTS,
         "avg_input_tokens": 0, "avg_output_tokens": BATCH_OUTPUT_TOKENS,
         "gpu_hours": BATCH_REQUESTS * BATCH_OUTPUT_TOKENS / rate / 3600.0}
        for s, p, g, rate in PUBLISHED_BATCH])


def batch_table() -> pd.DataFrame:
    """Published batch-inference GPU-hours against the estimate (`python -m
    forecasting.published`)."""
    from forecasting.batch_inference import estimate_batch

    df = published_batch_frame()
    e = estimate_batch(df)
    return pd.DataFrame({"source": df["source"], "published_gpu_h": df["gpu_hours"].round(3),
                         "p50_gpu_h": e["gpu_hours_p50"].round(3),
                         "reserved_p90_gpu_h": e["gpu_hours_p90"].round(3)})


if __name__ == "__main__":
    from forecasting.tables import markdown

    print(markdown(batch_table()))
