"""The fixed column names and categories of FORECASTING.md.

One place for names and allowed values, so that the generator, the loaders and
the estimators cannot drift apart from the contract or from each other.
"""

from __future__ import annotations

from forecasting.gpu_catalog import GPU, GPUS  # noqa: F401 (re-exported)

VARIANTS = (
    "full-sft", "full-dpo", "full-rlhf", "full-rlvr", "full-cpt",
    "lora-sft", "lora-dpo", "lora-rlhf", "lora-rlvr", "lora-cpt",
)
PRECISIONS = ("bf16", "fp8", "int4")
# The synthetic history's GPU types, and LightGBM's fixed categories. Any type of the
# GPU catalogue (forecasting.gpu_catalog: data/gpu_catalog.csv plus the user's own) is valid.
GPU_TYPES = ("A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB", "L40S-48GB")
OPTIMIZERS = ("adamw", "adamw-8bit", "adafactor")
ALGORITHMS = ("bitsandbytes", "awq", "gptq")
KINDS = ("training", "quantization", "batch_inference")

# The 22 training features, in FORECASTING.md's order.
TRAINING_FEATURES = (
    "variant", "params_b", "active_params_b", "n_layers", "hidden_size", "seq_len",
    "dataset_samples", "avg_tokens_per_sample", "epochs", "global_batch_size",
    "lora_rank", "lora_targets", "precision", "gpu_type", "gradient_checkpointing",
    "optimizer", "zero_stage", "flash_attention", "packing", "rollouts_per_prompt",
    "max_new_tokens", "reward_model_params_b",
)
TRAINING_CATEGORICAL = {
    "variant": VARIANTS, "precision": PRECISIONS, "gpu_type": GPU_TYPES,
    "optimizer": OPTIMIZERS,
}
# 0/1 flags and small integer codes: checked for their allowed values.
TRAINING_CHOICES = {
    "gradient_checkpointing": (0, 1), "flash_attention": (0, 1), "packing": (0, 1),
    "zero_stage": (0, 1, 2, 3),
}
# Must be > 0; every other numeric feature must be >= 0.
TRAINING_POSITIVE = (
    "params_b", "active_params_b", "n_layers", "hidden_size", "seq_len",
    "dataset_samples", "avg_tokens_per_sample", "epochs", "global_batch_size",
)

QUANT_FEATURES = ("params_b", "algorithm", "bits", "gpu_type")
QUANT_OPTIONAL = ("calibration_samples", "calibration_seq_len")
QUANT_DEFAULTS = {"calibration_samples": 128, "calibration_seq_len": 2048}
QUANT_BITS = (4, 8)

BATCH_FEATURES = ("params_b", "gpu_type", "requests", "avg_input_tokens", "avg_output_tokens")

OUTCOMES = ("gpus", "gpu_hours")
SCORED = ("gpus", "duration_steps", "gpu_hours_p50", "gpu_hours_p90")
QUEUE_REQUIRED = ("id", "kind", "priority")
