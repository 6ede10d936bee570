"""Shared test settings: hypothesis profiles, chosen with HYPOTHESIS_PROFILE (default "dev").

dev: quick enough for every commit (the allocator suite well under 2 minutes on 2 cores);
ci: more examples when there is time; quick: a smoke run while editing.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_COMMON = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}

settings.register_profile("dev", max_examples=60, **_COMMON)
settings.register_profile("ci", max_examples=250, **_COMMON)
settings.register_profile("quick", max_examples=10, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


# the real-Slurm fixtures (`slurm`, `slurm_session`), for tests/test_slurm_*.py
from tests.slurm_cluster import slurm, slurm_session  # noqa: E402, F401
