"""Shared test settings: hypothesis profiles, and one fixture that isolates the environment.

Profiles, chosen with HYPOTHESIS_PROFILE (default "dev"; `.ci/run` selects "ci"):
dev: quick enough for every commit; ci: more examples, derandomized (the same examples on
every run, so CI never flakes on a newly found case: run `dev` locally to explore), no
deadline; quick: a smoke run while editing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parents[1]

# The isolation fixture below is function-scoped; it only resets the environment, which no
# example changes, so sharing it across a property's examples is safe.
_COMMON = {"deadline": None,
           "suppress_health_check": [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]}

settings.register_profile("dev", max_examples=60, **_COMMON)
settings.register_profile("ci", max_examples=120, derandomize=True, print_blob=True, **_COMMON)
settings.register_profile("quick", max_examples=10, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

# Variables a caller may have exported that change what gpuplan reads or writes.
_ISOLATED = ("GPUPLAN_TRACKING", "MLFLOW_TRACKING_URI", "GPUPLAN_HOME", "MLFLOW_EXPERIMENT_NAME",
             "MLFLOW_EXPERIMENT_ID", "MLFLOW_RUN_ID")


@pytest.fixture(autouse=True)
def isolated_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts from the same environment, whatever the caller exported.

    Tracking is off (a test never writes, nor reads champions from, the project's MLflow
    store; a test about tracking turns it on and points it at its own tmp_path), no store
    URI or gpuplan home is inherited, and the working directory is the project root (the
    CLI's default paths, such as data/scenarios, are relative to it).
    """
    for name in _ISOLATED:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GPUPLAN_TRACKING", "off")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.chdir(ROOT)
