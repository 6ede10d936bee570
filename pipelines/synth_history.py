"""What `gpuplan synth-history` does: a seeded synthetic job history, written as one set."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from allocator.core.errors import InputError

MAX_JOBS = 1_000_000  # per file


@dataclass(frozen=True)
class SynthArgs:
    """What `gpuplan synth-history` reads."""

    out: Path  # the history's directory
    seed: int
    training: int  # jobs; 0: no training file
    quantization: int  # jobs; 0: no quantization file
    sigma: float
    quant_sigma: float
    memory_sigma: float
    fmt: str  # csv | parquet
    queue_out: Path | None  # also a sample queue here
    queue_jobs: int


def write_table(df, path: Path) -> None:
    """CSV or Parquet by extension, atomically."""
    from allocator.core.atomic import atomic_path

    with atomic_path(path) as tmp:
        if path.suffix.lower() in (".parquet", ".pq"):
            df.to_parquet(tmp, index=False)
        else:
            df.to_csv(tmp, index=False)


def synth_history(a: SynthArgs) -> list[Path]:
    """Check the options, generate, write training/quantization files and meta.json as one
    set (and the sample queue beside them); the files written, meta.json aside."""
    from allocator.core.atomic import writable_target, write_text
    from allocator.core.limits import finite
    from forecasting.synth import SynthConfig, synth_queue
    from forecasting.synth import synth_history as generate
    from pipelines import outset

    if a.fmt not in ("csv", "parquet"):
        raise InputError("must be csv or parquet", field="format")
    for value, name in ((a.sigma, "--sigma"), (a.quant_sigma, "--quant-sigma"),
                        (a.memory_sigma, "--memory-sigma")):
        finite(value, name, low=0, high=5)
    if max(a.training, a.quantization, a.queue_jobs) > MAX_JOBS:
        raise InputError("at most 1,000,000 jobs per file", field="--training")
    outset.check_target(a.out)
    if a.queue_out is not None:
        writable_target(a.queue_out)
    config = SynthConfig(seed=a.seed, n_training=a.training, n_quantization=a.quantization,
                         sigma=a.sigma, quant_sigma=a.quant_sigma, memory_sigma=a.memory_sigma)
    train_df, quant_df, meta = generate(config)
    queue = synth_queue(a.queue_jobs, seed=a.seed) if a.queue_out else None
    tables = [(f"{kind}.{a.fmt}", frame) for kind, frame, n in (
        ("training", train_df, a.training), ("quantization", quant_df, a.quantization)) if n]
    with outset.output_set(a.out, "synth-history") as stage:  # one set
        for name, frame in tables:
            write_table(frame, stage / name)
        write_text(stage / "meta.json", meta)
    written = [a.out / name for name, _ in tables]
    if queue is not None and a.queue_out is not None:
        write_table(queue, a.queue_out)
        written.append(a.queue_out)
    return written
