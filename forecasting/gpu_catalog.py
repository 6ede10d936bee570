"""The GPU catalogue: memory and dense peak TFLOP/s per GPU type, from a data file.

The bundled `data/gpu_catalog.csv` holds datasheet figures (one source per row);
a cluster with other GPUs adds its own rows in a CSV of the same columns, named
by the environment variable GPUPLAN_GPU_CATALOG (its rows extend the bundled ones
and replace a bundled type of the same name). Users write GPU types many ways
(H100, h100-sxm, A100-80G, NVIDIA A100-SXM4-80GB), so every spelling is reduced
to a key (upper case, letters and digits only, without vendor, the SXM form
factor or a trailing B of GB; PCIe and NVL parts are other types) and looked up
among each type's name and aliases.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from allocator.core import readers
from allocator.core.errors import InputError

BUNDLED = Path(__file__).resolve().parents[1] / "data" / "gpu_catalog.csv"
ENV = "GPUPLAN_GPU_CATALOG"
COLUMNS = ("gpu_type", "memory_gb", "bf16_tflops", "fp8_tflops")


@dataclass(frozen=True)
class GPU:
    """Public datasheet figures: memory in GB and dense peak TFLOP/s (bf16, fp8)."""

    memory_gb: float
    bf16_tflops: float
    fp8_tflops: float


def spelling_key(name: str) -> str:
    """One key for the many spellings of a GPU type."""
    s = re.sub(r"[^A-Z0-9]", "", str(name).upper())
    s = re.sub(r"^(NVIDIA|AMD|TESLA|GEFORCE)+", "", s)
    s = re.sub(r"SXM\d?", "", s)
    return re.sub(r"(\d+)GB?$", r"\1G", s)


def read_catalog(path: str | Path) -> pd.DataFrame:
    """One catalogue file, checked: InputError naming file, row and field."""
    path = Path(path)
    df = readers.read_table(path, dtype=str, blank_is_missing=False)
    for col in COLUMNS:
        if col not in df.columns:
            raise InputError("missing column of a GPU catalogue", file=str(path), field=col)
    for i, row in df.iterrows():
        if not str(row["gpu_type"]).strip():
            raise InputError("empty gpu_type", file=str(path), job=f"row {i + 1}",
                             field="gpu_type")
        for col in COLUMNS[1:]:
            try:
                ok = float(row[col]) > 0
            except ValueError:
                ok = False
            if not ok:
                raise InputError("must be a number > 0", file=str(path),
                                 job=str(row["gpu_type"]), field=col)
    if "aliases" not in df.columns:
        df["aliases"] = ""
    return df


def load_catalog(extra: str | Path | None = None) -> tuple[dict[str, GPU], dict[str, str]]:
    """(GPU by canonical name, canonical name by spelling key): bundled, then `extra`
    (default: the file named by GPUPLAN_GPU_CATALOG, if set)."""
    extra = extra if extra is not None else os.environ.get(ENV) or None
    frames = [read_catalog(BUNDLED)] + ([read_catalog(extra)] if extra else [])
    gpus: dict[str, GPU] = {}
    names: dict[str, str] = {}
    aliases: dict[str, str] = {}
    for df in frames:
        for row in df.itertuples(index=False):
            name = str(row.gpu_type).strip()
            gpus[name] = GPU(float(row.memory_gb), float(row.bf16_tflops),
                             float(row.fp8_tflops))
            names[spelling_key(name)] = name
            for spelling in str(row.aliases).split("|"):
                if spelling.strip():
                    aliases[spelling_key(spelling)] = name
    return gpus, aliases | names  # a type's own name wins over another's alias


GPUS, SPELLINGS = load_catalog()


def canonical(names: pd.Series) -> pd.Series:
    """Each GPU type as its catalogue name; NaN where the catalogue has no such type."""
    s = pd.Series(names)
    uniq = s.dropna().astype(str).unique()
    table = {u: SPELLINGS.get(spelling_key(u)) for u in uniq}
    return s.map(table)


def known_types() -> str:
    """The catalogue's names, for messages."""
    return ", ".join(sorted(GPUS))


def memory_gb(names) -> np.ndarray:
    return pd.Series(names).map({k: v.memory_gb for k, v in GPUS.items()}).to_numpy(float)


def bf16_tflops(names) -> np.ndarray:
    return pd.Series(names).map({k: v.bf16_tflops for k, v in GPUS.items()}).to_numpy(float)


def fp8_tflops(names) -> np.ndarray:
    return pd.Series(names).map({k: v.fp8_tflops for k, v in GPUS.items()}).to_numpy(float)
