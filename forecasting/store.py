"""Save and load the fitted estimators: one joblib file each, plus a manifest.

Plain pickled scikit-learn estimators, so that MLflow's sklearn flavour can log
and reload the same objects later; the manifest records what they were fitted on.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import joblib

from allocator.core.atomic import atomic_path, json_text, write_text
from allocator.core.errors import InputError

FILES = {
    "training": "training_cost.joblib",
    "baseline": "training_baseline.joblib",
    "quantization": "quantization_cost.joblib",
}
MANIFEST = "manifest.json"


def versions() -> dict[str, str]:
    """Library versions the estimators were pickled with (unpickling needs the same)."""
    import lightgbm
    import sklearn
    import statsmodels

    return {"scikit-learn": sklearn.__version__, "lightgbm": lightgbm.__version__,
            "statsmodels": statsmodels.__version__}


def save_estimators(models_dir: str | Path, info: dict | None = None, **estimators) -> None:
    """Write each given estimator (training=, baseline=, quantization=) atomically, and
    merge `info` into the manifest under each estimator's name."""
    models_dir = Path(models_dir)
    manifest_path = models_dir / MANIFEST
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    for name, est in estimators.items():
        if name not in FILES:
            raise ValueError(f"unknown estimator {name!r}; expected one of {sorted(FILES)}")
        with atomic_path(models_dir / FILES[name]) as tmp:
            joblib.dump(est, tmp)
        manifest[name] = {"file": FILES[name], "class": type(est).__name__,
                          **(info or {}).get(name, {})}
    manifest["versions"] = versions()
    write_text(manifest_path, json_text(manifest, indent=2, sort_keys=True) + "\n")


def load_estimators(models_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The estimators present in `models_dir`, by name; InputError if there are none."""
    models_dir = Path(models_dir)
    found = {}
    for name, file in FILES.items():
        path = models_dir / file
        if path.exists():
            try:
                found[name] = joblib.load(path)
            except Exception as err:
                raise InputError(f"unreadable model: {type(err).__name__}: {err}",
                                 file=str(path)) from None
    if not found:
        raise InputError("no fitted estimators here; run `gpuplan train` first",
                         file=str(models_dir))
    return found
