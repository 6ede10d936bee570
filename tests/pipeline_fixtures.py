"""Small inputs for the pipeline tests: a cluster, services, two weeks of traffic, queues.

Small on purpose: the pipelines are under test here, not the estimators.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from pipelines import tracking

SERVICES = {"services": [
    {"service": "chat", "requests_per_gpu_hour": 1000, "headroom": 0.2, "min_gpus": 1,
     "swap_limit": 2, "priority": 10},
    {"service": "code", "requests_per_gpu_hour": 1000, "headroom": 0.2, "min_gpus": 1,
     "swap_limit": 1, "priority": 6},
]}


def write_inputs(root: Path, gpus: int = 16) -> dict[str, Path]:
    """Cluster, services, traffic (14 days hourly, daily cycle), running jobs."""
    root.mkdir(parents=True, exist_ok=True)
    cluster = root / "cluster.json"
    cluster.write_text(json.dumps({"name": "test-day", "cluster": {
        "gpus": gpus, "node_size": 8, "step_minutes": 60, "horizon_steps": 24},
        "weights": {"realtime_penalty": 8.0, "decay": 0.97}}))
    services = root / "services.json"
    services.write_text(json.dumps(SERVICES))
    hours = pd.date_range("2026-11-16T00:00:00Z", periods=14 * 24, freq="h")
    rng = np.random.default_rng(0)
    rows = []
    for name, peak in (("chat", 3000.0), ("code", 1500.0)):
        wave = np.sin(2 * np.pi * (hours.hour.to_numpy() - 6) / 24)
        curve = peak * (0.6 + 0.4 * np.clip(wave, 0, None))
        counts = np.rint(curve * rng.lognormal(0, 0.05, len(hours))).astype(int)
        rows.append(pd.DataFrame({"timestamp": hours.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                  "service": name, "requests": counts}))
    traffic = root / "traffic.csv"
    pd.concat(rows).to_csv(traffic, index=False)
    running = root / "running.json"
    running.write_text(json.dumps({
        "jobs": [{"id": "run-a", "kind": "training", "priority": 4, "gpus": 4,
                  "duration_steps": 6, "first_gpu": 0, "remaining_steps": 3}],
        "realtime": {"chat": [15, 14, 13], "code": [12, 11]}}))
    return {"cluster": cluster, "services": services, "traffic": traffic, "running": running}


def scored_queue(path: Path, n: int = 14, seed: int = 1) -> Path:
    """A queue already scored: gpus and duration_steps present, plus two bad rows."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({
        "id": [f"q-{i:02d}" for i in range(n)],
        "kind": rng.choice(["training", "quantization", "batch_inference"], n),
        "priority": rng.integers(1, 9, n),
        "arrival_step": rng.integers(0, 8, n),
        "gpus": rng.choice([1, 2, 4, 8], n),
        "duration_steps": rng.integers(1, 9, n),
    })
    frame.loc[0, "gpus"] = 64  # larger than the cluster
    frame.loc[1, "priority"] = 0  # not a valid priority
    frame.to_csv(path, index=False)
    return path


def as_new_process() -> None:
    """Forget the process's MLflow tracker, as a new `gpuplan` process starts without one
    (its one warning per process, its store): for tests that run several commands."""
    tracking._PROCESS_TRACKER = None
