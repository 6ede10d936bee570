"""Slurm's outputs, 22.05 and 23.11 structures: the same records, and bad fields named."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from allocator.core.errors import InputError
from pipelines.slurm.history import build_history
from pipelines.slurm.parse import (
    expand_hostlist,
    gpus_in,
    parse_meta,
    parse_sacct,
    parse_sinfo,
    parse_squeue,
)
from pipelines.slurm.snapshot import take_snapshot

DATA = Path(__file__).parent / "data" / "slurm"


def text(name: str) -> str:
    return (DATA / name).read_text()


def test_squeue_both_structures_give_the_same_jobs():
    old, new = parse_squeue(text("squeue-22.05.json")), parse_squeue(text("squeue-23.11.json"))
    assert old == new
    by_id = {j.id: j for j in old}
    assert {j.state for j in old} == {"COMPLETED", "FAILED", "RUNNING", "PENDING"}
    running = by_id["7"]
    assert running.state == "RUNNING" and running.gpus == 4 and running.nodes == ("vm",)
    assert running.gpu_index["vm"] in ((0, 1, 2, 3), (4, 5, 6, 7))
    held = by_id["12"]
    assert held.held and held.priority == 0 and held.gpus == 1 and held.time_limit_minutes == 90
    assert parse_meta(held.comment)["algorithm"] == "gptq"
    assert not by_id["13"].held and by_id["13"].gpus == 2 and by_id["13"].comment == ""


def test_sinfo_both_structures_give_the_same_nodes_sorted_by_name():
    old, new = parse_sinfo(text("sinfo-22.05.json")), parse_sinfo(text("sinfo-23.11.json"))
    assert [(n.name, n.gpus) for n in old] == [(n.name, n.gpus) for n in new]
    assert [(n.name, n.gpus) for n in old] == [("cpu-only", 0), ("gpu-b", 8), ("vm", 8)]


def test_sacct_json_both_structures_and_the_text_form_agree():
    old = parse_sacct(text("sacct-22.05.json"))
    new = parse_sacct(text("sacct-23.11.json"))
    flat = parse_sacct(text("sacct-22.05.txt"))
    assert old == new
    key = [(j.id, j.state, j.gpus, j.elapsed_seconds, j.comment) for j in old]
    assert key == [(j.id, j.state, j.gpus, j.elapsed_seconds, j.comment) for j in flat]
    assert [j.gpus for j in old] == [1, 2, 2, 4]


def test_history_keeps_finished_gpu_jobs_with_metadata_and_says_why_not_the_rest():
    hist = build_history(parse_sacct(text("sacct-22.05.json")))
    assert list(hist.training["id"]) == ["1"]
    assert hist.training["gpu_hours"].iloc[0] == pytest.approx(1 / 3600)
    reasons = {u.id: u.reason for u in hist.unusable}
    assert "no gpuplan metadata" in reasons["5"]
    assert reasons["6"].startswith("state FAILED") and reasons["7"].startswith("state RUNNING")
    # --features fills what the comment lacks: job 5 by id, with one bad value -> named
    meta = parse_meta(parse_sacct(text("sacct-22.05.json"))[0].comment)
    hist = build_history(parse_sacct(text("sacct-22.05.json")),
                         {"5": dict(meta, params_b=-1)})
    assert "field 'params_b'" in {u.id: u.reason for u in hist.unusable}["5"]
    hist = build_history(parse_sacct(text("sacct-22.05.json")), {"5": meta})
    assert list(hist.training["id"]) == ["1", "5"]


def test_snapshot_packs_running_jobs_and_maps_gpus_to_nodes_in_name_order():
    jobs = parse_squeue(text("squeue-22.05.json"))
    snap = take_snapshot(jobs, parse_sinfo(text("sinfo-22.05.json")), now=1796059400)
    assert snap.cluster["nodes"] == ["gpu-b", "vm"]  # the GPU-less node is not planned
    assert snap.cluster["cluster"] == {"gpus": 16, "node_size": 8, "step_minutes": 60,
                                       "horizon_steps": 24}
    running = {j["id"]: j for j in snap.running["jobs"]}
    assert set(running) == {"7", "9"}
    blocks = sorted((j["first_gpu"], j["gpus"]) for j in running.values())
    assert all(b >= 8 and b % k == 0 for b, k in blocks)  # on vm = node 1: GPUs 8-15
    assert blocks[0][0] + blocks[0][1] <= blocks[1][0]
    queue = snap.queue.set_index("id")
    assert list(queue.index) == ["8", "10", "11", "12", "13"]
    assert queue.loc["12", "kind"] == "quantization" and queue.loc["12", "priority"] == 3
    assert queue.loc["13", "kind"] == "training" and queue.loc["13", "gpus"] == 2


@pytest.mark.parametrize(("name", "edit", "field"), [
    ("squeue-22.05.json", lambda d: d["jobs"][3].update(job_state=7), "job_state"),
    ("squeue-23.11.json", lambda d: d["jobs"][0].update(time_limit={"number": "x"}),
     "time_limit"),
    ("squeue-22.05.json", lambda d: d["jobs"][0].pop("job_id"), "job_id"),
    ("squeue-22.05.json", lambda d: d.pop("jobs"), "jobs"),
])
def test_a_squeue_field_not_recognised_is_named(name, edit, field):
    doc = json.loads(text(name))
    edit(doc)
    with pytest.raises(InputError) as err:
        parse_squeue(json.dumps(doc))
    assert err.value.field == field


def test_sacct_text_without_a_column_is_named():
    lines = text("sacct-22.05.txt").splitlines()
    with pytest.raises(InputError) as err:
        parse_sacct("\n".join(ln.rsplit("|", 1)[0] for ln in lines))
    assert err.value.field == "Comment"


def test_small_parsers():
    assert expand_hostlist("gpu[01-03,07],cpu5") == ("gpu01", "gpu02", "gpu03", "gpu07", "cpu5")
    assert gpus_in("gres:gpu:2") == gpus_in("gres/gpu:2") == gpus_in("gres/gpu=2") == 2
    assert gpus_in("gpu:a100:4") == 4 and gpus_in("cpu=4,mem=1G") == 0
    assert parse_meta("not ours") is None
    with pytest.raises(InputError):
        parse_meta("gpuplan:[1, 2]")


def test_cli_bad_squeue_is_one_line_exit_2_and_nothing_written(tmp_path):
    doc = json.loads(text("squeue-23.11.json"))
    doc["jobs"][2]["job_state"] = {"odd": True}
    bad = tmp_path / "squeue.json"
    bad.write_text(json.dumps(doc))
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "pipelines.cli", "slurm", "snapshot",
                           "--out-dir", str(out), "--squeue", str(bad),
                           "--sinfo", str(DATA / "sinfo-23.11.json")],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert "job '3'" in done.stderr and "field 'job_state'" in done.stderr
    assert not out.exists()


def test_squeue_reporting_an_error_is_refused_not_read_as_an_empty_queue():
    with pytest.raises(InputError) as err:
        parse_squeue(text("squeue-22.05-unreachable.json"))
    assert err.value.field == "errors" and "slurm_load_jobs" in err.value.message


def test_slurm_commands_missing_is_one_line_exit_1(tmp_path):
    done = subprocess.run([sys.executable, "-m", "pipelines.cli", "slurm", "snapshot",
                           "--out-dir", str(tmp_path / "out")], capture_output=True, text=True,
                          check=False, env={"PATH": "/usr/bin:/bin",
                                            "GPUPLAN_SLURM_BIN": str(tmp_path / "none")})
    assert done.returncode == 1
    assert done.stderr.startswith("gpuplan: error: squeue --json: ")
    assert done.stderr.strip().count("\n") == 0 and not (tmp_path / "out").exists()


def test_cli_bad_sacct_is_one_line_exit_2_and_nothing_written(tmp_path):
    doc = json.loads(text("sacct-23.11.json"))
    doc["jobs"][1]["tres"] = {"allocated": "gres/gpu=2"}
    bad = tmp_path / "sacct.json"
    bad.write_text(json.dumps(doc))
    out = tmp_path / "history.csv"
    done = subprocess.run([sys.executable, "-m", "pipelines.cli", "slurm", "history",
                           "--out", str(out), "--sacct", str(bad)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0
    assert "job '5'" in done.stderr and "field 'tres.allocated'" in done.stderr
    assert not out.exists()
