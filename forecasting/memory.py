"""GPU memory per job, and the smallest power-of-two GPU count that holds it.

The contract asks for "the smallest power of two that fits its memory", so the
count is arithmetic on published bytes-per-parameter figures (ZeRO paper: 16
bytes/parameter for mixed-precision Adam; QLoRA: a 4-bit base) plus activations.
The generator uses these same formulas as its ground truth (with per-job noise)
and the estimator calibrates one scale factor on them from history.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecasting.columns import GPUS

MAX_GPUS = 1024
USABLE_FRACTION = 0.92  # allocator fragmentation and workspace
RESERVED_GB = 2.0  # CUDA context, NCCL buffers
GB = 1e9

# Full fine-tuning, bytes per parameter: weights, gradients, optimizer (with fp32 master).
FULL_BYTES = {  # optimizer -> (weights, gradients, optimizer states)
    "adamw": (2.0, 2.0, 12.0),  # ZeRO paper's 16 bytes/parameter
    "adamw-8bit": (2.0, 2.0, 6.0),  # fp32 master + two 8-bit moments
    "adafactor": (2.0, 2.0, 4.5),  # fp32 master + factored second moment
}
# A frozen LoRA base, bytes per parameter (int4: NF4 with double quantisation, QLoRA).
LORA_BASE_BYTES = {"bf16": 2.0, "fp8": 1.0, "int4": 0.52}
ACT_BYTES_PER_TOKEN_LAYER = 34.0  # x hidden: one layer's saved activations (Korthikanti et al.)
LOGIT_BYTES_PER_TOKEN = 64_000 * 4.0  # fp32 logits over a ~64k vocabulary
KV_GQA_FACTOR = 0.25  # grouped-query attention keeps a quarter of the full K/V
KV_BUDGET_FRACTION = 0.25  # generation engines cap the KV cache by shrinking the batch


def usable_gb(gpu_type: pd.Series | np.ndarray) -> np.ndarray:
    """Memory a job may plan on, per GPU of each row's type."""
    cap = pd.Series(gpu_type).map({k: v.memory_gb for k, v in GPUS.items()}).to_numpy(float)
    return cap * USABLE_FRACTION - RESERVED_GB


def training_memory_gb(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per-row (replicated GB on every GPU, GB that ZeRO shards across the GPUs)."""
    n = df["params_b"].to_numpy(float) * GB
    layers = df["n_layers"].to_numpy(float)
    hidden = df["hidden_size"].to_numpy(float)
    seq = df["seq_len"].to_numpy(float)
    zero = df["zero_stage"].to_numpy(int)
    variant = df["variant"].astype(str).to_numpy()
    lora = np.char.startswith(variant.astype("U"), "lora")
    dpo = np.char.endswith(variant.astype("U"), "dpo")
    rlhf = np.char.endswith(variant.astype("U"), "rlhf")
    rl = rlhf | np.char.endswith(variant.astype("U"), "rlvr")
    opt = df["optimizer"].astype(str)
    w_b = opt.map({k: v[0] for k, v in FULL_BYTES.items()}).to_numpy(float)
    g_b = opt.map({k: v[1] for k, v in FULL_BYTES.items()}).to_numpy(float)
    o_b = opt.map({k: v[2] for k, v in FULL_BYTES.items()}).to_numpy(float)

    def split(weights, grads, states):
        """ZeRO stage 1 shards optimizer states, 2 also gradients, 3 also weights."""
        rep = (weights * (zero < 3) + grads * (zero < 2) + states * (zero < 1))
        shard = (weights * (zero >= 3) + grads * (zero >= 2) + states * (zero >= 1))
        return rep, shard

    # Trainable parameters: the whole model, or the adapters (rank x (in + out) per target).
    adapters = (df["lora_rank"].to_numpy(float) * df["lora_targets"].to_numpy(float)
                * layers * 2.0 * hidden)
    trainable = np.where(lora, adapters, n)
    rep, shard = split(trainable * w_b, trainable * g_b, trainable * o_b)
    # A frozen LoRA base is sharded only by ZeRO-3.
    base = np.where(lora, n * df["precision"].astype(str).map(LORA_BASE_BYTES)
                    .fillna(2.0).to_numpy(float), 0.0)
    rep = rep + np.where(zero < 3, base, 0.0)
    shard = shard + np.where(zero >= 3, base, 0.0)
    # DPO and RL keep a frozen reference policy; LoRA gets it by switching adapters off.
    ref = np.where((dpo | rl) & ~lora, 2.0 * n, 0.0)
    # RLHF adds a trained critic and a frozen reward model of reward_model_params_b.
    r = df["reward_model_params_b"].to_numpy(float) * GB * rlhf
    c_rep, c_shard = split(r * w_b, r * g_b, r * o_b)
    frozen = ref + 2.0 * r
    rep = rep + c_rep + np.where(zero < 3, frozen, 0.0)
    shard = shard + c_shard + np.where(zero >= 3, frozen, 0.0)

    # Activations for one micro-batch sequence of seq_len (worst case), not sharded.
    ckpt = df["gradient_checkpointing"].to_numpy(int) == 1
    flash = df["flash_attention"].to_numpy(int) == 1
    per_layer = ACT_BYTES_PER_TOKEN_LAYER * seq * hidden
    per_layer = per_layer + np.where(flash, 0.0, 5.0 * (hidden / 128.0) * seq * seq)
    acts = np.where(ckpt, 2.0 * seq * hidden * layers + per_layer, per_layer * layers)
    acts = acts + LOGIT_BYTES_PER_TOKEN * seq
    acts = acts * np.where(dpo, 2.0, 1.0)  # chosen and rejected side by side
    kv = (df["rollouts_per_prompt"].to_numpy(float) * (seq + df["max_new_tokens"].to_numpy(float))
          * 2.0 * layers * hidden * 2.0 * KV_GQA_FACTOR)
    cap = usable_gb(df["gpu_type"]) * GB
    acts = acts + np.minimum(kv, KV_BUDGET_FRACTION * cap)
    return (rep + acts) / GB, shard / GB


def activations_gb(df: pd.DataFrame) -> np.ndarray:
    """The activation part of training_memory_gb's replicated GB (what a GPU holds for
    its own micro-batch, whatever the layout)."""
    keep = df.assign(params_b=0.0, reward_model_params_b=0.0, lora_rank=0, lora_targets=0)
    return training_memory_gb(keep)[0]


def smallest_power_of_two(replicated: np.ndarray, sharded: np.ndarray,
                          usable: np.ndarray) -> np.ndarray:
    """Smallest g in 1, 2, 4, ... with replicated + sharded / g <= usable; 0 if none <= MAX_GPUS."""
    room = usable - replicated
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(room > 0, sharded / np.where(room > 0, room, 1.0), np.inf)
    ratio = np.maximum(ratio, 1.0)
    exp = np.ceil(np.log2(ratio) - 1e-12)
    gpus = np.where(np.isfinite(exp), 2.0 ** np.clip(exp, 0, 30), np.inf)
    return np.where(gpus <= MAX_GPUS, gpus, 0).astype(np.int64)


def min_training_gpus(df: pd.DataFrame, scale: float | np.ndarray = 1.0) -> np.ndarray:
    """Smallest power-of-two GPU count holding each training job (0: does not fit)."""
    rep, shard = training_memory_gb(df)
    return smallest_power_of_two(rep * scale, shard * scale, usable_gb(df["gpu_type"]))


def min_quant_gpus(df: pd.DataFrame) -> np.ndarray:
    """GPTQ and AWQ work one block at a time (GPTQ: 175B on one A100), so one GPU;
    bitsandbytes holds the whole quantised model: params x bits/8, plus 10% and 2 GB."""
    n = df["params_b"].to_numpy(float)
    bnb = df["algorithm"].astype(str).to_numpy() == "bitsandbytes"
    need = n * df["bits"].to_numpy(float) / 8.0 * 1.1
    gpus = smallest_power_of_two(np.full(len(n), 2.0), need, usable_gb(df["gpu_type"]))
    return np.where(bnb, gpus, 1).astype(np.int64)


def min_inference_gpus(df: pd.DataFrame) -> np.ndarray:
    """bf16 weights plus 30% for the KV cache, split by tensor parallelism."""
    need = df["params_b"].to_numpy(float) * 2.0 * 1.3
    return smallest_power_of_two(np.zeros(len(need)), need, usable_gb(df["gpu_type"]))


def layered_gpus(df: pd.DataFrame, scale: float | np.ndarray = 1.0) -> np.ndarray:
    """GPUs for the layer-split layout (Hugging Face `device_map="auto"`, as ms-swift ran
    a 14B full fine-tune and a 72B LoRA on two A100s): model states divided over the
    GPUs, each GPU holding the activations of one micro-batch. What a job whose ZeRO
    stage fits nowhere still runs on; 0 if nothing up to MAX_GPUS holds it."""
    rep, shard = training_memory_gb(df)
    acts = activations_gb(df)
    return smallest_power_of_two(acts * scale, (rep - acts + shard) * scale,
                                 usable_gb(df["gpu_type"]))


def fitting_gpus(df: pd.DataFrame, scale: float | np.ndarray = 1.0) -> np.ndarray:
    """The count a queued job gets when it states none: its ZeRO layout where that fits,
    else the layer-split layout (0: neither fits on any power of two up to MAX_GPUS)."""
    gpus = min_training_gpus(df, scale)
    short = gpus == 0
    if short.any():
        gpus = gpus.copy()
        gpus[short] = layered_gpus(df[short], np.asarray(scale)[short]
                                   if np.ndim(scale) else scale)
    return gpus


def smallest_any_layout(df: pd.DataFrame, scale: float = 1.0) -> np.ndarray:
    """The fewest GPUs holding each job in either layout (0: none up to MAX_GPUS)."""
    zero = min_training_gpus(df, scale)
    split = layered_gpus(df, scale)
    both = np.where(zero > 0, zero, MAX_GPUS + 1)
    both = np.minimum(both, np.where(split > 0, split, MAX_GPUS + 1))
    return np.where(both <= MAX_GPUS, both, 0).astype(np.int64)


def per_gpu_gb(df: pd.DataFrame, gpus: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """GB each GPU needs on `gpus` GPUs: the better of the ZeRO and layer-split layouts."""
    rep, shard = training_memory_gb(df)
    acts = activations_gb(df)
    g = np.maximum(np.asarray(gpus, float), 1.0)
    return scale * np.minimum(rep + shard / g, acts + (rep - acts + shard) / g)


def memory_fixes(df: pd.DataFrame, scale: float = 1.0) -> list[str]:
    """For each row, one line: the GB per GPU it needs against the GB usable, and the
    changes that would make it fit (ZeRO-3, LoRA, QLoRA, an 8-bit optimizer, gradient
    checkpointing, a larger GPU), each checked with this same memory model."""
    usable = usable_gb(df["gpu_type"])
    need = per_gpu_gb(df, np.full(len(df), MAX_GPUS), scale)
    lines = []
    for i in range(len(df)):
        row = df.iloc[[i]]
        tries = []
        variant = str(row["variant"].iloc[0])
        kind = variant.split("-", 1)[1]
        if int(row["zero_stage"].iloc[0]) < 3:
            tries.append(("zero_stage 3", row.assign(zero_stage=3)))
        if int(row["gradient_checkpointing"].iloc[0]) == 0:
            tries.append(("gradient_checkpointing 1", row.assign(gradient_checkpointing=1)))
        if int(row["flash_attention"].iloc[0]) == 0:
            tries.append(("flash_attention 1", row.assign(flash_attention=1)))
        if variant.startswith("full"):
            if str(row["optimizer"].iloc[0]) == "adamw":
                tries.append(("optimizer adamw-8bit", row.assign(optimizer="adamw-8bit")))
            lora = row.assign(variant=f"lora-{kind}", lora_rank=16, lora_targets=7)
            tries.append((f"variant lora-{kind}", lora))
            tries.append((f"variant lora-{kind} with precision int4 (QLoRA)",
                          lora.assign(precision="int4")))
        elif str(row["precision"].iloc[0]) != "int4":
            tries.append(("precision int4 (QLoRA)", row.assign(precision="int4")))
        fixes = []
        for what, alt in tries:
            g = int(fitting_gpus(alt, scale)[0])
            if g:
                fixes.append(f"{what} ({g} GPU{'s' if g > 1 else ''})")
        own = GPUS[str(row["gpu_type"].iloc[0])].memory_gb
        bigger = sorted((g for g, v in GPUS.items() if v.memory_gb > own),
                        key=lambda g: GPUS[g].memory_gb)
        for g_type in bigger:  # the smallest larger GPU that holds the job as it is
            g = int(fitting_gpus(row.assign(gpu_type=g_type), scale)[0])
            if g:
                fixes.append(f"gpu_type {g_type} ({g} GPU{'s' if g > 1 else ''})")
                break
        if not fixes:  # no single change: the changes together, on this GPU or larger
            fixes += _combined(row, [what for what, _ in tries], bigger, scale)
        hint = "; fits with " + ", or ".join(fixes) if fixes else \
            "; no change tried makes it fit: shorten seq_len"
        lines.append(f"does not fit in memory on any power of two up to {MAX_GPUS} GPUs: "
                     f"needs {need[i]:.0f} GB per GPU even on {MAX_GPUS}, "
                     f"{usable[i]:.0f} GB usable on a {row['gpu_type'].iloc[0]}{hint}")
    return lines


def _apply(row: pd.DataFrame, what: str) -> pd.DataFrame:
    """A memory_fixes change, by its description, applied to `row`."""
    words = what.split()
    if words[0] == "gpu_type":
        return row.assign(gpu_type=words[1])
    if words[0] == "variant":
        kind = words[1].split("-", 1)[1]
        row = row.assign(variant=f"lora-{kind}", lora_rank=16, lora_targets=7)
        return row.assign(precision="int4") if "int4" in what else row
    if words[0] == "precision":
        return row.assign(precision="int4")
    if words[0] == "optimizer":
        return row.assign(optimizer=words[1])
    return row.assign(**{words[0]: int(words[1])})


def _combined(row: pd.DataFrame, changes: list[str], bigger: list[str],
              scale: float) -> list[str]:
    """The first prefix of `changes` that fits, on the row's GPU or the next larger."""
    for g_type in [str(row["gpu_type"].iloc[0]), *bigger]:
        alt = row.assign(gpu_type=g_type)
        used = [] if g_type == str(row["gpu_type"].iloc[0]) else [f"gpu_type {g_type}"]
        for what in changes:
            alt, used = _apply(alt, what), [*used, what]
            if fitting_gpus(alt, scale)[0]:
                for extra in [u for u in used if not u.startswith("gpu_type")]:
                    fewer = [u for u in used if u != extra]  # drop what is not needed
                    if fitting_gpus(_apply_all(row, fewer), scale)[0]:
                        used = fewer
                g = int(fitting_gpus(_apply_all(row, used), scale)[0])
                return [f"{' and '.join(used)} ({g} GPU{'s' if g > 1 else ''})"]
    return []


def _apply_all(row: pd.DataFrame, changes: list[str]) -> pd.DataFrame:
    for what in changes:
        row = _apply(row, what)
    return row
