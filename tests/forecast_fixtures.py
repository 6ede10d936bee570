"""Shared helpers for the estimator tests: small seeded histories, a CLI runner."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pandas as pd
import typer

from forecasting.columns import TRAINING_FEATURES
from pipelines.commands_forecast import register

ROOT = Path(__file__).resolve().parents[1]
HISTORY = ROOT / "data" / "history"
QUEUE = ROOT / "data" / "queue" / "sample_queue.csv"
MODELS = ROOT / "models"
SWIFT = ROOT / "data" / "finetune_quant" / "ms_swift_sft_speed_memory_a100.csv"


def forecast_app() -> typer.Typer:
    """A typer app with only this area's commands (independent of other areas' modules)."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    register(app)
    return app


@cache
def training_history(n: int = 1600, seed: int = 11) -> pd.DataFrame:
    from forecasting.synth import synth_training

    return synth_training(n, seed=seed)


@cache
def quant_history(n: int = 1200, seed: int = 11) -> pd.DataFrame:
    from forecasting.synth import synth_quantization

    return synth_quantization(n, seed=seed)


def features(df: pd.DataFrame) -> pd.DataFrame:
    return df[list(TRAINING_FEATURES)]


def job(**overrides) -> dict:
    """One training job's 22 features: a LoRA SFT of a 7B model on one A100-80GB."""
    row = dict(variant="lora-sft", params_b=7.0, active_params_b=7.0, n_layers=32,
               hidden_size=4096, seq_len=2048, dataset_samples=87_500,
               avg_tokens_per_sample=1024, epochs=1.0, global_batch_size=16, lora_rank=8,
               lora_targets=4, precision="bf16", gpu_type="A100-80GB",
               gradient_checkpointing=1, optimizer="adamw", zero_stage=0, flash_attention=1,
               packing=0, rollouts_per_prompt=0, max_new_tokens=0, reward_model_params_b=0.0)
    row.update(overrides)
    return row
