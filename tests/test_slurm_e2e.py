"""gpuplan on a real Slurm (scripts/slurm-up: one node, 8 fake GPUs, accounting).

history -> train -> snapshot -> score -> plan-day -> apply, checked with `squeue --json`; a
plan with a reservation; an `scontrol` failing midway and the rerun that completes it.
"""

from __future__ import annotations

import json
import math
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from forecasting.profile_file import ProfileFile
from tests.slurm_cluster import require_slurm

pytestmark = pytest.mark.slow
require_slurm(module_level=True)

FEATURES = {"kind": "training", "priority": 5, "variant": "lora-sft", "params_b": 7.0,
            "active_params_b": 7.0, "n_layers": 32, "hidden_size": 4096, "seq_len": 4096,
            "dataset_samples": 20000, "avg_tokens_per_sample": 600, "epochs": 1.0,
            "global_batch_size": 64, "lora_rank": 16, "lora_targets": 4, "precision": "bf16",
            "gpu_type": "A100-80GB", "gradient_checkpointing": 1, "optimizer": "adamw",
            "zero_stage": 2, "flash_attention": 1, "packing": 1, "rollouts_per_prompt": 0,
            "max_new_tokens": 0, "reward_model_params_b": 0}


def meta(**changes) -> str:
    return "gpuplan:" + json.dumps({**FEATURES, **changes})


def gpuplan(slurm, *args: str, env: dict | None = None, ok: bool = True):
    done = subprocess.run([sys.executable, "-m", "pipelines.cli", *args], cwd=slurm.base,
                          env=env or slurm.env, capture_output=True, text=True, timeout=300,
                          check=False)
    if ok and done.returncode != 0:
        pytest.fail(f"gpuplan {' '.join(args)} exited {done.returncode}: {done.stderr[-800:]}")
    return done


def minute_start() -> tuple[str, float]:
    """Plan start = this minute (so step 1 is a whole hour ahead, whatever the clock says)."""
    t = math.floor(time.time() / 60) * 60
    return time.strftime("%Y-%m-%dT%H:%M:00Z", time.gmtime(t)), float(t)


def finished_in_accounting(slurm, ids: list[str]) -> bool:
    out = slurm.run("sacct", "-X", "-a", "-S", "2000-01-01", "-j", ",".join(ids), "--json",
                    check=False)
    if out.returncode != 0:
        return False
    states = {str(j["job_id"]): j["state"]["current"] for j in json.loads(out.stdout)["jobs"]}
    return len(states) == len(ids) and all(s in ("COMPLETED", "FAILED") for s in
                                           states.values())


def test_history_snapshot_plan_apply_on_real_slurm(slurm, tmp_path):
    # a history: finished 1/2/4-GPU jobs with metadata, one failed, one without metadata
    done = [slurm.sbatch(g, comment=meta(params_b=p, active_params_b=p), name="hist")
            for g, p in ((1, 7.0), (2, 13.0), (4, 34.0), (1, 8.0), (2, 14.0), (4, 32.0))]
    failed = slurm.sbatch(2, comment=meta(), payload="exit 3", name="bad")
    bare = slurm.sbatch(1, name="bare")
    slurm.wait("history jobs in accounting",
               lambda: finished_in_accounting(slurm, [*done, failed, bare]))
    # the queue: one 4-GPU job running, a mixed queue held for gpuplan to decide
    running = slurm.sbatch(4, minutes=30, payload="sleep 600", comment=meta(), name="run")
    slurm.wait("the running job", lambda: slurm.jobs()[running]["job_state"] == "RUNNING")
    queued = [slurm.sbatch(g, minutes=120, payload="sleep 600", hold=True, name=f"q{g}",
                           comment=meta(priority=pr))
              for g, pr in ((4, 5), (2, 8), (2, 3), (1, 6), (1, 2), (4, 9))]

    hist = tmp_path / "history.csv"
    out = gpuplan(slurm, "slurm", "history", "--out", str(hist))
    gpuplan(slurm, "slurm", "history", "--text", "--out", str(tmp_path / "history-text.csv"))
    assert hist.read_text() == (tmp_path / "history-text.csv").read_text()
    ids = [line.split(",")[0] for line in hist.read_text().splitlines()[1:]]
    assert [i for i in ids if int(i) >= int(done[0])] == done  # (accounting outlives tests)
    assert f"{failed} (bad): state FAILED" in out.stderr
    assert f"{bare} (bare): no gpuplan metadata" in out.stderr
    models = tmp_path / "models"
    gpuplan(slurm, "train", str(hist), "--models", str(models))

    snap = tmp_path / "snap"
    gpuplan(slurm, "slurm", "snapshot", "--out-dir", str(snap))
    run_doc = json.loads((snap / "running.json").read_text())
    assert [(j["id"], j["gpus"]) for j in run_doc["jobs"]] == [(running, 4)]
    assert json.loads((snap / "cluster.json").read_text())["nodes"] == [slurm.node]
    scored = tmp_path / "scored.csv"
    gpuplan(slurm, "score", str(snap / "queue.csv"), "--out", str(scored), "--models",
            str(models))
    start, t0 = minute_start()
    profile = tmp_path / "profile.json"
    profile.write_text(ProfileFile(start=start, step_minutes=60, quantile=0.95,
                                   fitted_through=start, services=()).to_json())
    day = tmp_path / "day"
    tracked = dict(slurm.env, GPUPLAN_TRACKING="on",
                   MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path}/mlflow.db",
                   MLFLOW_DISABLE_TELEMETRY="true")
    gpuplan(slurm, "plan-day", "--queue", str(scored), "--profile", str(profile), "--running",
            str(snap / "running.json"), "--cluster", str(snap / "cluster.json"), "--start",
            start, "--out-dir", str(day), env=tracked)
    plan = json.loads((day / "plan.json").read_text())
    now_ids = [j for j in queued if plan["starts"].get(j, {}).get("start") == 0]
    later = [j for j in queued if plan["starts"].get(j, {}).get("start", 0) > 0]
    unplaced = [j for j in queued if j not in plan["starts"]]
    assert now_ids and later  # 4 GPUs free now, 14 asked for: the plan must defer some

    applied = gpuplan(slurm, "slurm", "apply", str(day / "plan.json"))
    assert "commands applied" in applied.stdout
    jobs = slurm.wait("the jobs planned now to run", lambda: (
        lambda js: js if all(js[j]["job_state"] == "RUNNING" for j in now_ids) else None
    )(slurm.jobs()))
    for j in now_ids:
        assert jobs[j]["nodes"] == slurm.node
    for j in later:
        begin = t0 + plan["starts"][j]["start"] * 3600
        assert jobs[j]["job_state"] == "PENDING" and jobs[j]["state_reason"] == "BeginTime"
        assert abs(jobs[j]["eligible_time"] - begin) <= 90
        assert jobs[j]["required_nodes"] == slurm.node
    for j in unplaced:
        assert jobs[j]["job_state"] == "PENDING" and jobs[j]["priority"] == 0
    assert jobs[running]["job_state"] == "RUNNING"
    again = gpuplan(slurm, "slurm", "apply", str(day / "plan.json"))
    assert "nothing to change" in again.stdout
    log = [json.loads(ln) for ln in (day / "slurm-apply.log").read_text().splitlines()]
    assert log and all(e.get("ok") for e in log)

    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    experiment = client.get_experiment_by_name("gpuplan-plans")
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    assert runs[0].data.metrics["started"] == len(now_ids) + len(later)


def plan_with_reservation(ids: dict[str, str], start: str) -> dict:
    """8 GPUs: a (2) now on 0-1, b (4) at step 1 on 4-7, c (8) reserved from step 2, d left."""
    a, b, c = ids["a"], ids["b"], ids["c"]
    grid = [[a, a] + [None] * 6, [None] * 4 + [b] * 4, [c] * 8] + [[None] * 8] * 21
    return {"scenario": "day", "policy": "fast", "grid": grid, "start": start,
            "step_minutes": 60, "metrics": {}, "kinds": {},
            "starts": {a: {"start": 0, "end": 1, "first_gpu": 0},
                       b: {"start": 1, "end": 2, "first_gpu": 4},
                       c: {"start": 2, "end": 3, "first_gpu": 0}},
            "unplaced": [ids["d"]],
            "reservations": [{"id": c, "start": 2, "first_gpu": 0, "gpus": 8}]}


def failing_scontrol(tmp_path: Path, job: str) -> Path:
    """A bin dir whose scontrol fails once on `release JOB` (a timeout, say), then recovers."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in ("squeue", "sinfo", "sacct"):
        (bindir / name).symlink_to(subprocess.run(["which", name], capture_output=True,
                                                  text=True, check=True).stdout.strip())
    real = subprocess.run(["which", "scontrol"], capture_output=True, text=True,
                          check=True).stdout.strip()
    wrapper = bindir / "scontrol"
    wrapper.write_text(f"""#!/bin/sh
if [ "$1" = release ] && [ "$2" = {job} ] && [ ! -e {bindir}/failed ]; then
    touch {bindir}/failed
    echo "slurm_load_jobs error: Socket timed out on send/recv operation" >&2
    exit 1
fi
exec {real} "$@"
""")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return bindir


def test_apply_with_a_reservation_survives_a_failing_scontrol_and_release_all_undoes_it(
        slurm, tmp_path):
    ids = {k: slurm.sbatch(g, minutes=60, payload="sleep 600", hold=True, name=k,
                           comment=meta())
           for k, g in (("a", 2), ("b", 4), ("c", 8), ("d", 1))}
    start, t0 = minute_start()
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(plan_with_reservation(ids, start)))

    dry = gpuplan(slurm, "slurm", "apply", str(plan), "--dry-run")
    assert f"scontrol release {ids['a']}" in dry.stdout and "dry run" in dry.stdout
    jobs = slurm.jobs()
    assert all(jobs[j]["admin_comment"] == "" for j in ids.values())  # nothing changed

    env = dict(slurm.env, GPUPLAN_SLURM_BIN=str(failing_scontrol(tmp_path, ids["a"])))
    first = gpuplan(slurm, "slurm", "apply", str(plan), env=env, ok=False)
    assert first.returncode == 1
    assert f"FAILED: scontrol release {ids['a']}" in first.stderr
    assert f"not applied: scontrol release {ids['a']}" in first.stderr
    assert "rerun the same command" in first.stderr
    assert slurm.jobs()[ids["a"]]["job_state"] == "PENDING"

    second = gpuplan(slurm, "slurm", "apply", str(plan), env=env)
    assert second.stdout.strip().splitlines()[-1] == "1 commands applied"
    slurm.wait("job a to run", lambda: slurm.jobs()[ids["a"]]["job_state"] == "RUNNING")
    third = gpuplan(slurm, "slurm", "apply", str(plan))
    assert "nothing to change" in third.stdout

    resv = slurm.run("scontrol", "-o", "show", "reservation").stdout
    line = [ln for ln in resv.splitlines() if f"ReservationName=gpuplan-{ids['c']}" in ln]
    assert len(line) == 1 and f"Nodes={slurm.node} " in line[0]
    jobs = slurm.jobs()
    assert jobs[ids["c"]]["resv_name"] == f"gpuplan-{ids['c']}"
    assert abs(jobs[ids["b"]]["eligible_time"] - (t0 + 3600)) <= 90
    assert jobs[ids["d"]]["priority"] == 0  # unplaced: held

    undo = gpuplan(slurm, "slurm", "release-all")
    assert f"scontrol delete reservation gpuplan-{ids['c']}" in undo.stdout
    assert "gpuplan-" not in slurm.run("scontrol", "-o", "show", "reservation").stdout
    jobs = slurm.jobs()
    assert jobs[ids["a"]]["job_state"] == "RUNNING"  # running work is never touched
    for k in ("b", "c", "d"):
        assert jobs[ids[k]]["admin_comment"] == "" and jobs[ids[k]]["required_nodes"] == ""
