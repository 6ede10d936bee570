"""Published fine-tuning timings as training-history rows, and the estimators' check on them.

Two transcribed tables (data/finetune_runs/, sources in SOURCE.md there):
- ms-swift's tuner benchmark: 23 complete runs of 7-8B models on A100s (LoRA family,
  full fine-tuning with GaLore and LISA, LLaMA-Pro, QLoRA-style 4-bit bases,
  packing), each as samples trained and wall seconds.
- Qwen's README profile: seconds per iteration (batch 1 x 8 accumulation steps per
  GPU, sequences padded to the length) of LoRA, QLoRA and full fine-tuning of
  Qwen 1.8B-72B at 256-8192 tokens on A100-80GB. A run here is 1000 iterations.

The conversion into the 22 features is below, one assumption per line. Rows are
split into a calibration set (used to set the prior's constants) and a report set
(never used for any choice): alternately within each table, in file order, a
rule fixed before any result was seen.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import typer

DATA = Path(__file__).resolve().parents[1] / "data" / "finetune_runs"
MS_SWIFT = DATA / "ms_swift_tuners_a100.csv"
QWEN = DATA / "qwen_readme_profiling_a100.csv"

# (params_b, n_layers, hidden_size) from the models' config.json on the Hugging Face Hub.
MODELS = {
    "qwen-7b-chat": (7.72, 32, 4096), "llama3-8b-instruct": (8.03, 32, 4096),
    "qwen1half-7b-chat-awq": (7.72, 32, 4096),
    "1.8B": (1.84, 24, 2048), "7B": (7.72, 32, 4096), "14B": (14.17, 40, 5120),
    "72B": (72.29, 80, 8192),
}
# ms-swift's mix (ms-agent + ms-bench): the packing runs fit 78,237 samples into 7,900
# packed sequences of 2,048 tokens, so a sample holds about 7900 x 2048 / 78237 tokens.
MS_SWIFT_TOKENS = round(7900 * 2048 / 78237)
ITERATIONS = 1000  # a Qwen README run: 1000 iterations at the published seconds/iteration


def _row(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
            "variant": "lora-sft", "seq_len": 2048, "epochs": 1.0, "global_batch_size": 16,
            "lora_rank": 8, "lora_targets": 7, "precision": "bf16", "gpu_type": "A100-80GB",
            "gradient_checkpointing": 1, "optimizer": "adamw", "zero_stage": 0,
            "flash_attention": 1, "packing": 0, "rollouts_per_prompt": 0,
            "max_new_tokens": 0, "reward_model_params_b": 0.0}
    base.update(kw)
    p, layers, hidden = MODELS[base.pop("model")]
    base.update(params_b=p, active_params_b=p, n_layers=layers, hidden_size=hidden)
    return base


def ms_swift_runs(path: Path = MS_SWIFT) -> pd.DataFrame:
    """ms-swift's tuner table: full and GaLore/LISA runs as full-sft (ZeRO 0, one GPU);
    LoRA, DoRA, AdaLoRA, adapters and LLaMA-Pro (a frozen base with small trainable
    parts) as lora-sft; 4-bit bases (unsloth, AWQ) as int4; packing from the name.
    The packing runs report packed sequences, counted here as the raw samples."""
    raw = pd.read_csv(path)
    rows = []
    for r in raw.itertuples(index=False):
        name = str(r.exp_name)
        full = str(r.tuner) == "full"
        packing = "packing" in name
        samples = 78237 if packing else int(r.train_samples)
        rows.append(_row(
            id=f"ms-swift:{name}", model=r.model_type,
            variant="full-sft" if full else "lora-sft",
            lora_rank=0 if full else 8, lora_targets=0 if full else 7,
            precision="int4" if ("q4" in name or "awq" in name) else "bf16",
            dataset_samples=samples, avg_tokens_per_sample=MS_SWIFT_TOKENS,
            packing=int(packing), gpus=int(r.gpus),
            gpu_hours=float(r.train_seconds) * int(r.gpus) / 3600.0,
            source="ms-swift Benchmark.md, Tuners"))
    return pd.DataFrame(rows)


def qwen_runs(path: Path = QWEN) -> pd.DataFrame:
    """Qwen's profile: each GPU takes 8 samples of seq_len tokens per iteration; LoRA
    rank 64 on 4 module types (its finetune script); full fine-tuning with ZeRO-3 (its
    DeepSpeed script), LoRA on 72B with ZeRO-3 as stated; Q-LoRA on the GPTQ int4 model."""
    raw = pd.read_csv(path)
    rows = []
    for r in raw.itertuples(index=False):
        gpus = int(r.nodes) * int(r.gpus_per_node)
        method = str(r.method)
        full = method.startswith("Full")
        zero = 3 if (full or "Zero3" in method) else 0
        rows.append(_row(
            id=f"qwen:{r.model_size}:{method}:{int(r.seq_len)}", model=r.model_size,
            variant="full-sft" if full else "lora-sft",
            lora_rank=0 if full else 64, lora_targets=0 if full else 4,
            precision="int4" if method == "Q-LoRA" else "bf16",
            seq_len=int(r.seq_len), avg_tokens_per_sample=int(r.seq_len),
            dataset_samples=ITERATIONS * 8 * gpus, global_batch_size=8 * gpus,
            zero_stage=zero, gpus=gpus,
            gpu_hours=float(r.seconds_per_iter) * ITERATIONS * gpus / 3600.0,
            source="Qwen README, Profiling of Memory and Speed"))
    return pd.DataFrame(rows)


def real_runs() -> pd.DataFrame:
    """Both tables, with `split` = calibration or report (alternate rows per table)."""
    parts = []
    for df in (ms_swift_runs(), qwen_runs()):
        df = df.copy()
        df["split"] = np.where(np.arange(len(df)) % 2 == 0, "calibration", "report")
        parts.append(df)
    return pd.concat(parts, ignore_index=True)


def as_queue(runs: pd.DataFrame, *, keep_gpus: bool = True) -> pd.DataFrame:
    """The runs as a queue to score (kind training, priority 1); without `gpus` when
    keep_gpus is False, to check what the memory model alone gives."""
    q = runs.drop(columns=["gpu_hours", "source", "split"]).copy()
    q.insert(1, "kind", "training")
    q.insert(2, "priority", 1)
    if not keep_gpus:
        q = q.drop(columns=["gpus"])
    return q


def ratio_summary(pred: np.ndarray, actual: np.ndarray) -> dict:
    """Within-2x share and median ratio predicted/actual."""
    r = np.asarray(pred, float) / np.asarray(actual, float)
    return {"runs": len(r), "within_2x": float(np.mean((r >= 0.5) & (r <= 2.0))),
            "median_ratio": float(np.median(r)), "worst_low": float(r.min()),
            "worst_high": float(r.max())}


def calibrate(runs: pd.DataFrame) -> dict:
    """The prior's constants that minimise the mean |log(predicted / actual)| over
    `runs` (Nelder-Mead on log constants, from the module's values)."""
    from scipy.optimize import minimize

    from forecasting import prior
    from forecasting.history import clean_training

    frame = clean_training(runs)
    gpus = runs["gpus"].to_numpy(float)
    logy = np.log(runs["gpu_hours"].to_numpy(float))
    names = prior.CONSTANTS
    start = np.log([getattr(prior, n) for n in names])

    def loss(x):
        c = dict(zip(names, np.exp(x), strict=True))
        if c["MFU_FULL"] > 0.8 or c["MFU_LORA"] > 0.8:
            return 1e9
        return float(np.mean(np.abs(prior.prior_log_hours(frame, gpus, c) - logy)))

    best = minimize(loss, start, method="Nelder-Mead",
                    options={"maxiter": 4000, "xatol": 1e-4, "fatol": 1e-6})
    return {n: float(round(v, 4)) for n, v in zip(names, np.exp(best.x), strict=True)}


HISTORY_OUT = DATA / "calibration_history.csv"
RUNS_OUT = DATA / "real_runs.csv"


def check(models: Path) -> pd.DataFrame:
    """Score every real run with the estimators in `models` as `gpuplan score` does, with
    the published GPU count and without it: rejected, warned, within 2x, median ratio
    (predicted / actual) of the report runs."""
    from forecasting.scoring import score_queue_full
    from forecasting.store import load_estimators

    estimators = load_estimators(models)
    runs = real_runs()
    rows = []
    for keep in (True, False):
        result = score_queue_full(as_queue(runs, keep_gpus=keep).astype(str), estimators)
        s = result.scored[["id", "gpu_hours_p50"]].merge(
            runs[["id", "gpu_hours", "split", "source"]], on="id")
        rep = s[s.split == "report"]
        for src in [*sorted(rep.source.unique()), "all report runs"]:
            part = rep if src == "all report runs" else rep[rep.source == src]
            summary = ratio_summary(part.gpu_hours_p50.astype(float), part.gpu_hours)
            rows.append({"gpus": "published" if keep else "memory model",
                         "report runs": src, "rejected (all runs)": len(result.rejects),
                         "warned (all runs)": len(result.warnings), **summary})
    return pd.DataFrame(rows)


def main(
    calibrate_only: bool = typer.Option(False, "--calibrate", help="print the prior's "
                                        "constants fitted on the calibration runs"),
    write: bool = typer.Option(False, "--write",
                               help=f"write {RUNS_OUT.name} and {HISTORY_OUT.name} into {DATA}"),
    models: Path = typer.Option(Path("models"), "--models",
                                help="estimators to check on the real runs (default models/)"),
) -> None:
    """Score the real runs with the estimators (or --calibrate the prior, --write the CSVs)."""
    from forecasting.tables import markdown

    runs = real_runs()
    if calibrate_only:
        print(calibrate(runs[runs.split == "calibration"]))
        return
    if write:
        from allocator.core.atomic import atomic_path
        from forecasting.columns import TRAINING_FEATURES

        with atomic_path(RUNS_OUT) as tmp:
            runs.to_csv(tmp, index=False)
        cal = runs[runs.split == "calibration"]
        with atomic_path(HISTORY_OUT) as tmp:
            cal[["id", *TRAINING_FEATURES, "gpus", "gpu_hours"]].to_csv(tmp, index=False)
        print(f"wrote {RUNS_OUT} and {HISTORY_OUT}")
        return
    print(markdown(check(models)))


if __name__ == "__main__":
    typer.run(main)
