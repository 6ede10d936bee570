"""Shared test settings: hypothesis profiles, chosen with HYPOTHESIS_PROFILE (default "dev").

dev: quick enough for every commit (the allocator suite well under 2 minutes on 2 cores);
ci: more examples when there is time; quick: a smoke run while editing.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

_COMMON = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}

settings.register_profile("dev", max_examples=60, **_COMMON)
settings.register_profile("ci", max_examples=250, **_COMMON)
settings.register_profile("quick", max_examples=10, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))



@pytest.fixture(autouse=True)
def _isolated_state(tmp_path_factory, monkeypatch):
    """No test reads or writes the caller's gpuplan state or MLflow store: GPUPLAN_HOME is a
    fresh directory, MLFLOW_TRACKING_URI and GPUPLAN_TRACKING are unset (a test that needs
    a store sets its own)."""
    monkeypatch.setenv("GPUPLAN_HOME", str(tmp_path_factory.mktemp("gpuplan-home")))
    for name in ("MLFLOW_TRACKING_URI", "GPUPLAN_TRACKING"):
        monkeypatch.delenv(name, raising=False)
