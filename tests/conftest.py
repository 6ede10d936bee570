"""Shared test settings: hypothesis profiles, and one fixture that isolates the environment.

Profiles, chosen with HYPOTHESIS_PROFILE (default "dev"; `.ci/run` selects "ci"):
dev: quick enough for every commit; ci: more examples, derandomized (the same examples on
every run, so CI never flakes on a newly found case: run `dev` locally to explore), no
deadline; quick: a smoke run while editing.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.pipeline_fixtures import as_new_process

ROOT = Path(__file__).resolve().parents[1]

_COMMON = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}

settings.register_profile("dev", max_examples=60, **_COMMON)
settings.register_profile("ci", max_examples=200, derandomize=True, print_blob=True, **_COMMON)
settings.register_profile("quick", max_examples=10, **_COMMON)
settings.register_profile("stress", max_examples=4000, **_COMMON)  # a long hunt, by hand
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


# the real-Slurm fixtures (`slurm`, `slurm_session`), for tests/test_slurm_*.py
from tests.slurm_cluster import slurm, slurm_session  # noqa: E402, F401

# Variables a caller may have exported that change what gpuplan reads or writes: every
# GPUPLAN_* one (home, tracking, GPU catalog, Slurm binaries, debug), and MLflow's store and
# run. GPUPLAN_PIN_PLANS is the one kept: it is the suite's own switch to rewrite the pins.
_ISOLATED_PREFIX = "GPUPLAN_"
_KEPT = ("GPUPLAN_PIN_PLANS",)
_ISOLATED = ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID",
             "MLFLOW_RUN_ID")


# One fresh gpuplan home for the session: tests never write into the checkout's out/ or
# mlruns/ (a test about the home sets its own with monkeypatch).
_HOME = tempfile.mkdtemp(prefix="gpuplan-test-home-")


def _isolate(patch: pytest.MonkeyPatch) -> None:
    exported = [n for n in os.environ if n.startswith(_ISOLATED_PREFIX) and n not in _KEPT]
    for name in (*exported, *_ISOLATED):
        patch.delenv(name, raising=False)
    patch.setenv("GPUPLAN_TRACKING", "off")
    patch.setenv("GPUPLAN_HOME", _HOME)
    patch.setenv("MPLBACKEND", "Agg")
    patch.chdir(ROOT)
    patch.setattr(sys, "argv", [sys.argv[0]])


def pytest_sessionstart(session: pytest.Session) -> None:
    """The same isolation for the whole session, before any fixture: module-scoped fixtures
    run before the per-test fixture below. Never undone: the process is the test session."""
    _isolate(pytest.MonkeyPatch())


@pytest.fixture(autouse=True)
def isolated_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test starts from the same environment, whatever the caller exported and
    whatever an earlier test left behind (MLflow, for one, exports the URI it is given).

    Tracking is off (a test never writes, nor reads champions from, the project's MLflow
    store; a test about tracking turns it on and points it at its own tmp_path), no store
    URI or gpuplan home is inherited, the working directory is the project root (the
    CLI's default paths, such as data/scenarios, are relative to it), and `sys.argv` holds
    no pytest options (reports quote the command they were made by). The process's MLflow
    tracker is forgotten before and after, so none outlives the environment it was made in.
    """
    _isolate(monkeypatch)
    as_new_process()
    yield
    as_new_process()


@pytest.fixture
def no_rebuilds(monkeypatch: pytest.MonkeyPatch) -> None:
    """fast without its window rebuilds (allocator/policies/rebuild.py) and the hand-over
    shifts after them (handover.py): for a test that measures another step's lift on a
    recorded case, with the figures it recorded before them, which lift some of those
    plans a little too."""
    from allocator.policies import fast as fastlib

    monkeypatch.setattr(fastlib, "REBUILDS", False)


@pytest.fixture
def no_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """fast without its walking layout (RealtimePlacer.walking, judged beside the flipped
    ones): for a test that measures another step's lift on a recorded case, with the
    figures it recorded before it, which lifts some of those plans too."""
    from allocator.policies import fast as fastlib

    monkeypatch.setattr(fastlib, "WALK", False)
