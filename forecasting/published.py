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
    ("AutoAWQ issue 299: Mixtral (46.7B) 4 h", 46.7, "awq", "A100-80GB", 1, 512, 4.0),
    ("AutoAWQ issue 299: 67B 8 h", 67.0, "awq", "A100-80GB", 1, 512, 8.0),
    ("AutoAWQ issue 701: 32B ~1 h on 2x H100", 32.0, "awq", "H100-80GB", 2, 512, 2.0),
    ("LLM Compressor: GPTQ of 8B ~30 min", 8.0, "gptq", "A100-80GB", 1, 2048, 0.5),
    ("LLM Compressor: AWQ of 8B ~30 min", 8.0, "awq", "A100-80GB", 1, 512, 0.5),
)


def published_frame() -> pd.DataFrame:
    """The timings as quantization rows (4-bit, 128 calibration samples) with `gpu_hours`."""
    rows = [{"source": s, "params_b": p, "algorithm": a, "bits": 4, "gpu_type": g, "gpus": n,
             "calibration_samples": 128, "calibration_seq_len": L, "gpu_hours": h}
            for s, p, a, g, n, L, h in PUBLISHED_TIMINGS]
    return pd.DataFrame(rows)
