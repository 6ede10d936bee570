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


# the real-Slurm fixtures (`slurm`, `slurm_session`), for tests/test_slurm_*.py
from tests.slurm_cluster import slurm, slurm_session  # noqa: E402, F401


@pytest.fixture(autouse=True, scope="session")
def _isolated_state(tmp_path_factory):
    """No test reads or writes the caller's gpuplan state or MLflow store: GPUPLAN_HOME is a
    fresh directory, MLFLOW_TRACKING_URI and GPUPLAN_TRACKING are unset (a test that needs
    a store sets its own with monkeypatch). Session-wide, so hypothesis tests may use it."""
    saved = {k: os.environ.get(k) for k in ("GPUPLAN_HOME", "MLFLOW_TRACKING_URI",
                                            "GPUPLAN_TRACKING")}
    os.environ["GPUPLAN_HOME"] = str(tmp_path_factory.mktemp("gpuplan-home"))
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    os.environ.pop("GPUPLAN_TRACKING", None)
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    """mlflow.set_tracking_uri also sets MLFLOW_TRACKING_URI in os.environ: after each test,
    drop it, so the next test does not inherit the previous one's store."""
    yield
    os.environ.pop("MLFLOW_TRACKING_URI", None)
